-- interpreter_lsp: a Neovim client for interpreter-lsp. A model proposes code, you approve it, it runs
-- in the workspace's Jupyter kernel, and the conversation and output stream into a panel.
local config = require("interpreter_lsp.config")
local client = require("interpreter_lsp.client")
local cells = require("interpreter_lsp.cells")
local session_mod = require("interpreter_lsp.session")
local panel_mod = require("interpreter_lsp.panel")
local protocol = require("interpreter_lsp.protocol")
local workspace = require("interpreter_lsp.workspace")

local M = {}

local augroup = vim.api.nvim_create_augroup("interpreter_lsp", { clear = true })

local function notify(msg, level)
  vim.notify("interpreter_lsp: " .. msg, level or vim.log.levels.INFO)
end

local function wants(buf)
  local opts = client.opts
  if not opts or not vim.api.nvim_buf_is_valid(buf) or vim.bo[buf].buftype ~= "" then
    return false
  end
  if vim.api.nvim_buf_get_name(buf) == "" then
    return false
  end
  return opts.filetypes == nil or vim.tbl_contains(opts.filetypes, vim.bo[buf].filetype)
end

local set_panel_keys

local function set_global_keys(keys)
  local map = function(lhs, rhs, desc, modes)
    if lhs then
      vim.keymap.set(modes or { "n", "x" }, lhs, rhs, { desc = desc })
    end
  end
  map(keys.run, ":InterpreterRun<CR>", "Interpreter: run the selection, the cell or the line")
  map(keys.chat, ":Interpreter<CR>", "Interpreter: ask the model")
  map(keys.toggle_panel, "<Cmd>InterpreterPanel<CR>", "Interpreter: toggle the panel", { "n" })
end

--- Configure the plugin and start the server for file buffers (see :help interpreter_lsp-options).
---@param user table|nil
function M.setup(user)
  local opts = config.resolve(user)
  client.opts = opts
  panel_mod.define_highlights()
  vim.api.nvim_clear_autocmds({ group = augroup })
  vim.api.nvim_create_autocmd(opts.filetypes and "FileType" or { "BufReadPost", "BufNewFile" }, {
    group = augroup,
    callback = function(ev)
      if wants(ev.buf) then
        client.attach(ev.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd("ColorScheme", { group = augroup, callback = panel_mod.define_highlights })
  -- The window bar holds what fits the panel's width: a resize redraws it.
  vim.api.nvim_create_autocmd({ "WinResized", "VimResized" }, {
    group = augroup,
    callback = function()
      for _, s in pairs(session_mod.all()) do
        s.panel:set_winbar(s.panel.winbar_parts)
      end
    end,
  })
  vim.api.nvim_create_autocmd("BufEnter", {
    group = augroup,
    callback = function(ev)
      local c = vim.lsp.get_clients({ name = client.name, bufnr = ev.buf })[1]
      if c then
        session_mod.get(c.root_dir or c.config.root_dir, opts).source_buf = ev.buf
      end
    end,
  })
  set_global_keys(opts.keymaps)
  session_mod.on_new = set_panel_keys
  client.on_ready = workspace.on_ready
  -- Buffers opened before setup() (lazy loading), or before :InterpreterInstall, get a client too.
  local function attach_loaded()
    for _, buf in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_is_loaded(buf) and wants(buf) then
        client.attach(buf)
      end
    end
  end
  vim.api.nvim_create_autocmd("User", { group = augroup, pattern = "InterpreterInstalled", callback = attach_loaded })
  attach_loaded()
  M._configured = true
end

local function ensure_setup()
  if not M._configured then
    M.setup({})
  end
end

--- The client and session for the current buffer, or nil after telling the user why.
local function current()
  ensure_setup()
  local c, s = client.for_buffer(vim.api.nvim_get_current_buf())
  if not c or not s then
    local _, why = client.server_cmd(assert(client.opts))
    notify(why or "no interpreter-lsp server for this buffer: open a file of the workspace first",
      vim.log.levels.ERROR)
    return nil, nil
  end
  return c, s
end

local function relative(buf)
  return vim.fn.fnamemodify(vim.api.nvim_buf_get_name(buf), ":.")
end

-- Panel keys --------------------------------------------------------------------------------------

local function panel_row(s)
  local win = vim.api.nvim_get_current_win()
  if vim.api.nvim_win_get_buf(win) == s.panel.buf then
    return vim.api.nvim_win_get_cursor(win)[1] - 1
  end
  return nil
end

function set_panel_keys(s)
  if s.panel.keys_set then
    return
  end
  s.panel.keys_set = true
  local keys = assert(client.opts).keymaps
  local function map(lhs, fn, desc)
    if lhs then
      vim.keymap.set("n", lhs, fn, { buffer = s.panel.buf, desc = desc, nowait = true })
    end
  end
  map(keys.approve, function() M.approve() end, "Interpreter: approve the proposal")
  map(keys.edit, function() M.edit() end, "Interpreter: edit the proposal, :w approves it")
  map(keys.reject, function() M.reject() end, "Interpreter: reject the proposal (the turn ends)")
  map(keys.reject_reason, function() M.reject_with_reason() end,
    "Interpreter: reject the proposal with a reason (the model is asked again)")
  map(keys.apply, function() M.apply() end, "Interpreter: write the proposal into the source buffer")
  map(keys.expand, function() M.show_output() end, "Interpreter: all output of the run under the cursor")
  map(keys.interrupt, function() M.interrupt() end, "Interpreter: interrupt")
  map(keys.close, function() s.panel:close() end, "Interpreter: close the panel")
end

local function with_session()
  local c, s = current()
  if s then
    set_panel_keys(s)
  end
  return c, s
end

-- Commands ----------------------------------------------------------------------------------------

---@class interpreter_lsp.ChatArgs
---@field text string|nil the request; nil asks for it
---@field line1 integer|nil a 1-based line range the request is about
---@field line2 integer|nil

--- Ask the model. With a range, the selected lines are the context of the request.
---@param args interpreter_lsp.ChatArgs|nil
function M.chat(args)
  args = args or {}
  local buf = vim.api.nvim_get_current_buf()
  local c, s = with_session()
  if not c or not s then
    return
  end
  local function send(text)
    if not text or vim.trim(text) == "" then
      return
    end
    local params, about, context = { text = text }, nil, nil
    if args.line1 and args.line2 and not session_mod.by_panel(buf) then
      local span = { first = args.line1 - 1, last = args.line2, kind = "range" }
      context = { uri = vim.uri_from_bufnr(buf), range = cells.lsp_range(buf, span, c.offset_encoding) }
      params.uri, params.range = context.uri, context.range
      about = string.format("%s:%d-%d", relative(buf), args.line1, args.line2)
    elseif vim.bo[buf].buftype == "" and vim.api.nvim_buf_get_name(buf) ~= "" then
      params.uri = vim.uri_from_bufnr(buf)
    end
    s:user_chat(text, about)
    client.execute(c, protocol.CHAT, params, function(result)
      if result and result.turnId then
        s:bind_turn(result.turnId, context)
      end
    end, function(err)
      s:note("⚠ " .. (err.message or "the request failed"), "InterpreterError")
    end, buf)
  end
  if args.text and args.text ~= "" then
    send(args.text)
  else
    vim.ui.input({ prompt = "Ask the interpreter: " }, send)
  end
end

--- The character-wise visual selection that gave the range line1..line2, if that is where it came from:
--- {first, last} 0-based rows and byte columns, `last_col` exclusive.
---@return table|nil
local function charwise_selection(buf, line1, line2)
  if vim.fn.visualmode() ~= "v" then
    return nil
  end
  local from, to = vim.fn.getpos("'<"), vim.fn.getpos("'>")
  if from[2] ~= line1 or to[2] ~= line2 or from[2] == 0 then
    return nil
  end
  local last_text = vim.api.nvim_buf_get_lines(buf, to[2] - 1, to[2], false)[1] or ""
  local end_col = math.min(to[3], #last_text) -- 1-based byte of the last character (v$ gives MAXCOL)
  if end_col > 0 then
    end_col = end_col + vim.str_utf_end(last_text, end_col) -- the whole last character
  end
  local first_text = vim.api.nvim_buf_get_lines(buf, from[2] - 1, from[2], false)[1] or ""
  return { first_row = from[2] - 1, first_col = math.min(from[3] - 1, #first_text), last_row = to[2] - 1, last_col = end_col }
end

--- Run a 1-based line range (exactly the selected characters after a character-wise selection); else the
--- `# %%` cell at the cursor; else the cursor line.
---@param args {line1: integer|nil, line2: integer|nil}|nil
function M.run(args)
  args = args or {}
  local buf = vim.api.nvim_get_current_buf()
  if session_mod.by_panel(buf) then
    notify("run code from a source buffer, not from the panel", vim.log.levels.WARN)
    return
  end
  local c, s = with_session()
  if not c or not s then
    return
  end
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  local code, where, range
  local sel = args.line1 and charwise_selection(buf, args.line1, args.line2)
  if sel then
    local lines = vim.api.nvim_buf_get_text(buf, sel.first_row, sel.first_col, sel.last_row, sel.last_col, {})
    code = table.concat(lines, "\n")
    local first_text = vim.api.nvim_buf_get_lines(buf, sel.first_row, sel.first_row + 1, false)[1] or ""
    local last_text = vim.api.nvim_buf_get_lines(buf, sel.last_row, sel.last_row + 1, false)[1] or ""
    local enc = c.offset_encoding
    range = {
      start = { line = sel.first_row, character = cells.character_length(first_text:sub(1, sel.first_col), enc) },
      ["end"] = { line = sel.last_row, character = cells.character_length(last_text:sub(1, sel.last_col), enc) },
    }
    where = string.format("%s:%d:%d", relative(buf), sel.first_row + 1, sel.first_col + 1)
  else
    local span = cells.span(buf, args.line1, args.line2, row)
    code = table.concat(vim.api.nvim_buf_get_lines(buf, span.first, span.last, false), "\n")
    if vim.trim(code) == "" then
      notify("nothing to run: the " .. span.kind .. " is empty", vim.log.levels.WARN)
      return
    end
    where = span.last - span.first == 1 and string.format("%s:%d", relative(buf), span.first + 1)
      or string.format("%s:%d-%d", relative(buf), span.first + 1, span.last)
    range = cells.lsp_range(buf, span, c.offset_encoding)
  end
  if vim.trim(code) == "" then
    notify("nothing to run: the selection is empty", vim.log.levels.WARN)
    return
  end
  local run = s:user_run({ language = vim.bo[buf].filetype ~= "" and vim.bo[buf].filetype or nil, code = code, where = where })
  local params = { uri = vim.uri_from_bufnr(buf), range = range }
  client.execute(c, protocol.RUN, params, function(result)
    if result and result.runId then
      s:bind_run(run, result.runId)
    end
  end, function(err)
    run.state = "error"
    run.message = err.message
    s:render_run(run)
  end, buf)
end

--- Run code given as text (from Lua): require("interpreter_lsp").run_code("1 + 1", "python").
---@param code string
---@param language string|nil
function M.run_code(code, language)
  local c, s = with_session()
  if not c or not s then
    return
  end
  local run = s:user_run({ language = language, code = code })
  client.execute(c, protocol.RUN, { code = code, language = language }, function(result)
    if result and result.runId then
      s:bind_run(run, result.runId)
    end
  end, function(err)
    run.state = "error"
    run.message = err.message
    s:render_run(run)
  end)
end

local function pending_proposal(s, verb)
  local prop = s:pick_proposal(panel_row(s))
  if not prop then
    notify("no proposal to " .. verb, vim.log.levels.WARN)
  elseif prop.state ~= "pending" then
    notify(string.format("proposal %d is %s: nothing to %s", prop.index, prop.state, verb), vim.log.levels.WARN)
    return nil
  end
  return prop
end

---@param s interpreter_lsp.Session
---@param prop interpreter_lsp.Proposal
---@param code string|nil edited code
local function approve(c, s, prop, code)
  local run = s:user_run({ language = prop.language, proposal = prop, code = code })
  s:set_proposal_state(prop.id, code and "edited, approved" or "approved")
  client.execute(c, protocol.APPROVE, { proposalId = prop.id, code = code }, function(result)
    if result and result.runId then
      s:bind_run(run, result.runId)
    end
  end, function(err)
    s:set_proposal_state(prop.id, "pending")
    run.state = "error"
    run.message = err.message
    s:render_run(run)
  end)
end

--- Approve the proposal under the cursor in the panel, else the newest pending one.
function M.approve()
  local c, s = with_session()
  local prop = s and pending_proposal(s, "approve")
  if c and s and prop then
    s.panel:follow()
    approve(c, s, prop, nil)
  end
end

--- Reject the proposal. Without a reason the turn ends; with one, the model is asked again with it.
---@param reason string|nil
function M.reject(reason)
  local c, s = with_session()
  local prop = s and pending_proposal(s, "reject")
  if not c or not s or not prop then
    return
  end
  reason = reason and vim.trim(reason) or ""
  s.panel:follow()
  client.execute(c, protocol.REJECT, { proposalId = prop.id, reason = reason ~= "" and reason or nil },
    function()
      if prop.state == "pending" then
        s:set_proposal_state(prop.id, "rejected", reason ~= "" and ("(" .. reason .. ")") or nil)
      end
    end)
end

--- Ask why, then reject with that reason (the model tries again). An empty answer or Esc does nothing.
function M.reject_with_reason()
  local _, s = with_session()
  local prop = s and pending_proposal(s, "reject")
  if not prop then
    return
  end
  vim.ui.input({ prompt = "Why reject it (the model is asked again): " }, function(reason)
    if reason and vim.trim(reason) ~= "" then
      M.reject(reason)
    end
  end)
end

--- Open the proposal in a scratch buffer; writing it (:w) approves the edited code.
function M.edit()
  local c, s = with_session()
  local prop = s and pending_proposal(s, "edit")
  if not c or not s or not prop then
    return
  end
  local origin = vim.api.nvim_get_current_win()
  local buf = vim.api.nvim_create_buf(false, false)
  local ext = ({ python = "py", shell = "sh" })[prop.language] or prop.language
  vim.api.nvim_buf_set_name(buf, string.format("interpreter://proposal-%d.%s", prop.index, ext))
  vim.bo[buf].buftype = "acwrite"
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].swapfile = false
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(prop.code, "\n", { plain = true }))
  vim.bo[buf].modified = false
  vim.bo[buf].filetype = ({ shell = "sh" })[prop.language] or prop.language
  vim.b[buf].interpreter_proposal = prop.id
  vim.api.nvim_create_autocmd("BufWriteCmd", {
    buffer = buf,
    callback = function()
      if prop.state ~= "pending" then
        notify("proposal " .. prop.index .. " is already " .. prop.state, vim.log.levels.WARN)
        return
      end
      local code = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
      vim.bo[buf].modified = false
      s.panel:follow()
      approve(c, s, prop, code)
      vim.schedule(function()
        for _, win in ipairs(vim.fn.win_findbuf(buf)) do
          if #vim.api.nvim_list_wins() > 1 then
            vim.api.nvim_win_close(win, true)
          end
        end
        -- Back where `e` was pressed (the panel), not wherever Neovim lands after the close.
        if vim.api.nvim_win_is_valid(origin) then
          vim.api.nvim_set_current_win(origin)
        end
      end)
    end,
  })
  vim.cmd("botright split")
  vim.api.nvim_win_set_buf(0, buf)
  notify("edit proposal " .. prop.index .. ", then :w to approve it (:q! to leave it pending)")
end

local function is_source(buf)
  return vim.bo[buf].buftype == "" and vim.api.nvim_buf_get_name(buf) ~= "" and not session_mod.by_panel(buf)
end

--- Where `M.apply` writes: {uri, range} for the server, which computes the edit (whole lines, never glued
--- to their neighbours; docs/protocol.md). nil: the server's default (the chat's selection).
---@return table|nil params, integer|nil buf
local function apply_target(c, s, prop, args)
  local buf = vim.api.nvim_get_current_buf()
  if is_source(buf) and args.line1 and args.line2 then
    -- A range of whole lines: replaced.
    return { uri = vim.uri_from_bufnr(buf), range = {
      start = { line = args.line1 - 1, character = 0 }, ["end"] = { line = args.line2, character = 0 } } }, buf
  end
  local turn = s.turns[prop.turn_id]
  if turn and turn.context then
    return { uri = turn.context.uri, range = turn.context.range }, nil
  end
  local target = is_source(buf) and buf or s.source_buf
  if not (target and vim.api.nvim_buf_is_valid(target)) then
    return nil, nil
  end
  local win = target == buf and vim.api.nvim_get_current_win() or vim.fn.win_findbuf(target)[1]
  local row = win and vim.api.nvim_win_get_cursor(win)[1] or vim.api.nvim_buf_line_count(target)
  local text = vim.api.nvim_buf_get_lines(target, row - 1, row, false)[1] or ""
  -- The cursor as the end of its line: below that line, like `p`; on a blank line, in its place.
  local at = { line = row - 1, character = cells.character_length(text, c.offset_encoding) }
  return { uri = vim.uri_from_bufnr(target), range = { start = at, ["end"] = at } }, target
end

--- Write the proposal into a buffer: over a given range of lines (:'<,'>InterpreterApply); else over the
--- lines the chat was about; else below the cursor line of the source window (on a blank line, in its
--- place). The proposal does not run, and its turn ends.
---@param args {line1: integer|nil, line2: integer|nil}|nil
function M.apply(args)
  args = args or {}
  local c, s = with_session()
  local prop = s and pending_proposal(s, "apply")
  if not c or not s or not prop then
    return
  end
  local target, buf = apply_target(c, s, prop, args)
  local params = vim.tbl_extend("force", { proposalId = prop.id }, target or {})
  s.panel:follow()
  client.execute(c, protocol.APPLY_PROPOSAL, params, function(result)
    if result and result.applied then
      if prop.state == "pending" then
        local where = params.uri and vim.fn.fnamemodify(vim.uri_to_fname(params.uri), ":.")
        s:set_proposal_state(prop.id, "applied", where and ("to " .. where) or nil)
      end
    else
      notify("the edit was not applied (the document changed, or the editor refused it)", vim.log.levels.WARN)
    end
  end, nil, buf)
end

function M.toggle_panel()
  local _, s = with_session()
  if s then
    s.panel:toggle()
  end
end

function M.open_panel()
  local _, s = with_session()
  if s then
    s.panel:open()
  end
end

--- All output of the run under the cursor in the panel (else the last run), in a scratch buffer.
function M.show_output()
  local _, s = with_session()
  if not s then
    return
  end
  local row = panel_row(s)
  local sec = row and s.panel:section_at(row)
  if not (sec and sec.kind == "run") then
    for i = #s.panel.sections, 1, -1 do
      if s.panel.sections[i].kind == "run" then
        sec = s.panel.sections[i]
        break
      end
    end
  end
  if not sec or sec.kind ~= "run" then
    notify("no run output to show", vim.log.levels.WARN)
    return
  end
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = "wipe"
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, s.panel:body_lines(sec))
  vim.bo[buf].modifiable = false
  vim.cmd("tab split")
  vim.api.nvim_win_set_buf(0, buf)
end

--- Kernel and turn state for a statusline, e.g. "python:idle thinking".
---@return string
function M.statusline()
  local c = vim.lsp.get_clients({ name = client.name, bufnr = vim.api.nvim_get_current_buf() })[1]
  if not c then
    return ""
  end
  return session_mod.get(c.root_dir or c.config.root_dir, assert(client.opts)):status_line()
end

-- Workspace commands (workspace.lua), part of this module's API.
M.compact = workspace.compact
M.export = workspace.export
M.interrupt = workspace.interrupt
M.languages = workspace.languages
M.refresh_status = workspace.refresh_status
M.reset = workspace.reset
M.restart = workspace.restart
M.status = workspace.status
M.status_text = workspace.status_text
M.trust = workspace.trust
M.undo = workspace.undo
M.untrust = workspace.untrust
M.update_settings = workspace.update_settings
M.variables = workspace.variables

-- For workspace.lua.
M._with_session = with_session
M._ensure_setup = ensure_setup
M._set_panel_keys = set_panel_keys

--- The session of the current buffer's workspace (for tests and integrations).
---@return interpreter_lsp.Session|nil
function M.session()
  local _, s = current()
  return s
end

return M
