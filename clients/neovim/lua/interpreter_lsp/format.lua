-- Text helpers shared by the session's drawing (session.lua, session_turns.lua, session_runs.lua): a
-- text as lines, fenced code, a newline-ended text, durations.
local M = {}

function M.split_lines(text)
  return vim.split((text or ""):gsub("\n$", ""), "\n", { plain = true })
end

function M.fence(language, code)
  local lines = { "```" .. (language or "") }
  vim.list_extend(lines, M.split_lines(code))
  table.insert(lines, "```")
  return lines
end

function M.with_newline(text)
  return text:sub(-1) == "\n" and text or text .. "\n"
end

function M.seconds(ms)
  if not ms then
    return nil
  end
  return ms < 1000 and string.format("%d ms", ms) or string.format("%.1f s", ms / 1000)
end

return M
