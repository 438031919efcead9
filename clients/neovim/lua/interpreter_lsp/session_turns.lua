-- The conversation's notifications, as methods of interpreter_lsp.Session (added by session.lua): the
-- streamed answer (message), proposals as cards and how they were decided (proposal, proposalStatus),
-- the turn's state and how it ended (turnStatus), the kernels' state (kernelStatus).
local format = require("interpreter_lsp.format")
local hidden = require("interpreter_lsp.hidden")
local keymaps = require("interpreter_lsp.keymaps")
local words = require("interpreter_lsp.words")

---@param Session table the Session class
return function(Session)
  -- Answers ------------------------------------------------------------------------------------------

  function Session:on_message(p)
    local turn = self.turns[p.turnId] or {}
    self.turns[p.turnId] = turn
    local sec = turn.message
    -- seq runs on across the steps of a turn: a repeat (a message sent twice) is dropped, as the VS Code
    -- client does; seq 0 after a finished message is a server that counts per step (and history replay).
    if type(p.seq) == "number" then
      if p.seq < (turn.next_seq or 0) and not (p.seq == 0 and sec and sec.data.closed) then
        return
      end
      turn.next_seq = p.seq + 1
    end
    local last = self.panel.sections[#self.panel.sections]
    local open = sec and sec == last and not sec.data.closed
    if not open and (p.delta or "") == "" then
      return -- nothing to show yet (e.g. an empty final piece)
    end
    if not open then
      sec = self.panel:add("assistant", { turn_id = p.turnId })
      -- The model's text holds the code it proposes, read as code: its hidden characters show as markers.
      sec.mark_hidden = true
      self.panel:set_header(sec, { "## Assistant" }, { "InterpreterTitle" })
      turn.message = sec
    end
    self.panel:append(sec, p.delta or "")
    if p.done then
      self.panel:finish_line(sec)
      sec.data.closed = true
    end
  end

  -- Proposals ------------------------------------------------------------------------------------

  function Session:render_proposal(prop)
    local keys = self.opts.keymaps
    local risk = prop.risk or { level = "low", reasons = {} }
    local status = prop.state
    if prop.state == "pending" then
      status = "pending: " .. keymaps.proposal_hint(keys)
    end
    local head = string.format("**Proposal %d** · %s · risk: %s · %s", prop.index, prop.language, risk.level, status)
    if prop.agent then -- another agent's proposal (over MCP): who asked, and when
      head = head .. " · from " .. prop.agent .. (prop.created and (" at " .. prop.created) or "")
    end
    -- An agent names itself: its name, like the code, shows its hidden characters (format.add_line).
    local lines, hls, marks = {}, { risk.level == "high" and "InterpreterError" or risk.level == "medium" and "InterpreterRisk" or "InterpreterTitle" }, {}
    format.add_line(lines, marks, head)
    for _, reason in ipairs(risk.reasons or {}) do
      format.add_line(lines, marks, "  ⚠ " .. reason)
      hls[#lines] = "InterpreterRisk"
    end
    -- The assistant's text usually holds the same fenced code just above: do not show it twice. Code that
    -- holds hidden characters is shown on the card all the same, right under the reason that names them.
    local turn = self.turns[prop.turn_id]
    local msg = turn and turn.message
    local in_message = msg and table.concat(self.panel:body_lines(msg), "\n"):find(vim.trim(prop.code), 1, true)
    if not in_message or hidden.any(prop.code) then
      format.extend(lines, marks, format.fence(prop.language, prop.code))
    end
    self.panel:set_header(prop.section, lines, hls, marks)
  end

  function Session:on_proposal(p)
    local turn = self.turns[p.turnId] or {}
    self.turns[p.turnId] = turn
    local prop = {
      id = p.proposalId,
      index = #self.proposal_order + 1,
      turn_id = p.turnId,
      language = p.language or "",
      code = p.code or "",
      risk = p.risk,
      state = p.autoRun and "auto-run" or "pending",
      agent = type(p.agent) == "string" and p.agent or nil,
      created = type(p.created) == "string" and p.created or nil,
      section = self.panel:add("proposal", { proposal_id = p.proposalId }),
    }
    self.proposals[p.proposalId] = prop
    table.insert(self.proposal_order, prop)
    self:activity()
    self:render_proposal(prop)
    if prop.agent and prop.state == "pending" then
      self:update_winbar() -- the winbar and statusline say an agent waits
    end
    -- Text after this proposal starts a new assistant section below it.
    if turn.message then
      turn.message.data.closed = true
    end
  end

  -- Turn and kernel state -------------------------------------------------------------------------

  local FINAL_TURN = { done = true, cancelled = true, error = true }

  function Session:on_turn_status(p)
    local before = self.turn_state
    -- A final state ends the turn: the bar says nothing more about it (the panel says how it ended).
    self.turn_state = not FINAL_TURN[p.state] and p.state or nil
    if type(p.context) == "table" then
      self.context = p.context
    end
    -- The conversation was condensed on the way to this request: a note now, as a reopened panel shows.
    if before == "compacting" and p.state ~= "compacting" then
      local size = require("interpreter_lsp.session").context_text(type(p.context) == "table" and p.context or nil)
      self:note("⋯ Earlier turns condensed" .. (size and (" (the model's view is now " .. size .. ")") or ""))
    end
    local turn = self.turns[p.turnId] or {}
    self.turns[p.turnId] = turn
    if turn.message then
      self.panel:finish_line(turn.message)
    end
    if p.state == "error" then
      self:note("⚠ " .. words.neovim(p.message or "the request failed"), "InterpreterError")
    elseif p.state == "cancelled" then
      self:note("■ stopped" .. (p.message and (": " .. p.message) or ""))
    elseif p.state == "done" and p.message then
      self:note(p.message)
    end
    if FINAL_TURN[p.state] then
      if turn.message then
        turn.message.data.closed = true
      end
      -- Whatever of this turn still waits can no longer be decided.
      for _, prop in ipairs(self.proposal_order) do
        if prop.turn_id == p.turnId and prop.state == "pending" then
          self:set_proposal_state(prop.id, "expired")
        end
      end
    end
    self:update_winbar()
  end

  --- A proposal was decided (here, in another client, or by the loop), or its turn ended first.
  function Session:on_proposal_status(p)
    local prop = self.proposals[p.proposalId]
    if not prop then
      return
    end
    if p.state == "approved" then
      if prop.state == "pending" then
        self:set_proposal_state(prop.id, "approved")
      end
    elseif p.state == "auto-run" then
      self:set_proposal_state(prop.id, "auto-run")
    elseif p.state == "rejected" then
      local reason = type(p.reason) == "string" and p.reason ~= "" and p.reason or nil
      self:set_proposal_state(prop.id, "rejected", reason and ("(" .. reason:gsub("\n", " ") .. ")") or nil)
    elseif p.state == "applied" then
      local where = type(p.uri) == "string" and vim.fn.fnamemodify(vim.uri_to_fname(p.uri), ":.") or nil
      self:set_proposal_state(prop.id, "applied", where and ("to " .. where) or nil)
    elseif p.state == "expired" and prop.state == "pending" then
      self:set_proposal_state(prop.id, "expired")
    end
  end

  function Session:on_kernel_status(p)
    local before = self.kernels[p.language]
    self.kernels[p.language] = p.state
    if p.state == "dead" then
      self:note("✗ the " .. p.language .. " kernel died" .. (p.message and (": " .. p.message) or "")
        .. " (:InterpreterRestart starts it again)", "InterpreterError")
    elseif p.message and (p.state == "restarting" or p.state == "stopped") then
      self:note(p.language .. " kernel " .. p.state .. ": " .. p.message)
    elseif p.message and p.state == before and (p.state == "busy" or p.state == "idle") then
      -- News its state does not show: a gateway connection lost mid-run (the run looks as if it goes on
      -- while reconnecting takes up to the connect timeout), then restored.
      local lost = not p.message:match("^reconnected")
      self:note((lost and "⚠ " or "") .. "the " .. p.language .. " kernel: " .. p.message, lost and "WarningMsg" or nil)
    end
    if self.restarting[p.language] and p.state == "idle" and before ~= "idle" then
      self.restarting[p.language] = nil
      self:note("↻ Kernel restarted (" .. p.language .. ")")
    end
    self:update_winbar()
  end
end
