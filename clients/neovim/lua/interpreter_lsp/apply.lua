-- Writing a proposal into a buffer, safely: the lines a range chat was about are tracked with extmarks
-- (an edit above them moves them, never the other way round), and nothing is written before the user saw
-- a diff of exactly what changes and accepted it. If the target's text changed since the request, the
-- diff is against the text now and says so; if it changes again while the diff is open, accepting shows
-- the new diff instead of writing. The server computes the edit (whole lines: docs/protocol.md).
local hidden = require("interpreter_lsp.hidden")

local M = {}

local ns = vim.api.nvim_create_namespace("interpreter_lsp_targets")
M.ns = ns

--- Lines [first, last) of `buf`.
local function lines_of(buf, first, last)
  return vim.api.nvim_buf_get_lines(buf, first, last, false)
end

---@class interpreter_lsp.Target
---@field buf integer
---@field mark integer|nil extmark over the lines (nil: a fixed place, e.g. below the cursor)
---@field first integer 0-based first line (for a fixed place)
---@field last integer 0-based line after the last (first == last: insert before `first`)
---@field original string[]|nil the lines' text when the request was made

--- Track lines [first, last) of `buf` (the lines a chat is about).
---@return interpreter_lsp.Target
function M.track(buf, first, last)
  local last_row = math.max(first, last - 1)
  local last_text = lines_of(buf, last_row, last_row + 1)[1] or ""
  -- Both ends keep to the text they started on: a line replaced whole (a formatter, a plugin's edit, `:s`)
  -- keeps the mark, and lines added above or below move it. (A line opened with `O` on the first line
  -- joins the target: the diff before writing shows it.)
  local mark = vim.api.nvim_buf_set_extmark(buf, ns, first, 0, {
    end_row = last_row,
    end_col = #last_text,
    right_gravity = false,
    end_right_gravity = false,
  })
  return { buf = buf, mark = mark, first = first, last = last, original = lines_of(buf, first, last) }
end

--- Where the target is now: first, last (0-based, end-exclusive), or nil when its lines were deleted.
---@param target interpreter_lsp.Target
---@return integer|nil, integer|nil
function M.where(target)
  if not target.mark then
    return target.first, target.last
  end
  if not vim.api.nvim_buf_is_valid(target.buf) then
    return nil, nil
  end
  local m = vim.api.nvim_buf_get_extmark_by_id(target.buf, ns, target.mark, { details = true })
  if not m or not m[1] then
    return nil, nil
  end
  local first, end_row = m[1], m[3].end_row or m[1]
  local collapsed = first == end_row and m[2] == m[3].end_col and table.concat(target.original or {}) ~= ""
  if end_row < first or collapsed then
    return nil, nil -- the lines were deleted: the mark collapsed
  end
  return first, end_row + 1
end

--- Whether the target's text is not what it was when the request was made.
function M.changed(target)
  if not target.original then
    return false
  end
  local first, last = M.where(target)
  if not first then
    return true
  end
  return not vim.deep_equal(lines_of(target.buf, first, last), target.original)
end

local diff = (vim.text and vim.text.diff) or vim.diff

local CONTEXT = 3

--- A unified diff of writing `code` over lines [first, last) of `buf`, with line numbers of the buffer.
---@return string[]
function M.diff_lines(buf, first, last, code)
  local total = vim.api.nvim_buf_line_count(buf)
  local from = math.max(0, first - CONTEXT)
  local before = lines_of(buf, from, first)
  local after = lines_of(buf, last, math.min(total, last + CONTEXT))
  local old = vim.list_extend(vim.list_extend(vim.list_extend({}, before), lines_of(buf, first, last)), after)
  local new = vim.list_extend(vim.list_extend(vim.list_extend({}, before), vim.split(code:gsub("\n$", ""), "\n", { plain = true })), after)
  local text = diff(table.concat(old, "\n") .. "\n", table.concat(new, "\n") .. "\n", { ctxlen = CONTEXT })
  local out = {}
  for _, line in ipairs(vim.split(text or "", "\n", { plain = true, trimempty = true })) do
    -- Hunk headers count from the context's first line: make them the buffer's line numbers.
    local a, b, c, d = line:match("^@@ %-(%d+),?(%d*) %+(%d+),?(%d*) @@")
    if a then
      local shift = function(n) return tostring(tonumber(n) + from) end
      line = string.format("@@ -%s%s +%s%s @@", shift(a), b ~= "" and ("," .. b) or "", shift(c), d ~= "" and ("," .. d) or "")
    end
    table.insert(out, line)
  end
  return out
end

--- "demo.py:2-3" (or "below demo.py:4") for lines [first, last) of `buf`.
function M.place(buf, first, last)
  local name = vim.fn.fnamemodify(vim.api.nvim_buf_get_name(buf), ":.")
  if first == last then
    return first == 0 and ("at the top of " .. name) or string.format("below %s:%d", name, first)
  end
  return last - first == 1 and string.format("%s:%d", name, first + 1) or string.format("%s:%d-%d", name, first + 1, last)
end

---@class interpreter_lsp.Review
---@field buf integer the diff's buffer
---@field win integer
---@field shown string[] the target's text the diff was drawn against

--- Show the diff of writing `prop` at `target` and let the user accept (`a`, <CR>) or not (`r`, `q`).
--- `on_accept(first, last)` writes; it is called only when the target's text is still what the diff showed.
---@param prop interpreter_lsp.Proposal
---@param target interpreter_lsp.Target
---@param on_accept fun(first: integer, last: integer)
---@param on_close fun(accepted: boolean)|nil
function M.review(prop, target, on_accept, on_close)
  local origin = vim.api.nvim_get_current_win()
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].filetype = "diff"
  pcall(vim.api.nvim_buf_set_name, buf, string.format("interpreter://apply-proposal-%d.diff", prop.index))
  local state = { shown = nil, done = false }

  local function draw(note)
    local first, last = M.where(target)
    local lines
    if not first then
      lines = { "The lines this proposal was for were deleted: nothing to write over.",
        "q closes; put the cursor where it goes and :InterpreterApply (or a range: :'<,'>InterpreterApply)." }
      state.shown = nil
    else
      state.shown = lines_of(target.buf, first, last)
      lines = { string.format("Proposal %d → %s · a (or <CR>) writes it · r or q does not (it stays pending)",
        prop.index, M.place(target.buf, first, last)) }
      if note then
        table.insert(lines, note)
      elseif M.changed(target) then
        table.insert(lines, "⚠ these lines changed since you asked: the diff is against their text now")
      end
      vim.list_extend(lines, M.diff_lines(target.buf, first, last, prop.code))
    end
    -- What is about to be written, read as code: its hidden characters show as `<U+202E>` markers
    -- (hidden.lua). This buffer is only read by eyes: the server writes the proposal as it holds it.
    local marks = {}
    for i, line in ipairs(lines) do
      lines[i], marks[i] = hidden.show(line, true)
    end
    vim.bo[buf].modifiable = true
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    vim.bo[buf].modifiable = false
    vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
    vim.api.nvim_buf_set_extmark(buf, ns, 0, 0, { end_row = 1, hl_group = "Title", hl_eol = true })
    for i, spans in pairs(marks) do
      for _, span in ipairs(spans) do
        vim.api.nvim_buf_set_extmark(buf, ns, i - 1, span[1], { end_col = span[2], hl_group = "InterpreterHidden", priority = 4200 })
      end
    end
    if lines[2] and lines[2]:find("^⚠") then
      vim.api.nvim_buf_set_extmark(buf, ns, 1, 0, { end_row = 2, hl_group = "DiagnosticWarn", hl_eol = true })
    end
  end

  local function close(accepted)
    if state.done then
      return
    end
    state.done = true
    for _, w in ipairs(vim.fn.win_findbuf(buf)) do
      if #vim.api.nvim_list_wins() > 1 then
        pcall(vim.api.nvim_win_close, w, true)
      end
    end
    if vim.api.nvim_win_is_valid(origin) then
      vim.api.nvim_set_current_win(origin)
    end
    if on_close then
      on_close(accepted)
    end
  end

  local function accept()
    local first, last = M.where(target)
    if not first or not state.shown then
      draw()
      return
    end
    if not vim.deep_equal(lines_of(target.buf, first, last), state.shown) then
      -- Changed while the diff was open: show what would happen now; never write blind.
      draw("⚠ the lines changed while this diff was open: this is the diff now; a writes it")
      return
    end
    close(true)
    on_accept(first, last)
  end

  draw()
  vim.cmd("botright split")
  local win = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(win, buf)
  vim.api.nvim_win_set_height(win, math.min(math.max(vim.api.nvim_buf_line_count(buf) + 1, 6), math.floor(vim.o.lines / 2)))
  vim.wo[win].number = false
  vim.wo[win].relativenumber = false
  vim.wo[win].wrap = false
  local function map(lhs, fn, desc)
    vim.keymap.set("n", lhs, fn, { buffer = buf, nowait = true, desc = desc })
  end
  map("a", accept, "Interpreter: write the proposal as this diff shows")
  map("<CR>", accept, "Interpreter: write the proposal as this diff shows")
  map("r", function() close(false) end, "Interpreter: do not write it (the proposal stays pending)")
  map("q", function() close(false) end, "Interpreter: do not write it (the proposal stays pending)")
  vim.api.nvim_create_autocmd("BufWipeout", { buffer = buf, once = true, callback = function() close(false) end })
  return { buf = buf, win = win, accept = accept, close = close }
end

--- The inline review (apply_preview = "inline", as codecompanion's inline assistant): in the source buffer
--- itself, the lines to be replaced are marked as removed and the proposal's lines show under them as
--- added (virtual lines, nothing written yet); `ga` writes it, `gr` does not. The same never-blind rule:
--- if the lines change while it is shown, `ga` redraws instead of writing.
function M.review_inline(prop, target, on_accept, on_close)
  local ins = vim.api.nvim_create_namespace("interpreter_lsp_review")
  local buf = target.buf
  local state = { shown = nil, done = false }
  local function clear()
    if vim.api.nvim_buf_is_valid(buf) then
      vim.api.nvim_buf_clear_namespace(buf, ins, 0, -1)
    end
  end
  local function draw(note)
    clear()
    local first, last = M.where(target)
    if not first then
      state.shown = nil
      vim.api.nvim_buf_set_extmark(buf, ins, 0, 0, { virt_lines = { { {
        "The lines this proposal was for were deleted: gr closes this", "DiagnosticWarn" } } }, virt_lines_above = true })
      return
    end
    state.shown = lines_of(buf, first, last)
    local head = string.format("Proposal %d → %s · ga writes it · gr does not (it stays pending)", prop.index,
      M.place(buf, first, last))
    local above = { { { head, "Title" } } }
    if note or M.changed(target) then
      table.insert(above, { { note or "⚠ these lines changed since you asked: this is against their text now", "DiagnosticWarn" } })
    end
    local anchor = math.max(0, math.min(first, vim.api.nvim_buf_line_count(buf) - 1))
    vim.api.nvim_buf_set_extmark(buf, ins, anchor, 0, { virt_lines = above, virt_lines_above = first < vim.api.nvim_buf_line_count(buf) })
    for row = first, last - 1 do
      vim.api.nvim_buf_set_extmark(buf, ins, row, 0, { line_hl_group = "DiffDelete", sign_text = "-", sign_hl_group = "DiffDelete" })
    end
    local added = {}
    local code_lines = vim.split(prop.code:gsub("\n$", ""), "\n", { plain = true })
    for i, line in ipairs(code_lines) do
      -- Hidden characters as `<U+202E>` markers (hidden.lua): the person reads what will be written.
      local ended = i < #code_lines or prop.code:sub(-1) == "\n"
      table.insert(added, vim.list_extend({ { "+ ", "DiffAdd" } }, hidden.chunks(line, "DiffAdd", ended)))
    end
    local below = math.max(0, (last > first and last - 1 or first - 1))
    below = math.min(below, vim.api.nvim_buf_line_count(buf) - 1)
    vim.api.nvim_buf_set_extmark(buf, ins, below, 0, { virt_lines = added, virt_lines_above = last == first and first == 0 })
  end
  local function close(accepted)
    if state.done then
      return
    end
    state.done = true
    clear()
    pcall(vim.keymap.del, "n", "ga", { buffer = buf })
    pcall(vim.keymap.del, "n", "gr", { buffer = buf })
    if on_close then
      on_close(accepted)
    end
  end
  local function accept()
    local first, last = M.where(target)
    if not first or not state.shown then
      draw()
      return
    end
    if not vim.deep_equal(lines_of(buf, first, last), state.shown) then
      draw("⚠ the lines changed while this was shown: this is the change now; ga writes it")
      return
    end
    close(true)
    on_accept(first, last)
  end
  draw()
  vim.keymap.set("n", "ga", accept, { buffer = buf, nowait = true, desc = "Interpreter: write the proposal shown here" })
  vim.keymap.set("n", "gr", function() close(false) end, { buffer = buf, nowait = true,
    desc = "Interpreter: do not write it (the proposal stays pending)" })
  -- Show it: the source window, at the target.
  local win = vim.fn.win_findbuf(buf)[1]
  local first = M.where(target)
  if win then
    vim.api.nvim_set_current_win(win)
    if first then
      pcall(vim.api.nvim_win_set_cursor, win, { first + 1, 0 })
    end
  end
  return { accept = accept, close = close }
end

return M
