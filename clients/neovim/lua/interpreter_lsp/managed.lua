-- Where the server comes from (setup option cmd, else PATH, else the managed install) and the managed
-- install's place and state: its folder under stdpath("data"), whether it completed, its version against
-- the plugin's checkout. :InterpreterInstall (install.lua) makes it.
local M = {}

-- Written last: a venv without it is a half-done install and is never used.
M.MARKER = "interpreter-lsp-install.json"
local MARKER = M.MARKER

--- Where the managed install lives.
function M.dir()
  return vim.fn.stdpath("data") .. "/interpreter-lsp"
end

function M.venv()
  return M.dir() .. "/venv"
end

function M.log_path()
  return M.dir() .. "/install.log"
end

--- The managed install's server executable.
function M.exe()
  return M.venv() .. "/bin/interpreter-lsp"
end
local managed_exe = M.exe

local function read_file(path)
  local fd = io.open(path, "r")
  if not fd then
    return nil
  end
  local text = fd:read("*a")
  fd:close()
  return text
end

--- The repository checkout the plugin lives in (clients/neovim of it), or nil when the plugin was
--- installed on its own. The server's sources must be there: pyproject.toml naming the package and
--- server/interpreter_lsp.
---@return {root: string, version: string}|nil
function M.checkout()
  local here = debug.getinfo(1, "S").source:gsub("^@", "")
  -- lua/interpreter_lsp/managed.lua -> the plugin root -> the repository root two levels up.
  return M.checkout_at(vim.fs.normalize(vim.fn.fnamemodify(here, ":p:h:h:h:h:h")))
end

--- The server's sources at `root` (a clone of the repository), or nil.
---@param root string
---@return {root: string, version: string}|nil
function M.checkout_at(root)
  local pyproject = read_file(root .. "/pyproject.toml")
  local init = read_file(root .. "/server/interpreter_lsp/__init__.py")
  if not pyproject or not init or not pyproject:find('name%s*=%s*"interpreter%-lsp"') then
    return nil
  end
  return { root = root, version = init:match('__version__%s*=%s*"([^"]+)"') or "?" }
end

--- What the last complete install wrote: {version, source, python, installed}.
---@return table|nil
function M.installed()
  local text = read_file(M.venv() .. "/" .. MARKER)
  if not text or vim.fn.executable(managed_exe()) ~= 1 then
    return nil
  end
  local ok, info = pcall(vim.json.decode, text)
  return ok and type(info) == "table" and info or nil
end

--- A one-line notice when the managed install is not the version of the plugin's checkout, else nil.
--- (A plugin installed on its own, without the server's sources, cannot know: no notice.)
function M.update_notice()
  local info, checkout = M.installed(), M.checkout()
  if info and checkout and info.version ~= checkout.version then
    return string.format("the installed server is %s, the plugin is %s: run :InterpreterInstall to update it",
      tostring(info.version), checkout.version)
  end
  return nil
end

-- Short: the hint is one line of the message area (words.lua), all of it read.
M.NOT_FOUND = "interpreter-lsp not found: run :InterpreterInstall (or set cmd)"

--- The server: setup option cmd, else `interpreter-lsp` on PATH, else the managed install.
--- Returns the argv (a new table), where it came from ("setting", "PATH", "managed"), or nil and why.
---@param opts {cmd: string[]|nil}
---@param quiet boolean|nil no "update available" notice (for :checkhealth)
---@return string[]|nil, string, string|nil
function M.find_server(opts, quiet)
  if opts.cmd then
    if vim.fn.executable(opts.cmd[1]) ~= 1 then
      return nil, string.format("the server command %q (setup option cmd) is not executable", opts.cmd[1])
    end
    return vim.deepcopy(opts.cmd), "setting"
  end
  local path = vim.fn.exepath("interpreter-lsp")
  if path ~= "" then
    return { path }, "PATH"
  end
  if M.installed() then
    local notice = not quiet and M.update_notice()
    if notice then
      vim.notify_once("interpreter_lsp: " .. notice, vim.log.levels.WARN)
    end
    return { managed_exe() }, "managed"
  end
  if require("interpreter_lsp.install").job then
    return nil, "the server is being installed; it starts when that is done"
  end
  return nil, M.NOT_FOUND
end

--- What `:InterpreterInstall {source}` (or the setup option install_source) names: a folder with the
--- server's sources (a clone), a wheel or sdist file, or a git URL pip can read. Returns
--- {kind, spec, label} or nil and why not.
---@param source string
---@return table|nil, string|nil
function M.parse_source(source)
  source = vim.trim(source)
  if source:match("^git%+") or source:match("^https?://") then
    return { kind = "url", spec = source, label = source }
  end
  local path = vim.fs.normalize(vim.fn.fnamemodify(vim.fn.expand(source), ":p")):gsub("/$", "")
  if vim.fn.isdirectory(path) == 1 then
    local checkout = M.checkout_at(path)
    if checkout then
      return { kind = "checkout", checkout = checkout, label = "the clone " .. path }
    end
    return nil, path .. " has no interpreter-lsp sources (pyproject.toml naming interpreter-lsp and"
      .. " server/interpreter_lsp): give the folder of a clone of the repository"
  end
  if vim.fn.filereadable(path) == 1 and (path:match("%.whl$") or path:match("%.tar%.gz$")) then
    return { kind = "file", spec = path, label = path }
  end
  if vim.fn.filereadable(path) == 1 or vim.fn.isdirectory(path) == 1 then
    return nil, path .. " is not a wheel (.whl) or an sdist (.tar.gz)"
  end
  return nil, source .. " was not found: give a clone's folder, a .whl file, or a git URL (git+https://…)"
end

return M
