-- The panel's sections (a user message, assistant text, a proposal, a run, a note): each has a header,
-- a body of streamed text and a footer, and remembers how many buffer lines it has written, so a flush
-- rewrites only what changed. Long output keeps its head and tail on screen and the rest one key away
-- (body_lines), so the buffer stays small; very long lines are clipped on screen. Code (in a header) and the
-- model's text (a body) show each character that does not show or that reorders its line as a `<U+202E>`
-- marker (hidden.lua): the buffer is only ever read by eyes, never sent back. Methods of
-- interpreter_lsp.Panel, added by panel.lua.
local hidden = require("interpreter_lsp.hidden")

---@class interpreter_lsp.Section
---@field kind string "user"|"assistant"|"proposal"|"run"|"note"
---@field header string[]
---@field header_hl (string|false)[] highlight group per header line
---@field header_marks table<integer, integer[][]> per header line: its markers' byte columns (hidden.lua)
---@field mark_hidden boolean|nil the body is the model's text: its hidden characters show as markers, and a
---  carriage return is one of them (never a terminal's return to the start of the line)
---@field footer string[]
---@field out string[] complete body lines, all of them
---@field kinds (string|false)[] kind per body line: "stderr", "error", "muted" or false
---@field partial string the body's last, unfinished line
---@field partial_kind string|false
---@field cap integer|nil body lines shown before folding; nil: no folding
---@field data table free state of the owner (ids, status)
---@field shown boolean
---@field h_n integer header lines in the buffer
---@field b_n integer body lines in the buffer
---@field f_n integer footer lines in the buffer
---@field b_full integer complete body lines written (while not folded)
---@field folded boolean
---@field dirty boolean

---@param Panel table the Panel class
---@param ns integer the panel's highlight namespace
return function(Panel, ns)
  local KIND_HL = { stderr = "InterpreterStderr", error = "InterpreterError", muted = "InterpreterMuted" }

  ---@param kind string
  ---@param data table|nil
  ---@return interpreter_lsp.Section
  function Panel:add(kind, data)
    local sec = {
      kind = kind,
      header = {},
      header_hl = {},
      header_marks = {},
      footer = { "" },
      out = {},
      kinds = {},
      partial = "",
      partial_kind = false,
      cap = nil,
      data = data or {},
      shown = false,
      h_n = 0,
      b_n = 0,
      f_n = 0,
      b_full = 0,
      folded = false,
      dirty = true,
    }
    table.insert(self.sections, sec)
    self:schedule()
    return sec
  end

  ---@param sec interpreter_lsp.Section
  ---@param lines string[]
  ---@param hls (string|false)[]|nil
  ---@param marks table<integer, integer[][]>|nil per line: the byte columns of its hidden characters' markers
  function Panel:set_header(sec, lines, hls, marks)
    sec.header = lines
    sec.header_hl = hls or {}
    sec.header_marks = marks or {}
    sec.dirty = true
    self:schedule()
  end

  ---@param sec interpreter_lsp.Section
  ---@param lines string[]
  function Panel:set_footer(sec, lines)
    sec.footer = lines
    sec.dirty = true
    self:schedule()
  end

  -- A line as a terminal would leave it: text before a carriage return was overwritten.
  local function settle(line)
    if not line:find("\r", 1, true) then
      return line
    end
    line = line:gsub("\r$", "")
    local last = 0
    while true do
      local at = line:find("\r", last + 1, true)
      if not at then
        break
      end
      last = at
    end
    return line:sub(last + 1)
  end

  -- Lines longer than this are cut on screen (all of it stays one key away): a megabyte-long line would
  -- make every redraw of the panel slow.
  local MAX_LINE = 2000
  -- An unfinished line longer than this is ended, so streaming a huge line stays linear.
  local MAX_PARTIAL = 20000

  local function clip(line)
    if #line <= MAX_LINE then
      return line
    end
    return line:sub(1, MAX_LINE) .. string.format(" … (%d more characters)", #line - MAX_LINE)
  end

  --- Append streamed text to the section's body. `kind` colours the lines ("stderr", "error", "muted").
  ---@param sec interpreter_lsp.Section
  ---@param text string
  ---@param kind string|nil
  function Panel:append(sec, text, kind)
    if text == nil or text == "" then
      return
    end
    local pieces = vim.split(sec.partial .. text, "\n", { plain = true })
    local line_kind = kind or sec.partial_kind or false
    local keep = sec.mark_hidden and function(line) return line end or settle
    for i = 1, #pieces - 1 do
      table.insert(sec.out, keep(pieces[i]))
      table.insert(sec.kinds, (i == 1 and sec.partial_kind) or kind or false)
    end
    sec.partial = pieces[#pieces]
    sec.partial_kind = sec.partial ~= "" and line_kind or false
    if #sec.partial > MAX_PARTIAL then
      table.insert(sec.out, keep(sec.partial))
      table.insert(sec.kinds, sec.partial_kind)
      sec.partial, sec.partial_kind = "", false
    end
    sec.dirty = true
    self:schedule()
  end

  --- End the body's unfinished line, if any.
  ---@param sec interpreter_lsp.Section
  function Panel:finish_line(sec)
    if sec.partial ~= "" then
      self:append(sec, "\n")
    end
  end

  --- The body's lines, all of them, for viewing in full.
  ---@param sec interpreter_lsp.Section
  ---@return string[]
  function Panel:body_lines(sec)
    local lines = vim.list_extend({}, sec.out)
    if sec.partial ~= "" then
      table.insert(lines, sec.mark_hidden and sec.partial or settle(sec.partial))
    end
    return lines
  end

  --- Add sections above the ones already there: `fill()` adds them (with add()), then the earlier
  --- sections follow, redrawn whole.
  ---@param fill fun()
  function Panel:prepend(fill)
    local later = self.sections
    self.sections = {}
    fill()
    for _, sec in ipairs(later) do
      sec.shown, sec.dirty, sec.folded = false, true, false
      sec.h_n, sec.b_n, sec.f_n, sec.b_full = 0, 0, 0, 0
      table.insert(self.sections, sec)
    end
    vim.api.nvim_buf_clear_namespace(self.buf, ns, 0, -1)
    vim.bo[self.buf].modifiable = true
    vim.api.nvim_buf_set_lines(self.buf, 0, -1, false, {})
    vim.bo[self.buf].modifiable = false
    self.total = 0
    self:schedule()
  end

  function Panel:_write(first, last, lines)
    if self.total == 0 and first == 0 then
      last = -1
    end
    vim.api.nvim_buf_set_lines(self.buf, first, last, false, lines)
  end

  function Panel:_highlight(row, group)
    if group then
      vim.api.nvim_buf_set_extmark(self.buf, ns, row, 0, {
        end_row = row + 1,
        end_col = 0,
        hl_group = group,
        hl_eol = true,
        strict = false,
      })
    end
  end

  -- Replace buffer lines [first, first + old_n) with `lines`, highlighting each by `hls[i]` and the markers
  -- of its hidden characters by `marks[i]` (byte columns).
  function Panel:_replace(first, old_n, lines, hls, marks)
    if old_n > 0 then
      vim.api.nvim_buf_clear_namespace(self.buf, ns, first, first + old_n)
    end
    self:_write(first, first + old_n, lines)
    self.total = self.total + #lines - old_n
    for i = 1, #lines do
      local group = hls[i]
      if group then
        self:_highlight(first + i - 1, group)
      end
      for _, span in ipairs(marks and marks[i] or {}) do
        -- Above the line's own highlight (4096) and treesitter's.
        vim.api.nvim_buf_set_extmark(self.buf, ns, first + i - 1, span[1], {
          end_col = span[2], hl_group = "InterpreterHidden", priority = 4200, strict = false,
        })
      end
    end
  end

  -- A body line as it is shown: clipped, and for the model's text with its hidden characters as markers
  -- (a complete line ended at a line feed; the unfinished one is shown so too, until more of it comes).
  -- Returns the line and its markers' columns.
  local function shown(sec, line)
    if not sec.mark_hidden then
      return clip(line), nil
    end
    local text, spans = hidden.show(line, true)
    if spans and #text > MAX_LINE then
      spans = vim.tbl_filter(function(span) return span[2] <= MAX_LINE end, spans)
    end
    return clip(text), spans
  end

  local function kind_hls(kinds, from, to, partial_kind, with_partial)
    local hls = {}
    for i = from, to do
      hls[#hls + 1] = KIND_HL[kinds[i] or ""] or false
    end
    if with_partial then
      hls[#hls + 1] = KIND_HL[partial_kind or ""] or false
    end
    return hls
  end

  ---@param sec interpreter_lsp.Section
  ---@param start integer first buffer line of the body
  function Panel:_render_body(sec, start)
    local shown_partial = sec.b_n - sec.b_full -- 1 when the last shown line was unfinished
    local has_partial = sec.partial ~= ""
    local count = #sec.out + (has_partial and 1 or 0)
    if not sec.cap or count <= sec.cap then
      local lines, marks = {}, {}
      for i = sec.b_full + 1, #sec.out do
        local n = #lines + 1
        lines[n], marks[n] = shown(sec, sec.out[i])
      end
      if has_partial then
        local n = #lines + 1
        lines[n], marks[n] = shown(sec, sec.mark_hidden and sec.partial or settle(sec.partial))
      end
      local hls = kind_hls(sec.kinds, sec.b_full + 1, #sec.out, sec.partial_kind, has_partial)
      self:_replace(start + sec.b_full, shown_partial, lines, hls, marks)
      sec.b_full = #sec.out
      sec.b_n = count
      return
    end
    -- Folded: the first lines, one line saying how many are hidden, the last lines.
    local tail = self.opts.tail_lines
    local head = sec.cap - tail - 1
    local lines, hls, marks = {}, {}, {}
    local from, old_n = start + head, sec.b_n - head
    if not sec.folded then
      from, old_n = start, sec.b_n
      for i = 1, head do
        local n = #lines + 1
        lines[n], marks[n] = shown(sec, sec.out[i])
        hls[#hls + 1] = KIND_HL[sec.kinds[i] or ""] or false
      end
      sec.folded = true
    end
    local tail_from = #sec.out - tail + 1 + (has_partial and 1 or 0)
    local hidden = tail_from - head - 1
    lines[#lines + 1] = string.format("⋯ %d more lines folded (o here or :InterpreterOutput shows all %d) ⋯", hidden,
      #sec.out + (has_partial and 1 or 0))
    hls[#hls + 1] = "InterpreterMuted"
    for i = tail_from, #sec.out do
      local n = #lines + 1
      lines[n], marks[n] = shown(sec, sec.out[i])
      hls[#hls + 1] = KIND_HL[sec.kinds[i] or ""] or false
    end
    if has_partial then
      local n = #lines + 1
      lines[n], marks[n] = shown(sec, sec.mark_hidden and sec.partial or settle(sec.partial))
      hls[#hls + 1] = KIND_HL[sec.partial_kind or ""] or false
    end
    self:_replace(from, old_n, lines, hls, marks)
    sec.b_full = #sec.out
    sec.b_n = head + #lines - (from == start and head or 0)
  end

  --- Write every dirty section to the buffer (made modifiable by the caller).
  function Panel:_write_sections()
    local offset = 0
    for _, sec in ipairs(self.sections) do
      if not sec.shown then
        sec.shown = true
        sec.dirty = true
      end
      if sec.dirty then
        sec.dirty = false
        self:_replace(offset, sec.h_n, sec.header, sec.header_hl, sec.header_marks)
        sec.h_n = #sec.header
        self:_render_body(sec, offset + sec.h_n)
        self:_replace(offset + sec.h_n + sec.b_n, sec.f_n, sec.footer, {})
        sec.f_n = #sec.footer
      end
      offset = offset + sec.h_n + sec.b_n + sec.f_n
    end
  end

  ---@param sec interpreter_lsp.Section
  ---@return integer first 0-based buffer line of the section, or -1 when not shown yet
  function Panel:line_of(sec)
    local offset = 0
    for _, s in ipairs(self.sections) do
      if s == sec then
        return s.shown and offset or -1
      end
      offset = offset + s.h_n + s.b_n + s.f_n
    end
    return -1
  end

  ---@param row integer 0-based buffer line
  ---@return interpreter_lsp.Section|nil
  function Panel:section_at(row)
    local offset = 0
    for _, sec in ipairs(self.sections) do
      local size = sec.h_n + sec.b_n + sec.f_n
      if sec.shown and row >= offset and row < offset + size then
        return sec
      end
      offset = offset + size
    end
    return nil
  end
end
