-- The runs of a session: each run's section (state, code, where it came from, the files it touched) and
-- its streamed output (images: images.lua). Methods of interpreter_lsp.Session, added by session.lua.
local images = require("interpreter_lsp.images")
local inline = require("interpreter_lsp.inline")

local format = require("interpreter_lsp.format")

---@param Session table the Session class
return function(Session)
  local fence, with_newline, seconds = format.fence, format.with_newline, format.seconds

  -- Runs ------------------------------------------------------------------------------------------

  local CHANGE_MARKS = { created = "+", modified = "~", deleted = "-" }

  --- "files: + out/new.csv  ~ old.txt  - gone.txt" for the workspace files a run touched, or nil.
  ---@param files table|nil [{path, change}] as the server reports them (paths relative to the workspace)
  ---@return string|nil
  local function files_line(files)
    if type(files) ~= "table" then
      return nil
    end
    local parts = {}
    for _, f in ipairs(files) do
      local mark = type(f) == "table" and CHANGE_MARKS[f.change]
      if mark and type(f.path) == "string" and f.path ~= "" then
        table.insert(parts, mark .. " " .. (f.path:gsub("\n", " ")))
      end
    end
    return #parts > 0 and ("files: " .. table.concat(parts, "  ")) or nil
  end

  --- "by you", "by the model", "by an agent (name)": who started a run (runStatus / history `origin`).
  local function origin_words(run)
    local o = run.origin
    if o == "user" then
      return "by you"
    elseif o == "model" then
      return "by the model"
    elseif o == "agent" then
      return "by an agent" .. (type(run.agent) == "string" and run.agent ~= "" and (" (" .. run.agent .. ")") or "")
    end
    return nil
  end
  Session.origin_words = origin_words

  function Session:render_run(run)
    local icon = ({ queued = "…", running = "▶", ok = "✓", error = "✗", interrupted = "■", died = "✗", timeout = "⏱" })[run.state]
      or "▶"
    local title = string.format("%s **Run** · %s", icon, run.language or "code")
    local by = origin_words(run)
    if by then
      title = title .. " · " .. by
    end
    if run.where then
      title = title .. " · " .. run.where
    end
    if run.proposal then
      title = title .. " · proposal " .. run.proposal.index
    end
    title = title .. " · " .. run.state
    if run.duration_ms then
      title = title .. " · " .. seconds(run.duration_ms)
    end
    local hl = ({ ok = "InterpreterOk", error = "InterpreterError", died = "InterpreterError", timeout = "InterpreterError", interrupted = "InterpreterRisk" })[run.state]
      or "InterpreterTitle"
    -- The title names an agent as it names itself: shown, like the code, with its hidden characters visible.
    local lines, hls, marks = {}, { hl }, {}
    format.add_line(lines, marks, title)
    local files = files_line(run.files)
    if files then
      format.add_line(lines, marks, files)
    end
    if run.message then
      format.add_line(lines, marks, run.message)
      hls[#lines] = hl
    end
    if run.code then
      format.extend(lines, marks, fence(run.language, run.code))
    end
    if run.has_output then
      -- The fences are hidden on screen (rendered markdown): this line keeps code and output apart.
      table.insert(lines, "↳ output")
      hls[#lines] = "InterpreterMuted"
      table.insert(lines, "~~~")
    end
    self.panel:set_header(run.section, lines, hls, marks)
    self.panel:set_footer(run.section, run.has_output and { "~~~", "" } or { "" })
  end

  ---@param fields table {language?, code?, where?, proposal?}
  ---@return interpreter_lsp.Run
  function Session:new_run(fields)
    local run = {
      id = fields.id,
      language = fields.language,
      code = fields.code,
      where = fields.where,
      proposal = fields.proposal,
      anchor = fields.anchor,
      origin = fields.origin,
      agent = fields.agent,
      state = fields.state or "queued",
      next_seq = 0,
      has_output = false,
      section = self.panel:add("run"),
    }
    run.section.cap = self.opts.panel.max_output_lines
    run.section.data.run = run
    if run.id then
      self.runs[run.id] = run
    end
    self:render_run(run)
    return run
  end

  --- A run the user started here; its id arrives with the command's answer.
  ---@param fields table {language?, code?, where?, proposal?}
  ---@return interpreter_lsp.Run
  function Session:user_run(fields)
    self:activity()
    local run = self:new_run(fields)
    table.insert(self.unbound_runs, run)
    return run
  end

  ---@param run interpreter_lsp.Run
  ---@param run_id string
  function Session:bind_run(run, run_id)
    for i, r in ipairs(self.unbound_runs) do
      if r == run then
        table.remove(self.unbound_runs, i)
        break
      end
    end
    local existing = self.runs[run_id]
    if existing and existing ~= run then
      -- Notifications came first and were matched to another waiting run: keep the one already shown.
      return
    end
    run.id = run_id
    self.runs[run_id] = run
  end

  --- The run a notification is about; unknown ids are matched to a waiting run, else shown as new.
  function Session:run_for(p)
    local run = self.runs[p.runId]
    if run then
      return run
    end
    local prop = p.proposalId and self.proposals[p.proposalId]
    for i, r in ipairs(self.unbound_runs) do
      if (prop and r.proposal == prop) or (not prop and not r.proposal) then
        table.remove(self.unbound_runs, i)
        r.id = p.runId
        self.runs[p.runId] = r
        return r
      end
    end
    self:activity()
    run = self:new_run({ id = p.runId, language = p.language or (prop and prop.language), proposal = prop })
    return run
  end

  --- "demo.py:5-7" for a runStatus `source` ({uri, kind, startLine, endLine}, 0-based lines), or nil.
  ---@param source table|nil
  ---@return string|nil
  local function source_where(source)
    if type(source) ~= "table" or type(source.uri) ~= "string" or type(source.startLine) ~= "number" then
      return nil
    end
    local name = vim.fn.fnamemodify(vim.uri_to_fname(source.uri), ":.")
    local first, last = source.startLine + 1, (type(source.endLine) == "number" and source.endLine or source.startLine) + 1
    local where = first == last and string.format("%s:%d", name, first) or string.format("%s:%d-%d", name, first, last)
    if source.kind == "cell" then
      where = "cell " .. where
    end
    return where
  end

  function Session:on_run_status(p)
    local run = self:run_for(p)
    -- Runs started elsewhere (a code lens, a code action, the loop) say what runs and where from.
    if type(p.code) == "string" and not run.code then
      run.code = p.code
    end
    if not run.where then
      run.where = source_where(p.source)
      -- A run from a code lens or code action: its output goes under its lines too, if the file is open.
      local src = p.source
      if run.where and not run.anchor and type(src.uri) == "string" and not self.replaying then
        local buf = vim.uri_to_bufnr(src.uri)
        if vim.api.nvim_buf_is_loaded(buf) then
          run.anchor = inline.anchor(buf, src.startLine, (type(src.endLine) == "number" and src.endLine or src.startLine) + 1)
        end
      end
    end
    if type(p.origin) == "string" and not run.origin then
      run.origin = p.origin
    end
    if type(p.agent) == "string" and not run.agent then
      run.agent = p.agent
    end
    if not run.origin and run.proposal then
      run.origin = "model"
    end
    run.state = p.state
    run.duration_ms = p.durationMs or run.duration_ms
    run.language = run.language or p.language
    run.message = p.message
    if type(p.files) == "table" then
      run.files = p.files
    end
    if p.state ~= "queued" and p.state ~= "running" then
      self.panel:finish_line(run.section)
      run.finished_at = run.finished_at or os.time()
    end
    if run.proposal and run.proposal.state == "pending" then
      self:set_proposal_state(run.proposal.id, "approved")
    end
    self:render_run(run)
    self:update_winbar()
    if p.state ~= "queued" and p.state ~= "running" then
      self:announce_if_hidden(run)
      self:show_inline(run)
    end
  end

  --- A run that ended where the user cannot see it (the panel closed or in another tab, e.g. after `o`,
  --- or scrolled away from it) is announced in one line, once.
  function Session:announce_if_hidden(run)
    if self.replaying or run.announced then
      return
    end
    local win = nil
    for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
      if vim.api.nvim_win_get_buf(w) == self.panel.buf then
        win = w
        break
      end
    end
    local visible = false
    -- Its output under its code, in a window of this tab, is in sight too.
    local a = run.anchor
    if a and self.opts.inline_output and vim.api.nvim_buf_is_valid(a.buf) then
      for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
        if vim.api.nvim_win_get_buf(w) == a.buf then
          visible = true
        end
      end
    end
    if win and not visible then
      self.panel:flush()
      local row = self.panel:line_of(run.section)
      local top, bottom = vim.fn.line("w0", win), vim.fn.line("w$", win)
      local last = row + run.section.h_n + run.section.b_n
      visible = row >= 0 and row + 1 <= bottom and last >= top
    end
    if not visible then
      run.announced = true
      local what = string.format("run %s %s%s", run.language or "", run.state,
        run.duration_ms and (" in " .. seconds(run.duration_ms)) or "")
      require("interpreter_lsp.words").say(what .. (win and " · below in the panel" or " · :InterpreterPanel shows it"))
    end
  end

  --- The run's output under its code in the source buffer (inline.lua), when it came from one.
  function Session:show_inline(run)
    if not self.opts.inline_output or self.replaying or not run.anchor then
      return
    end
    if run.inline_pending then
      return
    end
    run.inline_pending = true
    -- At most one redraw per panel tick: a flood of output costs one extmark update.
    vim.defer_fn(function()
      run.inline_pending = false
      pcall(inline.draw, self.panel, run, self.opts.images)
    end, self.opts.panel.throttle_ms)
  end

  function Session:on_output(p)
    local run = self:run_for(p)
    if p.seq and p.seq > run.next_seq then
      self.panel:append(run.section, string.format("\n[%d output messages lost]\n", p.seq - run.next_seq), "muted")
    end
    run.next_seq = math.max(run.next_seq, (p.seq or run.next_seq) + 1)
    if not run.has_output then
      run.has_output = true
      self:render_run(run)
    end
    local sec = run.section
    if p.kind == "stdout" then
      self.panel:append(sec, p.text or "")
    elseif p.kind == "stderr" then
      self.panel:append(sec, p.text or "", "stderr")
    elseif p.kind == "error" then
      self.panel:finish_line(sec)
      local text = p.text
      if not text or text == "" then
        text = format.error_text(p.ename, p.evalue, nil)
      end
      self.panel:append(sec, with_newline(text), "error")
    else
      self.panel:finish_line(sec)
      local text, kind = p.text, nil
      if type(p.data) == "table" and next(p.data) then
        text, kind = images.bundle_text(self, p.data, run)
        run.last_image = (text or ""):match("^%[image%] (.-)\n?$") or run.last_image
      end
      self.panel:append(sec, with_newline(text or ""), kind)
    end
    self:show_inline(run)
  end
end
