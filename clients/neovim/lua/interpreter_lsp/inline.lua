-- Output where the code is (as molten-nvim shows it): the latest output of a run started from a buffer
-- (:InterpreterRun, a code lens, a code action) as virtual lines under its last line, with how it ended,
-- how long it took and when; one block per cell or range, replaced by its next run, moved with the text.
-- Long output shows its last lines and says where the rest is (the panel). An image shows as its file's
-- path, and is drawn there by image.nvim when installed. The panel keeps everything as before.
local M = {}

local ns = vim.api.nvim_create_namespace("interpreter_lsp_inline")
M.ns = ns

M.MAX_LINES = 8

local ICONS = { ok = "✓", error = "✗", interrupted = "■", died = "✗", timeout = "⏱", running = "▶", queued = "…" }
local HL = { ok = "InterpreterOk", error = "InterpreterError", died = "InterpreterError", timeout = "InterpreterError",
  interrupted = "InterpreterRisk" }

--- Anchor a run's inline output under lines [first, last) of `buf`: a mark on its last line, and any
--- earlier block over these lines goes.
---@return {buf: integer, mark: integer}|nil
function M.anchor(buf, first, last)
  if not (buf and vim.api.nvim_buf_is_valid(buf)) then
    return nil
  end
  local row = math.max(first, last - 1)
  row = math.min(row, vim.api.nvim_buf_line_count(buf) - 1)
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, { first, 0 }, { row, -1 }, {})) do
    vim.api.nvim_buf_del_extmark(buf, ns, m[1])
  end
  local mark = vim.api.nvim_buf_set_extmark(buf, ns, row, 0, {})
  return { buf = buf, mark = mark }
end

--- The virtual lines for `run` (its state, duration, time, and the last lines of its output).
---@param run interpreter_lsp.Run
---@param body string[] the run's last output lines (at most MAX_LINES + 1)
---@param total integer how many output lines the run has in all
---@return table virt_lines
function M.virt_lines(run, body, total)
  local format = require("interpreter_lsp.format")
  local head = string.format("  %s %s", ICONS[run.state] or "▶", run.state)
  if run.duration_ms then
    head = head .. " · " .. format.seconds(run.duration_ms)
  end
  if run.finished_at then
    head = head .. " · " .. os.date("%H:%M:%S", run.finished_at)
  end
  if run.message and run.message ~= "" then
    head = head .. " · " .. run.message:gsub("\n", " ")
  end
  local out = { { { head, HL[run.state] or "InterpreterMuted" } } }
  local shown = body
  if total > M.MAX_LINES then
    table.insert(out, { { string.format("  ⋯ %d earlier lines in the panel (:InterpreterOutput shows all)",
      total - M.MAX_LINES), "InterpreterMuted" } })
    shown = vim.list_slice(body, math.max(1, #body - M.MAX_LINES + 1))
  end
  for _, line in ipairs(shown) do
    if #line > 300 then
      line = line:sub(1, 300) .. " …"
    end
    table.insert(out, { { "  │ " .. line, line:find("^%[image%]") and "InterpreterMuted" or "Comment" } })
  end
  return out
end

--- Draw (or redraw) `run`'s block under its code.
---@param panel interpreter_lsp.Panel
---@param run interpreter_lsp.Run
function M.draw(panel, run)
  local a = run.anchor
  if not (a and vim.api.nvim_buf_is_valid(a.buf)) then
    return
  end
  local pos = vim.api.nvim_buf_get_extmark_by_id(a.buf, ns, a.mark, {})
  if not pos or not pos[1] then
    return -- the block was replaced by a later run of the same lines
  end
  -- Only the tail is read: a run with a million lines costs the same as one with ten.
  local sec = run.section
  local total = #sec.out + (sec.partial ~= "" and 1 or 0)
  local tail = vim.list_slice(sec.out, math.max(1, #sec.out - M.MAX_LINES))
  if sec.partial ~= "" then
    table.insert(tail, sec.partial)
  end
  vim.api.nvim_buf_set_extmark(a.buf, ns, pos[1], 0, {
    id = a.mark,
    virt_lines = M.virt_lines(run, tail, total),
    virt_lines_above = false,
  })
  if run.last_image and run.last_image ~= a.drawn_image then
    a.drawn_image = run.last_image
    M.draw_image(a, pos[1], run.last_image)
  end
end

--- With image.nvim installed, draw the run's last image under its code too.
function M.draw_image(a, row, path)
  local ok, image = pcall(require, "image")
  if not ok or type(image.from_file) ~= "function" then
    return
  end
  local win = vim.fn.win_findbuf(a.buf)[1]
  if win then
    local img = image.from_file(path, { window = win, buffer = a.buf, with_virtual_padding = true, x = 0, y = row + 1 })
    if img then
      img:render()
    end
  end
end

--- Remove every block from `buf` (or every buffer).
function M.clear(buf)
  for _, b in ipairs(buf and { buf } or vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_valid(b) then
      vim.api.nvim_buf_clear_namespace(b, ns, 0, -1)
    end
  end
end

return M
