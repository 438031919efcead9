-- Commands about a whole workspace: its kernels (interrupt, restart), its conversation (reset, undo,
-- redo, compact, export), its status and settings, its trust, and what happens when its server is ready
-- (the history drawn, the status asked). The buffer-level commands are in source.lua (chat, run) and
-- proposals.lua.
local client = require("interpreter_lsp.client")
local session_mod = require("interpreter_lsp.session")
local protocol = require("interpreter_lsp.protocol")
local trust = require("interpreter_lsp.trust")
local history = require("interpreter_lsp.history")
local words = require("interpreter_lsp.words")

local M = {}

local function api()
  return require("interpreter_lsp")
end

local function with_session()
  return api()._with_session()
end

local function notify(msg, level)
  vim.notify("interpreter_lsp: " .. msg, level or vim.log.levels.INFO)
end

-- Commands about the whole workspace name it by its root (one server may serve several folders).
local function root_uri(s)
  return vim.uri_from_fname(s.root)
end

function M.interrupt()
  local c = with_session()
  if c then
    client.execute(c, protocol.INTERRUPT, {})
  end
end

--- Ask before something that loses work, unless settings.confirmDestructive is false.
---@param question string
---@param action string the button, with & before its key
---@return boolean
local function confirmed(question, action)
  local settings = client.opts and client.opts.settings or {}
  if settings.confirmDestructive == false then
    return true
  end
  return vim.fn.confirm(question, action .. "\n&Cancel", 2, "Question") == 1
end

local FILETYPE_LANGUAGES = { python = "python", sh = "shell", bash = "shell", zsh = "shell" }

--- The language a command without one means: the source buffer's, when a kernel of it runs or it is
--- python or shell; else python.
---@param s interpreter_lsp.Session
---@return string
local function default_language(s)
  local buf = s.source_buf
  local ft = buf and vim.api.nvim_buf_is_valid(buf) and vim.bo[buf].filetype or ""
  local lang = FILETYPE_LANGUAGES[ft] or ft
  if lang ~= "" and (s.kernels[lang] or lang == "python" or lang == "shell") then
    return lang
  end
  return "python"
end

--- Languages for completion: python, shell and every kernel the server reported.
---@param arglead string|nil
---@return string[]
function M.languages(arglead)
  local set = { python = true, shell = true }
  for _, s in pairs(session_mod.all()) do
    for lang in pairs(s.kernels) do
      set[lang] = true
    end
  end
  local out = {}
  for lang in pairs(set) do
    if vim.startswith(lang, arglead or "") then
      table.insert(out, lang)
    end
  end
  table.sort(out)
  return out
end

---@param language string|nil default: the current buffer's language (see default_language)
function M.restart(language)
  local c, s = with_session()
  if not c or not s then
    return
  end
  language = (language and language ~= "") and language or default_language(s)
  if not confirmed("Restart the " .. language .. " kernel? Its variables are lost.", "&Restart") then
    return
  end
  s.restarting[language] = true
  s:note("↻ restarting the " .. language .. " kernel…")
  s.panel:follow()
  client.execute(c, protocol.RESTART_KERNEL, { language = language, uri = root_uri(s) }, nil, function()
    s.restarting[language] = nil
  end)
end

function M.reset()
  local c, s = with_session()
  if not c or not s then
    return
  end
  if not confirmed("Start a new conversation? The model forgets this one (the kernel keeps its state).", "&Reset") then
    return
  end
  client.execute(c, protocol.RESET, { uri = root_uri(s) }, function()
    s:note("── new conversation (the kernel keeps its state) ──")
  end)
end

--- The error handler of undo and redo: "Nothing to undo/redo" (no message or run of the user's yet, no undo,
--- or something new since) is an answer, not a failure: a plain note, not an error in red.
local function nothing_is_an_answer(s, nothing)
  return function(err)
    if vim.startswith(err.message or "", nothing) then
      s:note(err.message)
      words.say(err.message)
      return true
    end
    s:note("⚠ " .. err.message, "InterpreterError")
  end
end

function M.undo()
  local c, s = with_session()
  if c and s then
    client.execute(c, protocol.UNDO, { uri = root_uri(s) }, function(result)
      local text = M.undo_text(result or {})
      s:note(text)
      notify(text)
    end, nothing_is_an_answer(s, "Nothing to undo"))
  end
end

--- Take back the last undo: the request and runs come back, and the files and variables as they were.
function M.redo()
  local c, s = with_session()
  if c and s then
    client.execute(c, protocol.REDO, { uri = root_uri(s) }, function(result)
      local text = M.redo_text(result or {})
      -- The whole of it in the panel; one line of it in the message area (a longer one stops the editor
      -- at a hit-enter prompt).
      s:note(text)
      words.say(text)
    end, nothing_is_an_answer(s, "Nothing to redo"))
  end
end

--- The rest of what an undo or a redo says, after what it did to the conversation: the files and
--- variables it wrote back or removed, and what it could not bring back.
---@param result table an undo or redo result
---@return string
local function changes_text(result)
  local function list(items)
    return type(items) == "table" and #items > 0 and table.concat(items, ", ") or nil
  end
  local parts = {}
  local files, variables = {}, {}
  if list(result.restored) then table.insert(files, "restored " .. list(result.restored)) end
  if list(result.removed) then table.insert(files, "removed " .. list(result.removed)) end
  if list(result.variablesRestored) then table.insert(variables, "restored " .. list(result.variablesRestored)) end
  if list(result.variablesRemoved) then table.insert(variables, "removed " .. list(result.variablesRemoved)) end
  if #files > 0 then table.insert(parts, "; files " .. table.concat(files, "; ")) end
  if #variables > 0 then table.insert(parts, "; variables " .. table.concat(variables, "; ")) end
  local lost = {}
  for _, item in ipairs(type(result.notRestorable) == "table" and result.notRestorable or {}) do
    table.insert(lost, item.name .. " (" .. item.why .. ")")
  end
  table.insert(parts, #lost > 0 and (". Not restored: " .. table.concat(lost, "; ") .. ".") or ".")
  return table.concat(parts)
end

--- Whether an undo or redo result names a request (null when the unit was the user's own run).
local function has_request(result)
  return result.request ~= nil and result.request ~= vim.NIL
end

--- What an undo says: what left the conversation, the files and variables that came back, what did not.
---@param result table the undo result ({request, restored, removed, variablesRestored, variablesRemoved, notRestorable})
---@return string
function M.undo_text(result)
  local what = has_request(result) and "your last message and what followed it are gone from the conversation"
    or "your last run is gone from the conversation"
  return "↶ Undone: " .. what .. changes_text(result)
end

--- What a redo says: what came back to the conversation, the files written back as the undo found them and
--- those removed again, the variables likewise, and what could not come back.
---@param result table the redo result (the undo result's shape)
---@return string
function M.redo_text(result)
  local what = has_request(result) and "your message and what followed it are back in the conversation"
    or "your run is back in the conversation"
  return "↷ Redone: " .. what .. changes_text(result)
end

local function float(lines, title)
  vim.lsp.util.open_floating_preview(lines, "markdown", { border = "rounded", title = title, focus_id = "interpreter_lsp" })
end

---@param language string|nil
function M.variables(language)
  local c, s = with_session()
  if not c or not s then
    return
  end
  local args = { language = language ~= "" and language or nil, uri = root_uri(s) }
  client.execute(c, protocol.VARIABLES, args, function(result)
    local lines = {}
    for _, v in ipairs(result and result.variables or {}) do
      table.insert(lines, string.format("%-20s %-14s %s", v.name, v.type, (v.summary or ""):gsub("\n", " ")))
    end
    if #lines == 0 then
      lines = { "(no variables)" }
    end
    float(lines, " variables ")
  end)
end

--- What interpreter.status says, kept in the session for the window bar (model, context use, trust).
---@param s interpreter_lsp.Session
---@param result table
local function remember_status(s, result)
  s.last_status = result
  s.model = type(result.model) == "string" and result.model or nil
  if type(result.context) == "table" then
    s.context = result.context
  end
  if type(result.trusted) == "boolean" then
    s.trusted = result.trusted
  end
  s:update_winbar()
end

--- What :InterpreterStatus says, line by line, for an interpreter.status result.
---@param s interpreter_lsp.Session
---@param result table
---@return string[]
function M.status_text(s, result)
  local kernels = {}
  for _, k in ipairs(result.kernels or {}) do
    local line = k.language .. " " .. k.state
    if k.source then
      line = line .. " (" .. k.source .. (k.sandbox and k.sandbox ~= "off" and ", sandbox " .. k.sandbox or "") .. ")"
    end
    table.insert(kernels, line)
  end
  local limits = {}
  for _, k in ipairs(result.kernels or {}) do
    if type(k.limits) == "string" and k.limits ~= "" then
      table.insert(limits, "limits (" .. k.language .. "): " .. k.limits)
    end
  end
  local usage = result.usage or {}
  -- One word for the cost: what the server priced, or "unknown" when it has no price for the model (never
  -- "cost 0" beside "cost unknown").
  local ctx_known = not (type(result.context) == "table" and result.context.costKnown == false)
  local cost = ctx_known and string.format("$%.2f", tonumber(usage.cost) or 0) or "unknown"
  local lines = {
    "model: " .. (type(result.model) == "string" and result.model or "(none configured: set settings.model)"),
    "auto-run: " .. tostring(result.autoRun),
    "kernels: " .. (#kernels > 0 and table.concat(kernels, ", ") or "none started"),
    string.format("tokens: %s prompt, %s completion; cost %s", usage.promptTokens or 0,
      usage.completionTokens or 0, cost),
  }
  vim.list_extend(lines, limits)
  local ctx = result.context
  local ctx_text = session_mod.context_text(ctx)
  if ctx_text then
    local more = {}
    if type(ctx.windowSource) == "string" then
      table.insert(more, "window from " .. ctx.windowSource)
    end
    if type(ctx.compactions) == "number" and ctx.compactions > 0 then
      table.insert(more, string.format("condensed %d time%s", ctx.compactions, ctx.compactions == 1 and "" or "s"))
    end
    table.insert(lines, "context: " .. ctx_text .. (#more > 0 and (" (" .. table.concat(more, ", ") .. ")") or ""))
  end
  for _, w in ipairs(type(result.agentsWaiting) == "table" and result.agentsWaiting or {}) do
    table.insert(lines, string.format("waiting for your decision: %s (%s, since %s; :InterpreterApprove)",
      tostring(w.agent), tostring(w.language), tostring(w.since)))
  end
  if result.trusted == false then
    table.insert(lines, "trusted: no, nothing runs here (:InterpreterTrust trusts " .. s.root .. ")")
  end
  table.insert(lines, "workspace: " .. s.root)
  return lines
end

function M.status()
  local c, s = with_session()
  if not c or not s then
    return
  end
  client.execute(c, protocol.STATUS, { uri = root_uri(s) }, function(result)
    result = result or {}
    remember_status(s, result)
    notify(table.concat(M.status_text(s, result), "\n"))
  end)
end

--- Condense the conversation now (the model writes a summary of the earlier turns).
function M.compact()
  local c, s = with_session()
  if not c or not s then
    return
  end
  client.execute(c, protocol.COMPACT, { uri = root_uri(s) }, function(result)
    result = type(result) == "table" and result or {}
    local n, dropped = result.summaryTokens, result.droppedTurns
    local text = type(n) == "number" and string.format("⋯ Earlier turns condensed (%d tokens", n) or "⋯ Earlier turns condensed ("
    text = text .. (type(dropped) == "number" and string.format("%s%d turns)", type(n) == "number" and "; " or "", dropped) or ")")
    s:note((text:gsub(" %(%)$", "")))
    M.refresh_status(c, s)
  end)
end

--- Ask the server's status again (after a settings change, a compaction) and update the window bar.
function M.refresh_status(c, s)
  client.execute(c, protocol.STATUS, { uri = root_uri(s) }, function(result)
    if type(result) == "table" then
      remember_status(s, result)
    end
  end)
end

--- Change server settings while running: merged into setup()'s `settings`, sent to every running server
--- (workspace/didChangeConfiguration); the window bar shows the new model at once.
---@param changes table e.g. { model = "gpt-4o-mini" }
function M.update_settings(changes)
  api()._ensure_setup()
  local opts = assert(client.opts)
  opts.settings = vim.tbl_deep_extend("force", opts.settings or {}, changes or {})
  local settings = require("interpreter_lsp.config").json_object(opts.settings)
  for _, c in ipairs(vim.lsp.get_clients({ name = client.name })) do
    c.settings = { interpreter = settings }
    c.config.settings = c.settings
    client.notify(c, "workspace/didChangeConfiguration", { settings = c.settings })
    -- The server reads the new settings asynchronously: show the model now rather than ask the server
    -- at once (it could still answer with the old one).
    if changes and type(changes.model) == "string" then
      local s = session_mod.get(c.root_dir or c.config.root_dir, opts)
      s.model = changes.model
      s:update_winbar()
    end
  end
end

local UNTRUSTED = "This folder is not trusted, so nothing runs here: no kernel starts (not even its own .venv), "
  .. "its .interpreter-lsp.toml is not read, and proposals wait. :InterpreterTrust trusts %s."

--- Trust the current workspace folder (remembered in stdpath("state")); the server may run code at once.
function M.trust()
  local c, s = with_session()
  if not c or not s then
    return
  end
  trust.trust(s.root)
  s.trusted = true
  client.execute(c, protocol.SET_TRUSTED, { trusted = true }, function()
    s:note("✓ trusted " .. s.root .. ": code may run here now (:InterpreterUntrust withdraws it)")
    M.refresh_status(c, s)
  end)
end

--- Withdraw trust in the current workspace folder: nothing runs from now on.
function M.untrust()
  local c, s = with_session()
  if not c or not s then
    return
  end
  trust.untrust(s.root)
  s.trusted = false
  client.execute(c, protocol.SET_TRUSTED, { trusted = false }, function()
    s:note(string.format(UNTRUSTED, s.root), "InterpreterRisk")
    M.refresh_status(c, s)
  end)
end

--- A server finished initialize: show the workspace's history, its status, and why nothing runs when
--- the folder is not trusted.
---@param c vim.lsp.Client
---@param s interpreter_lsp.Session
function M.on_ready(c, s)
  api()._set_panel_keys(s)
  -- Once per session: a server restarted in the same Neovim (:LspRestart) reads the history this panel
  -- shows already.
  local first = not s.history_shown
  s.history_shown = true
  client.execute(c, protocol.HISTORY, { uri = root_uri(s) }, function(result)
    if first then
      history.render(s, type(result) == "table" and result.messages or nil)
    end
    if s.trusted == false then
      s:note(string.format(UNTRUSTED, s.root), "InterpreterRisk")
    end
  end)
  M.refresh_status(c, s)
end

--- The client and session an export to `path` goes through; nil (said) without a session or a path.
---@param path string
---@param command string the command that asked, named in the hint
local function export_target(path, command)
  local c, s = with_session()
  if not c or not s then
    return nil
  end
  if not path or path == "" then
    notify("give a file name: :" .. command .. " notebook.ipynb", vim.log.levels.ERROR)
    return nil
  end
  return c, s
end

---@param path string
function M.export(path)
  local c, s = export_target(path, "InterpreterExport")
  if not c or not s then
    return
  end
  client.execute(c, protocol.EXPORT_NOTEBOOK, { path = path, uri = root_uri(s) }, function(result)
    notify("exported the conversation to " .. ((result and result.path) or path))
  end)
end

--- What a verified export says: whether the notebook reproduces, each cell that does not and why.
---@param result table the exportNotebook result ({path, verification})
---@return string text, boolean reproduces
function M.verification_text(result)
  local name = vim.fn.fnamemodify(result.path or "", ":t")
  local v = result.verification
  if type(v) ~= "table" then
    return "Notebook " .. name .. " was written without verdicts.", false
  end
  local seconds = string.format("%.1f s", v.seconds or 0)
  local differs = v.differs or {}
  if #differs == 0 and (v.notRun or 0) == 0 then
    local equivalent = (v.equivalent or 0) > 0
        and string.format(" (%d equivalent: the same once addresses, ids, times and float noise are set aside)", v.equivalent)
      or ""
    local all = v.cells == 1 and "its one cell gave" or string.format("all %d cells gave", v.cells)
    return string.format("✓ Notebook %s reproduces: %s the session's output again%s, in %s.", name, all,
      equivalent, seconds), true
  end
  local parts = {}
  for _, d in ipairs(differs) do
    parts[#parts + 1] = string.format("cell %d: %s", d.cell, d.cause)
  end
  if (v.notRun or 0) > 0 then
    parts[#parts + 1] = string.format("%d not run (after an error or the stop)", v.notRun)
  end
  return string.format("✗ Notebook %s does not fully reproduce (%d of %d cells as in the session, %s): %s.", name,
    (v.identical or 0) + (v.equivalent or 0), v.cells, seconds, table.concat(parts, "; ")), false
end

--- Export, then re-run the notebook in a fresh kernel: the verdict goes to the panel and a notification.
---@param path string
function M.export_verified(path)
  local c, s = export_target(path, "InterpreterVerify")
  if not c or not s then
    return
  end
  notify("verifying " .. path .. ": re-running it in a fresh kernel (:InterpreterInterrupt stops it)")
  client.execute(c, protocol.EXPORT_NOTEBOOK, { path = path, uri = root_uri(s), verify = true }, function(result)
    local text, reproduces = M.verification_text(result or {})
    s:note(text, reproduces and nil or "WarningMsg")
    notify(text, reproduces and vim.log.levels.INFO or vim.log.levels.WARN)
  end)
end

return M
