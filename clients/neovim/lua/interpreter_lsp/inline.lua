-- Output where the code is (as molten-nvim shows it): the latest output of a run started from a buffer
-- (:InterpreterRun, a code lens, a code action) as virtual lines under its last line, with how it ended,
-- how long it took and when; one block per cell or range, replaced by its next run, moved with the text.
-- Long output shows its last lines and says where the rest is (the panel). The run's last image shows
-- as its file's path and, as setup option `images` decides (images.mode), drawn below the block: by
-- image.nvim, or as kitty graphics placeholders in the block's own virtual lines (kitty.lua). This file
-- owns the blocks and the images drawn with them: an image goes when its block is replaced or cleared.
-- The panel keeps everything as before.
local M = {}

local ns = vim.api.nvim_create_namespace("interpreter_lsp_inline")
M.ns = ns

local images = require("interpreter_lsp.images")

---@class interpreter_lsp.InlineImage
---@field path string
---@field mode "image.nvim"|"kitty"
---@field img table|nil image.nvim's image
---@field offset integer|nil rows of the block above image.nvim's image
---@field kitty interpreter_lsp.KittyImage|nil

---@type table<integer, table<integer, interpreter_lsp.InlineImage>> buffer -> block mark -> its image
M.drawn = {}

--- Remove the image drawn with block `mark` of `buf`, if any.
local function drop_image(buf, mark)
  local of_buf = M.drawn[buf]
  local shown = of_buf and of_buf[mark]
  if not shown then
    return
  end
  of_buf[mark] = nil
  if shown.img then
    pcall(shown.img.clear, shown.img)
  end
  if shown.kitty then
    require("interpreter_lsp.kitty").delete(shown.kitty.id)
  end
end

vim.api.nvim_create_autocmd("BufWipeout", {
  group = vim.api.nvim_create_augroup("interpreter_lsp_inline", { clear = true }),
  desc = "the images drawn under a wiped buffer's code go with it",
  callback = function(ev)
    for mark in pairs(M.drawn[ev.buf] or {}) do
      drop_image(ev.buf, mark)
    end
    M.drawn[ev.buf] = nil
  end,
})

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
    drop_image(buf, m[1])
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

--- A window showing `buf`: the current one when it does.
local function window_of(buf)
  if vim.api.nvim_win_get_buf(0) == buf then
    return vim.api.nvim_get_current_win()
  end
  return vim.fn.win_findbuf(buf)[1]
end

--- The image of block `a` for `path`, drawn anew when it is another image, or when image.nvim's
--- offset (the block's rows above it) changed; nil when it is not drawn (the path line says where).
---@param a {buf: integer, mark: integer}
---@param path string
---@param want string|nil setup option `images`
---@param rows integer the block's text rows
---@return interpreter_lsp.InlineImage|nil
local function image_for(a, path, want, rows)
  M.drawn[a.buf] = M.drawn[a.buf] or {}
  local shown = M.drawn[a.buf][a.mark]
  if shown and shown.path == path and (shown.mode ~= "image.nvim" or shown.offset == rows) then
    return shown
  end
  local mode = images.mode(want)
  if mode == "path" then
    drop_image(a.buf, a.mark)
    return nil
  end
  local win = window_of(a.buf)
  if mode == "image.nvim" and not win then
    return shown -- drawn once a window shows the buffer (at the block's next redraw)
  end
  drop_image(a.buf, a.mark)
  if mode == "kitty" then
    local k = require("interpreter_lsp.kitty").show(path, win, 2)
    shown = k and { path = path, mode = "kitty", kitty = k } or nil
  else
    local row = vim.api.nvim_buf_get_extmark_by_id(a.buf, ns, a.mark, {})[1]
    -- Anchored on the cell's last line, as the block is: image.nvim draws below its `y` line, padded
    -- with virtual lines; render_offset_top puts it below the block's rows rather than over them (its
    -- padding counts those rows again, so as many blank rows follow the image: better than covering
    -- the block, whichever order Neovim draws the two marks' virtual lines in).
    local ok, img = pcall(images.image_nvim().from_file, path, { window = win, buffer = a.buf,
      with_virtual_padding = true, x = 0, y = row, render_offset_top = rows })
    if ok and img then
      pcall(img.render, img)
      shown = { path = path, mode = "image.nvim", img = img, offset = rows }
    else
      shown = nil
    end
  end
  M.drawn[a.buf][a.mark] = shown
  return shown
end

--- Draw (or redraw) `run`'s block under its code, with its last image.
---@param panel interpreter_lsp.Panel
---@param run interpreter_lsp.Run
---@param want string|nil setup option `images`
function M.draw(panel, run, want)
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
  local lines = M.virt_lines(run, tail, total)
  local shown = run.last_image and image_for(a, run.last_image, want, #lines)
  if shown and shown.kitty then
    vim.list_extend(lines, require("interpreter_lsp.kitty").placeholder_lines(shown.kitty.id, shown.kitty.cols,
      shown.kitty.rows, "  "))
  end
  vim.api.nvim_buf_set_extmark(a.buf, ns, pos[1], 0, {
    id = a.mark,
    virt_lines = lines,
    virt_lines_above = false,
  })
end

--- Remove the blocks (and their images) from `buf`, else from every buffer; with `first`/`last`
--- (0-based rows, inclusive), only the blocks under those lines.
---@param buf integer|nil
---@param first integer|nil
---@param last integer|nil
function M.clear(buf, first, last)
  if buf and first then
    if vim.api.nvim_buf_is_valid(buf) then
      for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, { first, 0 }, { last or first, -1 }, {})) do
        drop_image(buf, m[1])
        vim.api.nvim_buf_del_extmark(buf, ns, m[1])
      end
    end
    return
  end
  for _, b in ipairs(buf and { buf } or vim.tbl_keys(M.drawn)) do
    for mark in pairs(M.drawn[b] or {}) do
      drop_image(b, mark)
    end
    M.drawn[b] = nil
  end
  for _, b in ipairs(buf and { buf } or vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_valid(b) then
      vim.api.nvim_buf_clear_namespace(b, ns, 0, -1)
    end
  end
end

return M
