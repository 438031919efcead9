-- The runs of a session: each run's section (state, code, where it came from, the files it touched), its
-- streamed output, and images saved to files. Methods of interpreter_lsp.Session, added by session.lua.
---@param Session table the Session class
---@param util {fence: fun(language: string|nil, code: string): string[], with_newline: fun(text: string): string, seconds: fun(ms: integer|nil): string|nil}
return function(Session, util)
  local fence, with_newline, seconds = util.fence, util.with_newline, util.seconds

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

  function Session:render_run(run)
    local icon = ({ queued = "…", running = "▶", ok = "✓", error = "✗", interrupted = "■", died = "✗", timeout = "⏱" })[run.state]
      or "▶"
    local title = string.format("%s **Run** · %s", icon, run.language or "code")
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
    local lines, hls = { title }, { hl }
    local files = files_line(run.files)
    if files then
      table.insert(lines, files)
    end
    if run.message then
      table.insert(lines, run.message)
      hls[#lines] = hl
    end
    if run.code then
      vim.list_extend(lines, fence(run.language, run.code))
    end
    if run.has_output then
      table.insert(lines, "~~~")
    end
    self.panel:set_header(run.section, lines, hls)
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
    end
    if run.proposal and run.proposal.state == "pending" then
      self:set_proposal_state(run.proposal.id, "approved")
    end
    self:render_run(run)
    self:update_winbar()
  end

  local IMAGE_TYPES = { ["image/png"] = "png", ["image/jpeg"] = "jpg", ["image/gif"] = "gif", ["image/svg+xml"] = "svg" }

  function Session:save_image(mime, payload, run)
    local dir = self.opts.image_dir or (vim.fn.stdpath("cache") .. "/interpreter_lsp/images")
    vim.fn.mkdir(dir, "p")
    local n = (run.section.data.images or 0) + 1
    run.section.data.images = n
    local name = string.format("%s-%d.%s", (run.id or "run"):gsub("[^%w_-]", "_"), n, IMAGE_TYPES[mime])
    local path = dir .. "/" .. name
    local bytes = payload
    if mime ~= "image/svg+xml" then
      local ok, decoded = pcall(vim.base64.decode, (payload:gsub("%s", "")))
      if not ok then
        return nil
      end
      bytes = decoded
    end
    local fd = io.open(path, "wb")
    if not fd then
      return nil
    end
    fd:write(bytes)
    fd:close()
    return path
  end

  -- With image.nvim installed, draw the image below its "[image] path" line once that line is written.
  function Session:draw_image_later(path)
    local ok, image = pcall(require, "image")
    if not ok or type(image.from_file) ~= "function" then
      return
    end
    local panel = self.panel
    panel.on_flush = panel.on_flush or {}
    local function draw()
      local win = panel:window()
      if not win then
        return false
      end
      local lines = vim.api.nvim_buf_get_lines(panel.buf, 0, -1, false)
      for row = #lines, 1, -1 do
        if lines[row] == "[image] " .. path then
          local img = image.from_file(path, { window = win, buffer = panel.buf, with_virtual_padding = true, x = 0, y = row })
          if img then
            img:render()
          end
          return true
        end
      end
      return false
    end
    local entry
    entry = function()
      if draw() then
        for i, fn in ipairs(panel.on_flush) do
          if fn == entry then
            table.remove(panel.on_flush, i)
            break
          end
        end
      end
    end
    table.insert(panel.on_flush, entry)
  end

  -- Text a user can read for a MIME bundle: an image becomes a saved file's path.
  function Session:render_data(data, run)
    for mime in pairs(IMAGE_TYPES) do
      if type(data[mime]) == "string" then
        local path = self:save_image(mime, data[mime], run)
        if path then
          self:draw_image_later(path)
          return "[image] " .. path .. "\n", "muted"
        end
      end
    end
    local function text_of(v)
      return type(v) == "table" and table.concat(v, "") or v
    end
    if data["text/markdown"] then
      return text_of(data["text/markdown"])
    end
    if data["text/plain"] then
      return text_of(data["text/plain"])
    end
    local mimes = vim.tbl_keys(data)
    table.sort(mimes)
    return "[" .. table.concat(mimes, ", ") .. " output: no text form to show]\n", "muted"
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
        text = (p.ename or "Error") .. ": " .. (p.evalue or "")
      end
      self.panel:append(sec, with_newline(text), "error")
    else
      self.panel:finish_line(sec)
      local text, kind = p.text, nil
      if type(p.data) == "table" and next(p.data) then
        text, kind = self:render_data(p.data, run)
      end
      self.panel:append(sec, with_newline(text or ""), kind)
    end
  end
end
