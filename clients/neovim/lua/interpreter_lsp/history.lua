-- The conversation as the server keeps it (interpreter.history): drawn into a fresh panel when a server
-- starts, so reopening Neovim shows what happened before (requests, answers, proposals and how they were
-- decided, runs with their output, notices, kernel restarts and deaths, condensed turns). Each event is
-- replayed through the same code that draws live notifications, so both look the same.
local M = {}

local function text_of(v)
  if type(v) == "table" then
    return table.concat(v, "")
  end
  return type(v) == "string" and v or ""
end

--- nbformat v4 outputs as the output notifications a live run sends.
---@param run_id string
---@param outputs table
---@return table[]
local function output_params(run_id, outputs)
  local out = {}
  for _, o in ipairs(type(outputs) == "table" and outputs or {}) do
    local p = { runId = run_id }
    if o.output_type == "stream" then
      p.kind = o.name == "stderr" and "stderr" or "stdout"
      p.text = text_of(o.text)
    elseif o.output_type == "execute_result" or o.output_type == "display_data" then
      p.kind = o.output_type == "execute_result" and "result" or "display"
      local data = {}
      for mime, value in pairs(type(o.data) == "table" and o.data or {}) do
        data[mime] = text_of(value)
      end
      p.data = data
    elseif o.output_type == "error" then
      p.kind = "error"
      p.ename, p.evalue = o.ename, o.evalue
      p.text = require("interpreter_lsp.format").error_text(o.ename, o.evalue, o.traceback)
    end
    if p.kind then
      table.insert(out, p)
    end
  end
  return out
end

--- "Earlier turns condensed (N tokens)" for a compaction event (N when the server says it).
---@param e table
---@return string
function M.compaction_text(e)
  local n = e.summaryTokens or e.tokens
  if type(n) == "number" then
    return string.format("⋯ Earlier turns condensed (%d tokens)", n)
  end
  return "⋯ Earlier turns condensed"
end

local function kernel_text(e)
  local lang = type(e.language) == "string" and e.language or "python"
  local msg = type(e.message) == "string" and e.message ~= "" and (": " .. e.message) or ""
  if e.state == "died" then
    return "✗ the " .. lang .. " kernel died" .. msg, "InterpreterError"
  end
  return "↻ Kernel restarted (" .. lang .. ")" .. msg, nil
end
M.kernel_text = kernel_text

---@param s interpreter_lsp.Session
---@param e table one history event
local function replay(s, e)
  local kind = e.type
  if kind == "user" then
    s:user_chat(e.text or "")
  elseif kind == "assistant" then
    if type(e.text) == "string" and e.text ~= "" then
      s:on_message({ turnId = e.turnId, seq = 0, delta = e.text, done = true })
    end
  elseif kind == "proposal" then
    s:on_proposal({
      proposalId = e.proposalId, turnId = e.turnId, language = e.language, code = e.code, risk = e.risk,
      autoRun = e.autoRun, agent = e.agent,
    })
  elseif kind == "decision" then
    local prop = s.proposals[e.proposalId]
    if prop then
      if e.decision == "approved" then
        s:set_proposal_state(prop.id, e.edited and "edited, approved" or "approved")
      else
        s:on_proposal_status({ proposalId = e.proposalId, turnId = e.turnId, state = e.decision, reason = e.reason, uri = e.uri })
      end
    end
  elseif kind == "run" then
    local prop = e.proposalId and s.proposals[e.proposalId] or nil
    local run = s:new_run({ id = e.runId, language = e.language, code = e.code, proposal = prop, state = "running",
      origin = e.origin, agent = e.agent })
    for _, p in ipairs(output_params(e.runId, e.outputs)) do
      s:on_output(p)
    end
    s:on_run_status({ runId = e.runId, state = e.state or "ok", durationMs = e.durationMs, message = e.message, files = e.files })
    s:render_run(run)
  elseif kind == "note" then
    if type(e.text) == "string" then
      s:note(e.text)
    end
  elseif kind == "error" then
    s:note("⚠ " .. (e.message or "the request failed"), "InterpreterError")
  elseif kind == "turnEnd" then
    if e.state == "cancelled" then
      s:note("■ stopped" .. (type(e.message) == "string" and (": " .. e.message) or ""))
    elseif e.state == "done" and type(e.message) == "string" then
      s:note(e.message)
    end
    for _, prop in ipairs(s.proposal_order) do
      if prop.turn_id == e.turnId and prop.state == "pending" then
        s:set_proposal_state(prop.id, "expired")
      end
    end
  elseif kind == "kernel" then
    local text, group = kernel_text(e)
    s:note(text, group)
  elseif kind == "compaction" then
    s:note(M.compaction_text(e))
  end
end

--- Draw the history's events above whatever the panel shows already.
---@param s interpreter_lsp.Session
---@param events table[]
function M.render(s, events)
  if type(events) ~= "table" or #events == 0 then
    return
  end
  s.replaying = true
  local ok, err = pcall(s.panel.prepend, s.panel, function()
    s:note("── earlier in this workspace ──")
    for _, e in ipairs(events) do
      if type(e) == "table" then
        replay(s, e)
      end
    end
    -- A proposal of a finished session cannot be decided any more.
    for _, prop in ipairs(s.proposal_order) do
      if prop.state == "pending" then
        s:set_proposal_state(prop.id, "expired")
      end
    end
    s:note("── now ──")
  end)
  s.replaying = false
  if not ok then
    vim.notify("interpreter_lsp: could not show the history: " .. tostring(err), vim.log.levels.ERROR)
  end
end

return M
