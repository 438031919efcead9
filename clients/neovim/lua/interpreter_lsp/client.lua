-- The language client: find the server, start one per workspace root, route its notifications to the
-- root's session, answer its input requests, and send commands once the server is initialized.
local config = require("interpreter_lsp.config")
local session_mod = require("interpreter_lsp.session")
local protocol = require("interpreter_lsp.protocol")
local trust = require("interpreter_lsp.trust")
local words = require("interpreter_lsp.words")

local M = {}

-- Neovim 0.11 made client methods take `self`; 0.10 has closures.
local has_011 = vim.fn.has("nvim-0.11") == 1

M.name = "interpreter_lsp"

---@type interpreter_lsp.Options|nil
M.opts = nil

-- Commands waiting for their client to finish `initialize`, by client id.
---@type table<integer, fun()[]>
local waiting = {}

--- The server command (setup option cmd, else PATH, else the managed install: managed.lua), or nil and
--- a message saying how to fix it.
---@param opts interpreter_lsp.Options
---@return string[]|nil, string|nil
function M.server_cmd(opts)
  local cmd, why = require("interpreter_lsp.install").find_server(opts)
  if not cmd then
    return nil, why
  end
  if opts.log_file then
    vim.list_extend(cmd, { "--log-file", opts.log_file })
  end
  if opts.log_level then
    vim.list_extend(cmd, { "--log-level", opts.log_level })
  end
  return cmd, nil
end

---@param buf integer
---@return string
function M.root_for(buf)
  local opts = assert(M.opts)
  local name = vim.api.nvim_buf_get_name(buf)
  -- The nearest folder holding any marker (vim.fs.root would try each marker all the way up in turn).
  if name ~= "" then
    for dir in vim.fs.parents(vim.fs.normalize(vim.fn.fnamemodify(name, ":p"))) do
      for _, marker in ipairs(opts.root_markers) do
        if vim.uv.fs_stat(dir .. "/" .. marker) then
          return dir
        end
      end
    end
  end
  local cwd = vim.fn.getcwd()
  if name == "" or vim.startswith(name, cwd .. "/") then
    return cwd
  end
  return vim.fs.dirname(name)
end

---@param ctx table handler context
---@return interpreter_lsp.Session|nil
local function session_of(ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if not client then
    return nil
  end
  local s = session_mod.get(client.root_dir or client.config.root_dir, assert(M.opts))
  s.client_id = client.id
  return s
end

local function notification(method)
  return function(_, params, ctx)
    local s = session_of(ctx)
    if s and params then
      local ok, err = pcall(s[method], s, params)
      if not ok then
        vim.notify("interpreter_lsp: could not show " .. method .. ": " .. tostring(err), vim.log.levels.ERROR)
      end
    end
  end
end

-- `interpreter/input`: code called input(). Answer through vim.ui.input; a password is read with
-- inputsecret. The handler runs in a coroutine (Neovim >= 0.11), so an asynchronous vim.ui.input
-- (dressing, snacks) can answer later without blocking the editor.
local function on_input(_, params)
  local prompt = (params and params.prompt ~= "" and params.prompt) or "input: "
  if params and params.password then
    local ok, value = pcall(vim.fn.inputsecret, prompt)
    return ok and { value = value } or vim.NIL
  end
  local co = coroutine.running()
  local answered, answer = false, nil
  vim.ui.input({ prompt = prompt }, function(value)
    answered, answer = true, value
    if co and coroutine.status(co) == "suspended" then
      coroutine.resume(co)
    end
  end)
  if not answered and co then
    coroutine.yield()
  end
  if answer == nil then
    return vim.NIL
  end
  return { value = answer }
end

--- Which Session method handles each notification (the specs in tests/neovim feed them by this table).
M.notification_methods = {
  [protocol.MESSAGE] = "on_message",
  [protocol.PROPOSAL] = "on_proposal",
  [protocol.OUTPUT] = "on_output",
  [protocol.RUN_STATUS] = "on_run_status",
  [protocol.TURN_STATUS] = "on_turn_status",
  [protocol.KERNEL_STATUS] = "on_kernel_status",
  [protocol.PROPOSAL_STATUS] = "on_proposal_status",
}

-- window/showMessage (a kernel that died, settings the server ignored): Neovim's own handler echoes the
-- whole text, and a long one stops the editor at "Press ENTER". Here it goes whole into the panel and as
-- one line to the message area.
local function on_show_message(_, params, ctx)
  if type(params) ~= "table" or type(params.message) ~= "string" then
    return
  end
  local level = ({ [1] = vim.log.levels.ERROR, [2] = vim.log.levels.WARN })[params.type] or vim.log.levels.INFO
  local s = session_of(ctx)
  local text = words.neovim(params.message)
  if s then
    s:note((level == vim.log.levels.INFO and "" or "⚠ ") .. text,
      level == vim.log.levels.ERROR and "InterpreterError" or level == vim.log.levels.WARN and "InterpreterRisk" or nil)
  end
  words.say(text, level)
end

local handlers = { [protocol.INPUT] = on_input, ["window/showMessage"] = on_show_message }
for method, session_method in pairs(M.notification_methods) do
  handlers[method] = notification(session_method)
end
M.handlers = handlers

-- The server's code lenses ("Run cell" above each `# %%`), kept fresh; `:lua vim.lsp.codelens.run()`
-- on a marker line runs that cell.
function M.enable_codelens(c, bufnr)
  if not (M.opts and M.opts.codelens) or not c.server_capabilities.codeLensProvider then
    return
  end
  local function refresh()
    if vim.api.nvim_buf_is_valid(bufnr) then
      vim.lsp.codelens.refresh({ bufnr = bufnr })
    end
  end
  refresh()
  vim.api.nvim_create_autocmd({ "BufEnter", "InsertLeave", "BufWritePost", "TextChanged" }, {
    group = vim.api.nvim_create_augroup("interpreter_lsp_codelens_" .. bufnr, { clear = true }),
    buffer = bufnr,
    callback = refresh,
  })
end

-- The server's code lenses and code actions name interpreter.run: run them through M.execute, so an error
-- reads as the server wrote it (Neovim's own command runner shows "-32602: …"). Registered once.
local function register_commands()
  vim.lsp.commands[protocol.RUN] = function(command, ctx)
    local c = vim.lsp.get_client_by_id(ctx.client_id)
    if c then
      M.execute(c, command.command, (command.arguments or {})[1] or {}, nil, nil, ctx.bufnr)
    end
  end
end

--- Start (or reuse) the client for `buf`'s workspace root and attach the buffer.
---@param buf integer
---@return integer|nil client id
function M.attach(buf)
  local opts = assert(M.opts, "interpreter_lsp: call require('interpreter_lsp').setup() first")
  local cmd, err = M.server_cmd(opts)
  if not cmd then
    -- Once, and after the autocommand that opened the file: an error raised inside BufReadPost would
    -- come as an "Error detected while processing BufReadPost Autocommands" trace and a hit-enter prompt.
    M.told = M.told or {}
    if not M.told[err] then
      M.told[err] = true
      vim.schedule(function()
        vim.notify(words.one_line(err), vim.log.levels.ERROR)
      end)
    end
    return nil
  end
  register_commands()
  local root = M.root_for(buf)
  local settings = config.json_object(opts.settings)
  local trusted = trust.is_trusted(root, opts.trusted)
  session_mod.get(root, opts).trusted = trusted
  local id = vim.lsp.start({
    name = M.name,
    cmd = cmd,
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = vim.fn.fnamemodify(root, ":t") } },
    init_options = {
      settings = settings,
      capabilities = { input = true },
      trusted = trusted,
    },
    settings = { interpreter = settings },
    handlers = handlers,
    on_init = function(client)
      local queue = waiting[client.id] or {}
      waiting[client.id] = nil
      for _, fn in ipairs(queue) do
        fn()
      end
      if M.on_ready then
        M.on_ready(client, session_mod.get(root, opts))
      end
    end,
    on_attach = function(c, bufnr)
      M.enable_codelens(c, bufnr)
    end,
    on_exit = function(code, signal, client_id)
      waiting[client_id] = nil
      vim.schedule(function()
        local s = session_mod.get(root, opts)
        if code ~= 0 and vim.v.exiting == vim.NIL then
          s:note(string.format("✗ the interpreter-lsp server stopped (exit code %d, signal %d); "
            .. ":LspRestart or reopening a file starts it again", code, signal), "InterpreterError")
        end
      end)
    end,
  }, { bufnr = buf })
  if id then
    local s = session_mod.get(root, opts)
    s.client_id = id
  end
  return id
end

--- The client for `buf`; the panel's client when `buf` is a panel; started when missing.
---@param buf integer
---@return vim.lsp.Client|nil, interpreter_lsp.Session|nil
function M.for_buffer(buf)
  local s = session_mod.by_panel(buf)
  if s then
    local c = s.client_id and vim.lsp.get_client_by_id(s.client_id)
    if c and not (has_011 and c:is_stopped() or not has_011 and c.is_stopped()) then
      return c, s
    end
    buf = (s.source_buf and vim.api.nvim_buf_is_valid(s.source_buf)) and s.source_buf or buf
  end
  local c = vim.lsp.get_clients({ name = M.name, bufnr = buf })[1]
  if not c and vim.bo[buf].buftype == "" and not session_mod.by_panel(buf) then
    local id = M.attach(buf)
    c = id and vim.lsp.get_client_by_id(id) or nil
  end
  if not c then
    -- A buffer with no file (a scratch buffer, the panel): use the one running client, if any.
    c = vim.lsp.get_clients({ name = M.name })[1]
  end
  if not c then
    return nil, nil
  end
  s = session_mod.get(c.root_dir or c.config.root_dir, assert(M.opts))
  s.client_id = c.id
  if vim.bo[buf].buftype == "" and vim.api.nvim_buf_get_name(buf) ~= "" then
    s.source_buf = buf
  end
  return c, s
end

--- Send a notification to the server (Neovim 0.10 and 0.11 spell the method differently).
function M.notify(client, method, params)
  if has_011 then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

--- Send `workspace/executeCommand` once the client is ready. `on_result(result)` runs on success;
--- errors are passed to `on_error` and shown to the user (the server writes them for people), unless
--- `on_error` returns true: it told the user itself (an answer such as "Nothing to redo" is no failure).
---@param client vim.lsp.Client
---@param command string
---@param args table
---@param on_result fun(result: any)|nil
---@param on_error fun(err: table): boolean|nil
---@param buf integer|nil the buffer whose pending changes must reach the server first
function M.execute(client, command, args, on_result, on_error, buf)
  local function send()
    local request = has_011 and function(...)
      return client:request(...)
    end or client.request
    request("workspace/executeCommand", {
      command = command,
      arguments = { config.json_object(args) },
    }, function(err, result)
      if err then
        -- The server writes its errors for people: show them in Neovim's words, not behind a method name or
        -- an error code, in one line (the whole of it in the panel), never as a hit-enter prompt.
        local text = words.neovim(err.message or vim.inspect(err))
        err = vim.tbl_extend("force", err, { message = text })
        if on_error and on_error(err) == true then
          return
        end
        words.say(text, vim.log.levels.ERROR)
        if not on_error then
          local s = session_mod.get(client.root_dir or client.config.root_dir, assert(M.opts))
          s:note("⚠ " .. text, "InterpreterError")
        end
        return
      end
      if on_result then
        on_result(result)
      end
    end, buf)
  end
  if client.initialized then
    send()
  else
    waiting[client.id] = waiting[client.id] or {}
    table.insert(waiting[client.id], send)
  end
end

return M
