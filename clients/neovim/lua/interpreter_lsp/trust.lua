-- Which folders the user trusts. A folder is untrusted until the user says otherwise (:InterpreterTrust):
-- opening a repository must not run its code (its .interpreter-lsp.toml may name an interpreter, and its
-- .venv's python is its own code). The list lives in stdpath("state"), outside every repository, so a
-- repository cannot trust itself. Trusting a folder trusts the folders inside it.
local M = {}

---@return string
function M.file()
  return vim.fn.stdpath("state") .. "/interpreter_lsp/trusted.json"
end

---@return string[]
function M.folders()
  local fd = io.open(M.file(), "r")
  if not fd then
    return {}
  end
  local text = fd:read("*a")
  fd:close()
  local ok, data = pcall(vim.json.decode, text)
  if not ok or type(data) ~= "table" or type(data.folders) ~= "table" then
    return {}
  end
  local out = {}
  for _, f in ipairs(data.folders) do
    if type(f) == "string" and f ~= "" then
      table.insert(out, f)
    end
  end
  return out
end

local function normalize(path)
  return vim.fs.normalize(vim.fn.fnamemodify(path, ":p")):gsub("/$", "")
end

local function write(folders)
  vim.fn.mkdir(vim.fn.fnamemodify(M.file(), ":h"), "p")
  local tmp = M.file() .. ".tmp"
  local fd = assert(io.open(tmp, "w"))
  fd:write(vim.json.encode({ folders = folders }))
  fd:close()
  assert(vim.uv.fs_rename(tmp, M.file()))
end

--- Whether `root` is trusted: the setup option `trusted` when it is a boolean (the user's own choice for
--- every folder), else the stored list.
---@param root string
---@param option boolean|nil
---@return boolean
function M.is_trusted(root, option)
  if type(option) == "boolean" then
    return option
  end
  root = normalize(root)
  for _, f in ipairs(M.folders()) do
    f = normalize(f)
    if root == f or vim.startswith(root, f .. "/") then
      return true
    end
  end
  return false
end

---@param root string
function M.trust(root)
  root = normalize(root)
  local folders = M.folders()
  if not vim.tbl_contains(folders, root) then
    table.insert(folders, root)
  end
  write(folders)
end

--- Withdraw trust in `root` (and in any stored folder that holds it, which would still cover it).
---@param root string
function M.untrust(root)
  root = normalize(root)
  local kept = {}
  for _, f in ipairs(M.folders()) do
    local n = normalize(f)
    if not (n == root or vim.startswith(root, n .. "/")) then
      table.insert(kept, f)
    end
  end
  write(kept)
end

return M
