-- Text helpers shared by the session's drawing (session.lua, session_turns.lua, session_runs.lua): a
-- text as lines, fenced code, a newline-ended text, durations.
local hidden = require("interpreter_lsp.hidden")

local M = {}

function M.split_lines(text)
  return vim.split((text or ""):gsub("\n$", ""), "\n", { plain = true })
end

--- Code as a card shows it, fenced: each character that does not show or that would reorder its line is a
--- `<U+202E>` marker (hidden.lua), so what the person reads is what runs; a carriage return before a line
--- feed is a Windows line end and goes with it. Also returns the markers' columns, by index in the lines.
---@param language string|nil
---@param code string
---@return string[], table<integer, integer[][]>
function M.fence(language, code)
  code = code or ""
  local lines, marks = { "```" .. (language or "") }, {}
  local pieces = M.split_lines(code)
  for i, piece in ipairs(pieces) do
    -- Every line but the last ended at a line feed; the last one too if the code ends with one.
    local n = #lines + 1
    lines[n], marks[n] = hidden.show(piece, i < #pieces or code:sub(-1) == "\n")
  end
  table.insert(lines, "```")
  return lines, marks
end

--- Append `more` (lines, with their markers' columns `more_marks`) to `lines` and `marks`.
function M.extend(lines, marks, more, more_marks)
  local base = #lines
  for i, line in ipairs(more) do
    lines[base + i] = line
    marks[base + i] = more_marks and more_marks[i] or nil
  end
end

--- One line of a card that names something the server was told by another program (an agent's name, a
--- reason, a file), appended with its markers: as code, it is shown with its hidden characters visible.
function M.add_line(lines, marks, text)
  local n = #lines + 1
  lines[n], marks[n] = hidden.show(text, true)
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
