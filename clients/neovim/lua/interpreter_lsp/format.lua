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

--- The text of a kernel's error as the server words it (output.py, error_text): the traceback without its
--- colour codes; without one, "name: value"; a failed shell command (no name, its exit status as the value)
--- reads "exit status N".
---@param ename string?
---@param evalue string?
---@param traceback table?
---@return string
function M.error_text(ename, evalue, traceback)
  local lines = type(traceback) == "table" and table.concat(traceback, "\n") or ""
  lines = lines:gsub("\27%[[%d;?]*[ -/]*[@-~]", "")
  if lines ~= "" then
    return lines
  end
  ename, evalue = ename or "", evalue or ""
  if ename ~= "" then
    return evalue ~= "" and (ename .. ": " .. evalue) or ename
  end
  if evalue:match("^%d+$") then
    return "exit status " .. evalue
  end
  return evalue ~= "" and evalue or "Error"
end

function M.seconds(ms)
  if not ms then
    return nil
  end
  return ms < 1000 and string.format("%d ms", ms) or string.format("%.1f s", ms / 1000)
end

return M
