-- What :InterpreterRun runs: a range, else the `# %%` cell around the cursor, else the line.
-- Line numbers here are 0-based and end-exclusive, like nvim_buf_get_lines.
local M = {}

-- A cell marker is a comment whose text starts with `%%`: `# %%`, `-- %%`, `// %%`, `;; %%`.
local MARKER = "^%s*[#%-/;]+%s*%%%%"

---@param line string
---@return boolean
function M.is_marker(line)
  return line:find(MARKER) ~= nil
end

---@class interpreter_lsp.LineSpan
---@field first integer 0-based first line
---@field last integer 0-based line after the last one
---@field kind "range"|"cell"|"line"

--- The cell around `row` (0-based): from after the marker above (or the top) to before the next
--- marker (or the end). nil when the buffer has no markers.
---@param lines string[]
---@param row integer
---@return interpreter_lsp.LineSpan|nil
function M.cell_at(lines, row)
  local has_marker = false
  for _, line in ipairs(lines) do
    if M.is_marker(line) then
      has_marker = true
      break
    end
  end
  if not has_marker then
    return nil
  end
  local first = 0
  for i = row, 0, -1 do
    if M.is_marker(lines[i + 1]) then
      first = i + 1
      break
    end
  end
  local last = #lines
  for i = row + 1, #lines - 1 do
    if M.is_marker(lines[i + 1]) then
      last = i
      break
    end
  end
  -- Blank lines around a cell's code are layout, not code.
  while first < last and vim.trim(lines[first + 1]) == "" do
    first = first + 1
  end
  while last > first and vim.trim(lines[last]) == "" do
    last = last - 1
  end
  return { first = first, last = last, kind = "cell" }
end

--- The span :InterpreterRun acts on.
---@param buf integer
---@param line1 integer|nil 1-based first line of a given range
---@param line2 integer|nil 1-based last line of a given range
---@param cursor_row integer 0-based cursor line
---@return interpreter_lsp.LineSpan
function M.span(buf, line1, line2, cursor_row)
  if line1 and line2 then
    return { first = line1 - 1, last = line2, kind = "range" }
  end
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  return M.cell_at(lines, cursor_row) or { first = cursor_row, last = cursor_row + 1, kind = "line" }
end

--- Length of `text` in the units of an LSP position encoding.
---@param text string
---@param encoding string "utf-8"|"utf-16"|"utf-32"
---@return integer
function M.character_length(text, encoding)
  if encoding == "utf-8" then
    return #text
  end
  if vim.fn.has("nvim-0.11") == 1 then
    return vim.str_utfindex(text, encoding == "utf-32" and "utf-32" or "utf-16")
  end
  local utf32, utf16 = vim.str_utfindex(text) ---@diagnostic disable-line: missing-parameter
  return encoding == "utf-32" and utf32 or utf16
end

--- An LSP range over whole lines [first, last), ending at the end of the last line's text.
---@param buf integer
---@param span interpreter_lsp.LineSpan
---@param encoding string
---@return table
function M.lsp_range(buf, span, encoding)
  local last_row = math.max(span.first, span.last - 1)
  local last_text = vim.api.nvim_buf_get_lines(buf, last_row, last_row + 1, false)[1] or ""
  return {
    start = { line = span.first, character = 0 },
    ["end"] = { line = last_row, character = M.character_length(last_text, encoding) },
  }
end

return M
