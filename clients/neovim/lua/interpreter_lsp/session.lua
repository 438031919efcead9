-- One session per workspace root: its state (turns, proposals, runs, kernels, context use, trust), what the
-- window bar says about it, and the entries the commands add (the user's request, notes). The server's
-- notifications land in methods added by session_turns.lua (conversation, proposals, turn and kernel
-- state) and session_runs.lua (runs and their output); client.lua routes them here.
local panel_mod = require("interpreter_lsp.panel")
local format = require("interpreter_lsp.format")

local M = {}

---@class interpreter_lsp.Proposal
---@field id string
---@field index integer
---@field turn_id string
---@field language string
---@field code string
---@field risk {level: string, reasons: string[]}
---@field state string "pending"|"approved"|"rejected"|"applied"|"auto-run"
---@field run_id string|nil
---@field section interpreter_lsp.Section

---@class interpreter_lsp.Run
---@field id string|nil
---@field language string|nil
---@field code string|nil
---@field where string|nil
---@field proposal interpreter_lsp.Proposal|nil
---@field state string
---@field duration_ms integer|nil
---@field message string|nil
---@field files table|nil workspace files the run touched: [{path, change}]
---@field next_seq integer
---@field has_output boolean
---@field section interpreter_lsp.Section

---@class interpreter_lsp.Session
---@field root string
---@field opts interpreter_lsp.Options
---@field panel interpreter_lsp.Panel
---@field client_id integer|nil
---@field proposals table<string, interpreter_lsp.Proposal>
---@field proposal_order interpreter_lsp.Proposal[]
---@field runs table<string, interpreter_lsp.Run>
---@field unbound_runs interpreter_lsp.Run[] runs started here whose id has not come back yet
---@field turns table<string, table>
---@field kernels table<string, string>
---@field turn_state string|nil
---@field source_buf integer|nil the file buffer the user last worked in
---@field restarting table<string, boolean> kernels whose restart was asked for here and has not ended
---@field context table|nil context use, as interpreter.status / turnStatus report it (may be absent)
---@field model string|nil the model in use, from interpreter.status
---@field trusted boolean|nil false: the folder is not trusted, nothing runs
---@field starting boolean the server has not reported a kernel yet
local Session = {}
Session.__index = Session

---@type table<string, interpreter_lsp.Session>
local sessions = {}

---@param root string
---@param opts interpreter_lsp.Options
---@return interpreter_lsp.Session
function M.get(root, opts)
  local s = sessions[root]
  if s and vim.api.nvim_buf_is_valid(s.panel.buf) then
    s.opts = opts
    return s
  end
  local name = vim.fn.fnamemodify(root, ":t")
  if vim.fn.bufexists("interpreter://" .. name) == 1 then
    name = name .. "-" .. tostring(vim.tbl_count(sessions) + 1)
  end
  s = setmetatable({
    root = root,
    opts = opts,
    panel = panel_mod.new(name, opts.panel),
    client_id = nil,
    proposals = {},
    proposal_order = {},
    runs = {},
    unbound_runs = {},
    turns = {},
    kernels = {},
    turn_state = nil,
    source_buf = nil,
    restarting = {},
    context = nil,
    model = nil,
    trusted = nil,
    starting = true,
  }, Session)
  sessions[root] = s
  s:update_winbar()
  if M.on_new then
    M.on_new(s)
  end
  return s
end

---@return table<string, interpreter_lsp.Session>
function M.all()
  return sessions
end

--- The session whose panel is `buf`, if any.
---@param buf integer
---@return interpreter_lsp.Session|nil
function M.by_panel(buf)
  for _, s in pairs(sessions) do
    if s.panel.buf == buf then
      return s
    end
  end
  return nil
end

local TURN_WORDS = {
  thinking = "thinking",
  ["awaiting-approval"] = "awaiting approval",
  running = "running",
  compacting = "condensing the conversation…",
}

local KERNEL_WORDS = { starting = "starting…", restarting = "restarting…" }

--- "12.3k" for 12345 tokens.
---@param n number
---@return string
local function tokens(n)
  if n >= 1e6 then
    return (string.format("%.1fM", n / 1e6):gsub("%.0M", "M"))
  elseif n >= 1000 then
    return (string.format("%.1fk", n / 1000):gsub("%.0k", "k"))
  end
  return tostring(math.floor(n))
end

--- Context use as a short text, "12.3k/128k tok · $0.04", or nil when the server sent none (a server
--- without it, or a field of the wrong type).
---@param ctx table|nil
---@return string|nil
function M.context_text(ctx)
  if type(ctx) ~= "table" or type(ctx.tokens) ~= "number" then
    return nil
  end
  local text = tokens(ctx.tokens)
  if type(ctx.window) == "number" and ctx.window > 0 then
    text = text .. "/" .. tokens(ctx.window) .. (ctx.windowSource == "guess" and "?" or "")
  end
  text = text .. " tok"
  if type(ctx.cost) == "number" then
    if ctx.costKnown == false then
      text = text .. " · cost unknown"
    elseif ctx.cost > 0 then
      text = text .. string.format(" · $%.2f", ctx.cost)
    end
  end
  return text
end

function Session:activity()
  if self.opts.panel.open_on_activity and not self.replaying then
    self.panel:open()
  end
end

--- Languages with a run in progress here, as a set.
function Session:running_languages()
  local out = {}
  for _, run in pairs(self.runs) do
    if run.state == "running" then
      out[run.language or "python"] = true
    end
  end
  return out
end

--- The pieces of the window bar, most important first: what the kernels do (a running run says
--- "running", whatever the kernel reported last), the turn, context use, the model.
---@return string[]
function Session:status_parts()
  local parts = {}
  -- Another agent (over MCP) waiting for a decision comes first: nothing of it runs until the user answers.
  local waiting = self:agents_waiting()
  if waiting then
    table.insert(parts, waiting)
  end
  if self.trusted == false then
    table.insert(parts, "not trusted (:InterpreterTrust)")
  end
  local running = self:running_languages()
  local langs = vim.tbl_keys(self.kernels)
  for lang in pairs(running) do
    if not self.kernels[lang] then
      table.insert(langs, lang)
    end
  end
  table.sort(langs)
  for _, lang in ipairs(langs) do
    local state = self.kernels[lang]
    if running[lang] and state ~= "restarting" and state ~= "dead" then
      state = "running"
    end
    table.insert(parts, lang .. " " .. (KERNEL_WORDS[state] or state or "running"))
  end
  if #langs == 0 and self.trusted ~= false then
    table.insert(parts, self.starting == false and "no kernel yet" or "starting…")
  end
  local turn = self.turn_state and TURN_WORDS[self.turn_state]
  if turn and not (self.turn_state == "running" and next(running)) then
    table.insert(parts, turn)
  end
  local ctx = M.context_text(self.context)
  if ctx then
    table.insert(parts, ctx)
  end
  if type(self.model) == "string" and self.model ~= "" then
    table.insert(parts, self.model)
  end
  return parts
end

--- "Claude Code 2.1 waiting" (or "2 agents waiting") while other agents' proposals wait here, else nil.
---@return string|nil
function Session:agents_waiting()
  local names, count, first = {}, 0, nil
  for _, prop in ipairs(self.proposal_order) do
    if prop.agent and prop.state == "pending" and not names[prop.agent] then
      names[prop.agent] = true
      count = count + 1
      first = first or prop.agent
    end
  end
  if count == 0 then
    return nil
  end
  -- An agent names itself: its hidden characters show as markers here too (hidden.lua).
  return (count == 1 and (require("interpreter_lsp.hidden").show(first)) or (count .. " agents")) .. " waiting"
end

function Session:update_winbar()
  self.panel:set_winbar(self:status_parts())
end

--- A short line for statuslines: kernel states, the turn state, context use and the model.
---@return string
function Session:status_line()
  return table.concat(self:status_parts(), " · ")
end

---@param text string
---@param group string|nil
function Session:note(text, group)
  local sec = self.panel:add("note")
  local lines = format.split_lines(text)
  local hls = {}
  for i = 1, #lines do
    hls[i] = group or "InterpreterMuted"
  end
  self.panel:set_header(sec, lines, hls)
end

-- Chat ------------------------------------------------------------------------------------------

---@param text string
---@param about string|nil where the selection the question is about comes from
---@return table turn
function Session:user_chat(text, about)
  self:activity()
  local sec = self.panel:add("user")
  local lines = { "## You" }
  vim.list_extend(lines, format.split_lines(text))
  local hls = { "InterpreterTitle" }
  if about then
    table.insert(lines, "(about " .. about .. ")")
    hls[#lines] = "InterpreterMuted"
  end
  self.panel:set_header(sec, lines, hls)
  return { section = sec }
end

---@param turn_id string
---@param context table|nil {uri, range} the chat was about
---@param target interpreter_lsp.Target|nil those lines, tracked in their buffer (apply.lua)
function Session:bind_turn(turn_id, context, target)
  local turn = self.turns[turn_id] or {}
  turn.context = context
  turn.target = target
  self.turns[turn_id] = turn
end

-- Proposals -------------------------------------------------------------------------------------

---@param id string|nil
---@param state string
---@param extra string|nil
function Session:set_proposal_state(id, state, extra)
  local prop = id and self.proposals[id]
  if not prop then
    return
  end
  prop.state = extra and (state .. " " .. extra) or state
  self:render_proposal(prop)
  if prop.agent then
    self:update_winbar() -- "… waiting" goes
  end
end

--- The proposal under the cursor in the panel, else the newest pending one.
---@param row integer|nil 0-based row in the panel
---@return interpreter_lsp.Proposal|nil
function Session:pick_proposal(row)
  if row then
    local sec = self.panel:section_at(row)
    if sec and sec.data.proposal_id then
      return self.proposals[sec.data.proposal_id]
    end
  end
  for i = #self.proposal_order, 1, -1 do
    if self.proposal_order[i].state == "pending" then
      return self.proposal_order[i]
    end
  end
  return nil
end

-- The notification handlers and how they draw: methods added to Session.
require("interpreter_lsp.session_turns")(Session)
require("interpreter_lsp.session_runs")(Session)

return M
