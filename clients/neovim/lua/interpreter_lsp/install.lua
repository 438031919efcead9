-- :InterpreterInstall: the server's own environment. The server never goes into the user's project
-- environment: it gets a virtualenv of its own under stdpath("data"), made from a Python >= 3.10 and
-- filled by pip, from this plugin's checkout when the plugin sits in the repository, else from the
-- package index. Every step runs with vim.system and a callback: the editor never waits. Where the
-- server is found, and the managed install's state: managed.lua (re-exported here).
local managed = require("interpreter_lsp.managed")

local M = {}

local MIN_PYTHON = { 3, 10 }
local MARKER = managed.MARKER

-- What the install says goes whole into its window (install_window.lua) and, one line each, to messages.
local progress = require("interpreter_lsp.install_window")

--- The install window's lines (what the install said, whole).
function M.progress_lines()
  return progress.lines()
end

--- `msg` whole into the install's buffer; one line (`short`, else `msg` cut) as a message.
local function notify(msg, level, short)
  progress.add(vim.split(msg, "\n", { plain = true }))
  vim.notify(require("interpreter_lsp.words").one_line("interpreter_lsp: " .. (short or msg)), level or vim.log.levels.INFO)
end

local managed_exe = managed.exe

M.dir = managed.dir
M.venv = managed.venv
M.log_path = managed.log_path
M.checkout = managed.checkout
M.installed = managed.installed
M.update_notice = managed.update_notice
M.NOT_FOUND = managed.NOT_FOUND
M.find_server = managed.find_server
M.parse_source = managed.parse_source

-- Steps ---------------------------------------------------------------------------------------------

-- Run argv without blocking; resumes the install's coroutine with the vim.system result (stdout: what
-- the process wrote there). Unless quiet, output lines go to the log and, throttled, to the message line,
-- so a long pip run shows it is alive.
local function run(argv, state, quiet)
  local co = coroutine.running()
  local last_echo, out = 0, {}
  local function on_output(is_stdout)
    return function(_, data)
      if not data then
        return
      end
      if is_stdout then
        table.insert(out, data)
      end
      if quiet then
        return
      end
      vim.schedule(function()
        local new = vim.split(data, "\n", { trimempty = true })
        for _, line in ipairs(new) do
          table.insert(state.lines, line)
          if state.log then
            state.log:write(line, "\n")
          end
        end
        if #state.lines > 200 then
          state.lines = vim.list_slice(state.lines, #state.lines - 99)
        end
        progress.add(vim.tbl_map(function(l) return "  " .. l end, new))
        local now = vim.uv.now()
        if now - last_echo > 1000 and #state.lines > 0 then
          last_echo = now
          -- One line, never kept in :messages: it cannot pile up into a hit-enter prompt.
          local words = require("interpreter_lsp.words")
          vim.api.nvim_echo({ { words.one_line("interpreter_lsp: " .. state.lines[#state.lines]) } }, false, {})
        end
      end)
    end
  end
  if state.log and not quiet then
    state.log:write("$ ", table.concat(argv, " "), "\n")
  end
  -- The user's shell may add a project's folders to every Python (PYTHONPATH; empty means none) or ask
  -- pip for --user installs, which a venv refuses; the package index settings (PIP_INDEX_URL...) stay.
  local env = { PYTHONPATH = "", PIP_USER = "0" }
  local opts = { text = true, env = env, stdout = on_output(true), stderr = on_output(false) }
  local ok, proc = pcall(vim.system, argv, opts, function(res)
    vim.schedule(function()
      state.proc = nil
      state.resume({ code = res.code, signal = res.signal, stdout = table.concat(out) })
    end)
  end)
  if not ok then
    table.insert(state.lines, tostring(proc))
    return { code = -1, stdout = "" }
  end
  state.proc = proc
  return coroutine.yield()
end

local function version_of(python, state)
  local res = run({ python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])" }, state, true)
  return res.code == 0 and vim.trim(res.stdout or ""):match("^%d+%.%d+%.%d+$") or nil
end

local function new_enough(version)
  local major, minor = version:match("^(%d+)%.(%d+)")
  major, minor = tonumber(major), tonumber(minor)
  return major > MIN_PYTHON[1] or major == MIN_PYTHON[1] and minor >= MIN_PYTHON[2]
end

--- A Python >= 3.10 to make the environment from: python3 on PATH, g:python3_host_prog, then
--- python3.13 .. python3.10 on PATH. Returns path, version, or nil and a message naming what was found.
local function find_python(state)
  local candidates, seen, found = {}, {}, {}
  local function add(name, label)
    local path = name and name ~= "" and vim.fn.exepath(vim.fn.expand(name)) or ""
    if path ~= "" and not seen[path] then
      seen[path] = true
      table.insert(candidates, { path = path, label = label })
    end
  end
  add("python3", "python3 on PATH")
  add(vim.g.python3_host_prog, "g:python3_host_prog")
  for minor = 13, 10, -1 do
    add("python3." .. minor, "python3." .. minor .. " on PATH")
  end
  for _, c in ipairs(candidates) do
    local version = version_of(c.path, state)
    if version and new_enough(version) then
      return c.path, version
    end
    table.insert(found, string.format("%s is %s (%s)", c.label, version or "not a working Python", c.path))
  end
  if vim.fn.exepath("python3") == "" then
    table.insert(found, 1, "no python3 on PATH")
  end
  if not vim.g.python3_host_prog then
    table.insert(found, "g:python3_host_prog is not set")
  end
  return nil, "the server needs Python 3.10 or newer, and none was found: " .. table.concat(found, "; ")
    .. ". Install one, or set g:python3_host_prog to it."
end

local function fail(state, what, todo)
  local tail = vim.list_slice(state.lines, math.max(1, #state.lines - 14))
  notify(what .. (#tail > 0 and (":\n" .. table.concat(tail, "\n")) or "") .. "\n(the whole output: "
    .. M.log_path() .. ")" .. (todo and ("\n" .. todo) or ""), vim.log.levels.ERROR,
    what .. ": interpreter://install says why" .. (todo and " and what to do" or ""))
  progress.show()
  progress.bar("failed · what to do is below · q closes")
  return false
end

-- Until the package is published, pip finds no interpreter-lsp on the index: what to do instead.
M.NOT_PUBLISHED = "interpreter-lsp is not on the package index yet: install it from what you have,"
  .. " :InterpreterInstall /path/to/a/clone (or a .whl file, or git+https://…/interpreter-lsp.git)"

local function write_marker(info)
  local path = M.venv() .. "/" .. MARKER
  local fd = assert(io.open(path .. ".tmp", "w"))
  fd:write(vim.json.encode(info))
  fd:close()
  assert(vim.uv.fs_rename(path .. ".tmp", path))
end

-- Providers the server speaks to itself (server/interpreter_lsp/llm/routes.py); any other needs litellm.
local DIRECT_PROVIDERS = { openai = true, anthropic = true, ollama = true, ollama_chat = true, lm_studio = true,
  hosted_vllm = true, llamafile = true }

--- Whether the install needs the server's `providers` extra (litellm, with boto3, tokenizers...): a configured
--- model (settings.model, settings.reviewModel) of a provider the server does not speak to itself. No model
--- (a local server is found), OpenAI-compatible, Anthropic and Ollama models install without it.
---@param settings table|nil the `interpreter` settings (default: those given to setup())
function M.needs_providers(settings)
  settings = settings or ((require("interpreter_lsp.client").opts or {}).settings or {})
  for _, key in ipairs({ "model", "reviewModel" }) do
    local name = type(settings[key]) == "string" and vim.trim(settings[key]) or ""
    if name ~= "" then
      local provider = name:match("^([^/]+)/")
      if provider then
        if not DIRECT_PROVIDERS[provider] then
          return true
        end
      elseif not (name:match("^gpt%-") or name:match("^chatgpt%-") or name:match("^o[134]") or name:match("^codex%-")
          or name:match("^claude%-")) then
        return true
      end
    end
  end
  return false
end

-- The install itself, in a coroutine: each `run` yields until its process ends.
local function install_steps(state, force, source)
  local venv = M.venv()
  local checkout = M.checkout()
  local chosen = nil
  local client = package.loaded["interpreter_lsp.client"]
  source = source or (client and client.opts and client.opts.install_source) or nil
  if source and source ~= "" then
    local why
    chosen, why = M.parse_source(source)
    if not chosen then
      notify(why, vim.log.levels.ERROR)
      return false
    end
    checkout = chosen.kind == "checkout" and chosen.checkout or nil
    force = true -- a source the user names is installed, whatever is there
  end
  local info = M.installed()
  if info and not force and not (checkout and info.version ~= checkout.version) then
    notify(string.format("interpreter-lsp %s is installed (%s); :InterpreterInstall! reinstalls it",
      tostring(info.version), venv))
    return true
  end
  vim.fn.mkdir(M.dir(), "p")
  state.log = io.open(M.log_path(), "w")
  progress.show()

  local python, version
  if info then
    python = venv .. "/bin/python"
  else
    python, version = find_python(state)
    if not python then
      notify(version, vim.log.levels.ERROR)
      return false
    end
  end
  -- From here on the marker is gone: an install that stops half-way is not used.
  os.remove(venv .. "/" .. MARKER)
  if not info then
    if vim.fn.isdirectory(venv) == 1 then
      run({ "rm", "-rf", venv }, state, true) -- a half-done install from before (thousands of files)
    end
    notify(string.format("creating the server's environment %s (Python %s, %s)", venv, version, python))
    local res = run({ python, "-m", "venv", venv }, state)
    if res.code ~= 0 then
      run({ "rm", "-rf", venv }, state, true)
      return fail(state, "could not create the environment with " .. python .. " -m venv"
        .. " (on Debian and Ubuntu: apt install python3-venv)")
    end
    python = venv .. "/bin/python"
  end

  local spec, source = "interpreter-lsp", "the package index"
  if checkout then
    -- Build from a copy: pip and setuptools write build files next to the sources, and the plugin's
    -- folder may be read-only.
    local src = M.dir() .. "/src"
    vim.fn.delete(src, "rf")
    vim.fn.mkdir(src .. "/server", "p")
    local res = run({ "cp", "-R", checkout.root .. "/pyproject.toml", checkout.root .. "/LICENSE", src }, state)
    if res.code == 0 then
      res = run({ "cp", "-R", checkout.root .. "/server/interpreter_lsp", checkout.root .. "/server/README.md",
        src .. "/server" }, state)
    end
    if res.code ~= 0 then
      return fail(state, "could not copy the server's sources from " .. checkout.root)
    end
    vim.fn.delete(src .. "/server/interpreter_lsp.egg-info", "rf")
    spec, source = src, chosen and chosen.label or ("this plugin's checkout " .. checkout.root)
  elseif chosen then
    spec, source = chosen.spec, chosen.label
  end
  if M.needs_providers() then
    spec = spec .. "[providers]" -- litellm, for a model the server does not speak to itself
  end
  notify(string.format("installing interpreter-lsp from %s with pip (its dependencies come from the package"
    .. " index: a minute or more)", source))
  local res = run({ python, "-m", "pip", "install", "--upgrade", "--no-input", "--disable-pip-version-check",
    "--progress-bar", "off", spec }, state)
  if checkout then
    vim.fn.delete(M.dir() .. "/src", "rf")
  end
  if res.code ~= 0 then
    local todo = (not checkout and not chosen) and M.NOT_PUBLISHED
      or (chosen and chosen.kind == "url") and "check the URL (pip needs git for git+ URLs), or give a clone's folder"
      or nil
    return fail(state, "pip could not install interpreter-lsp (exit " .. res.code .. ")", todo)
  end

  res = run({ managed_exe(), "--version" }, state)
  local installed = res.code == 0 and vim.trim(res.stdout or ""):match("^interpreter%-lsp%s+(%S+)")
  if not installed then
    return fail(state, "the installed server does not start (" .. managed_exe() .. " --version)")
  end
  write_marker({
    version = installed,
    source = checkout and ("checkout:" .. checkout.root) or chosen and (chosen.kind .. ":" .. chosen.spec) or "index",
    python = python,
    installed = os.date("!%Y-%m-%dT%H:%M:%SZ"),
  })
  notify(string.format("interpreter-lsp %s installed in %s (%.0f s)", installed, venv,
    (vim.uv.hrtime() - state.started) / 1e9))
  progress.bar("done, interpreter-lsp " .. installed .. " · q closes")
  -- Say so when this install is not what the plugin will start, or not yet.
  local client = package.loaded["interpreter_lsp.client"]
  if client and client.opts and client.opts.cmd then
    notify("the setup option cmd (" .. client.opts.cmd[1] .. ") still comes first", vim.log.levels.WARN)
  elseif vim.fn.exepath("interpreter-lsp") ~= "" then
    notify("interpreter-lsp on PATH (" .. vim.fn.exepath("interpreter-lsp") .. ") still comes first",
      vim.log.levels.WARN)
  end
  for _, c in ipairs(vim.lsp.get_clients({ name = "interpreter_lsp" })) do
    if info and c.config.cmd and c.config.cmd[1] == managed_exe() then
      notify("the running server keeps the version it started with until Neovim restarts", vim.log.levels.WARN)
      break
    end
  end
  return true
end

--- :InterpreterInstall[!]. Installs the server into its own environment, or updates it when the
--- plugin's version moved on; `force` reinstalls. `on_done(ok)` runs at the end.
---@param args {force: boolean|nil, source: string|nil, on_done: fun(ok: boolean)|nil}|nil
function M.install(args)
  args = args or {}
  if M.job then
    notify("an install is already running" .. (#M.job.lines > 0 and (": " .. M.job.lines[#M.job.lines]) or ""),
      vim.log.levels.WARN)
    return
  end
  local state = { lines = {}, started = vim.uv.hrtime() }
  M.job = state
  progress.started = state.started
  vim.api.nvim_buf_set_lines(progress.buffer(), 0, -1, false, {})
  if not M.leave_hook then
    M.leave_hook = vim.api.nvim_create_autocmd("VimLeavePre", { callback = M.cancel })
  end
  local co
  local function finish(ok)
    M.job = nil
    if state.log then
      state.log:close()
    end
    if ok then
      -- Buffers opened while the server was missing get it now (init.lua listens).
      vim.api.nvim_exec_autocmds("User", { pattern = "InterpreterInstalled", modeline = false })
    end
    if args.on_done then
      args.on_done(ok)
    end
  end
  function state.resume(...)
    local ok, result = coroutine.resume(co, ...)
    if not ok then
      notify("the install failed: " .. tostring(result), vim.log.levels.ERROR)
      finish(false)
    elseif coroutine.status(co) == "dead" then
      finish(result == true)
    end
  end
  co = coroutine.create(function()
    return install_steps(state, args.force, args.source)
  end)
  state.resume()
end

--- Stop a running install (Neovim is quitting): pip would otherwise outlive the editor.
function M.cancel()
  local job = M.job
  if job and job.proc then
    job.proc:kill(15)
  end
end

--- The :checkhealth lines about where the server comes from.
---@param health table vim.health
---@param opts table resolved options
---@return string[]|nil the server command, when there is one
function M.check(health, opts)
  local cmd, source = M.find_server(opts, true)
  if M.job then
    health.info("an install is running (:InterpreterInstall)"
      .. (#M.job.lines > 0 and (": " .. M.job.lines[#M.job.lines]) or ""))
  elseif vim.fn.isdirectory(M.venv()) == 1 and not M.installed() then
    health.warn(M.venv() .. " is an install that did not complete: it is not used",
      { ":InterpreterInstall starts it again (" .. M.log_path() .. " says what went wrong)" })
  end
  if not cmd then
    health.error(source, {
      ":InterpreterInstall installs it into " .. M.venv() .. " (its own environment; needs Python 3.10+)",
      "or setup({ cmd = { '/path/to/interpreter-lsp' } }), or put interpreter-lsp on PATH",
    })
    return nil
  end
  local from = ({
    setting = "server from the setup option cmd",
    PATH = "server found on PATH",
    managed = "server from the managed install (:InterpreterInstall)",
  })[source]
  health.ok(string.format("%s: %s", from, cmd[1]))
  local info = M.installed()
  if source == "managed" then
    local notice = M.update_notice()
    if notice then
      health.warn(notice, { ":InterpreterInstall" })
    end
  elseif info then
    health.info(string.format("a managed install (%s, %s) is there too; %s comes first", tostring(info.version),
      M.venv(), source == "PATH" and "PATH" or "the setting"))
  end
  return cmd
end

return M
