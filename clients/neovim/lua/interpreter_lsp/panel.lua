-- The panel: a markdown buffer made of sections (panel_sections.lua: what they hold and how they are
-- written), and the windows that show it. Events only change section state and mark it dirty; a timer
-- flushes dirty sections to the buffer at most once per `throttle_ms`, so a flood of output costs one
-- small buffer write per tick. This file owns the buffer, that timer, the windows (open, close, keeping
-- the end in view) and the window bar.
local M = {}

local ns = vim.api.nvim_create_namespace("interpreter_lsp_panel")
M.ns = ns

local HIGHLIGHTS = {
  InterpreterStderr = "DiagnosticWarn",
  InterpreterError = "DiagnosticError",
  InterpreterOk = "DiagnosticOk",
  InterpreterMuted = "Comment",
  InterpreterTitle = "Title",
  InterpreterRisk = "DiagnosticWarn",
  -- A character of code that does not show or that reorders its line, drawn as `<U+202E>` (hidden.lua).
  InterpreterHidden = "DiagnosticWarn",
}

function M.define_highlights()
  for name, link in pairs(HIGHLIGHTS) do
    vim.api.nvim_set_hl(0, name, { link = link, default = true })
  end
end

---@class interpreter_lsp.Panel
---@field buf integer
---@field opts interpreter_lsp.PanelOptions
---@field sections interpreter_lsp.Section[]
---@field total integer lines of all shown sections
---@field timer uv.uv_timer_t|nil
---@field winbar_parts string[]
---@field follow_once boolean the next flush moves every window of the panel to the end
---@field on_flush fun()[]|nil
local Panel = {}
Panel.__index = Panel

-- Sections and how they are written into the buffer: methods added to Panel.
require("interpreter_lsp.panel_sections")(Panel, ns)

---@param name string
---@param opts interpreter_lsp.PanelOptions
---@return interpreter_lsp.Panel
function M.new(name, opts)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_name(buf, "interpreter://" .. name)
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  vim.bo[buf].undolevels = -1
  vim.bo[buf].filetype = "markdown"
  vim.bo[buf].modifiable = false
  -- Markdown drawn as markdown: treesitter's highlights, with its conceal hiding `**` and the fences.
  pcall(vim.treesitter.start, buf, "markdown")
  local self = setmetatable({
    buf = buf,
    opts = opts,
    sections = {},
    total = 0,
    timer = nil,
    winbar_parts = {},
  }, Panel)
  return self
end

function Panel:schedule()
  if self.timer then
    return
  end
  self.timer = vim.uv.new_timer()
  self.timer:start(self.opts.throttle_ms, 0, function()
    vim.schedule(function()
      local timer = self.timer
      self.timer = nil
      if timer then
        timer:close()
      end
      self:flush()
    end)
  end)
end

-- Cursor on the last line and that line at the window's bottom, the window filled above it (what `zb`
-- does, without running a normal-mode command from a timer while the user types).
local function show_end(win, last)
  vim.api.nvim_win_set_cursor(win, { last, 0 })
  if not vim.api.nvim_win_text_height then
    return
  end
  local height = vim.api.nvim_win_get_height(win)
  local top, used = last, 0
  while top >= 1 do
    local rows = vim.api.nvim_win_text_height(win, { start_row = top - 1, end_row = top - 1 }).all
    if used + rows > height then
      break
    end
    used = used + rows
    top = top - 1
  end
  top = math.min(top + 1, last)
  vim.api.nvim_win_call(win, function()
    vim.fn.winrestview({ topline = top })
  end)
end

--- Write every dirty section to the buffer; keep following the end in windows that were at the end.
function Panel:flush()
  if not vim.api.nvim_buf_is_valid(self.buf) then
    return
  end
  local wins = vim.fn.win_findbuf(self.buf)
  local before = vim.api.nvim_buf_line_count(self.buf)
  local follow = {}
  for _, win in ipairs(wins) do
    follow[win] = vim.api.nvim_win_get_cursor(win)[1] >= before
  end
  vim.bo[self.buf].modifiable = true
  local ok, err = pcall(self._write_sections, self)
  vim.bo[self.buf].modifiable = false
  if not ok then
    vim.notify("interpreter_lsp: panel update failed: " .. tostring(err), vim.log.levels.ERROR)
  end
  local after = vim.api.nvim_buf_line_count(self.buf)
  local follow_all = self.follow_once
  self.follow_once = false
  for _, win in ipairs(wins) do
    if vim.api.nvim_win_is_valid(win) then
      if follow_all or follow[win] then
        -- Cursor on the last line and that line at the window's bottom: the end is on screen even when
        -- the window is not the current one (Neovim would otherwise fix the view only at its next redraw).
        show_end(win, after)
      end
      self:_draw_winbar(win)
      -- Redraw the panel now: the flush runs from a timer, and a window that is not the current one is
      -- otherwise drawn stale until the next keypress (or Ctrl-L).
      if vim.api.nvim__redraw then
        pcall(vim.api.nvim__redraw, { win = win, valid = false, winbar = true, flush = true })
      end
    end
  end
  for _, fn in ipairs(vim.list_extend({}, self.on_flush or {})) do
    pcall(fn)
  end
end

--- At the next flush, show the end in every window of the panel (after the user acted on a proposal,
--- what follows is at the end).
function Panel:follow()
  self.follow_once = true
  self:schedule()
end

--- The window bar's text for a window `width` columns wide: the parts that fit, most important first
--- (a part that does not fit is left out, never cut in the middle), "%" escaped.
---@param parts string[]
---@param width integer
---@return string
function M.fit(parts, width)
  local shown, used = {}, 1
  for i, part in ipairs(parts) do
    local cost = vim.fn.strdisplaywidth(part) + (#shown > 0 and 3 or 0)
    if used + cost <= width then
      table.insert(shown, part)
      used = used + cost
    elseif i == 1 then
      -- The most important part alone is too wide: cut its end, never its start.
      table.insert(shown, vim.fn.strcharpart(part, 0, math.max(width - 2, 1)) .. "…")
      used = width
    end
  end
  return (" " .. table.concat(shown, " · ")):gsub("%%", "%%%%")
end

---@param win integer
function Panel:_draw_winbar(win)
  local width = vim.api.nvim_win_get_width(win)
  vim.wo[win].winbar = M.fit(self.winbar_parts, width)
end

---@param parts string[] the window bar's pieces, most important first
function Panel:set_winbar(parts)
  self.winbar_parts = parts
  for _, win in ipairs(vim.fn.win_findbuf(self.buf)) do
    self:_draw_winbar(win)
  end
end

---@return integer|nil
function Panel:window()
  return vim.fn.win_findbuf(self.buf)[1]
end

--- Show the panel in a split without moving the cursor out of the current window.
---@return integer window
function Panel:open()
  local win = self:window()
  if win then
    return win
  end
  local o = self.opts
  local vertical = o.position == "right" or o.position == "left"
  local full = vertical and vim.o.columns or vim.o.lines
  local size = o.size < 1 and math.floor(full * o.size) or math.floor(o.size)
  local config = { split = o.position == "top" and "above" or o.position == "bottom" and "below" or o.position, win = -1 }
  if vertical then
    config.width = math.max(size, 20)
  else
    config.height = math.max(size, 5)
  end
  win = vim.api.nvim_open_win(self.buf, false, config)
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  vim.wo[win].number = false
  vim.wo[win].relativenumber = false
  vim.wo[win].signcolumn = "no"
  vim.wo[win].foldenable = false
  vim.wo[win].spell = false
  -- Rendered, not raw: `**Run**` reads "Run", fence lines are hidden (treesitter markdown's conceal), also
  -- on the cursor line.
  vim.wo[win].conceallevel = 2
  vim.wo[win].concealcursor = "nc"
  vim.wo[win].winfixwidth = vertical
  vim.wo[win].winfixheight = not vertical
  self:_draw_winbar(win)
  vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(self.buf), 0 })
  return win
end

function Panel:close()
  for _, win in ipairs(vim.fn.win_findbuf(self.buf)) do
    if #vim.api.nvim_list_wins() > 1 then
      vim.api.nvim_win_close(win, false)
    end
  end
end

function Panel:toggle()
  if self:window() then
    self:close()
  else
    self:open()
  end
end

return M
