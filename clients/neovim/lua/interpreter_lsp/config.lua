-- Options of require("interpreter_lsp").setup(): defaults, validation, and the JSON the server gets.
local M = {}

---@class interpreter_lsp.PanelOptions
---@field position "right"|"left"|"bottom"|"top"
---@field size number columns/rows, or a fraction of the editor when below 1
---@field open_on_activity boolean open the panel when a chat or run starts
---@field max_output_lines integer run output longer than this is folded to its head and tail
---@field tail_lines integer lines kept visible at the end of a folded output
---@field throttle_ms integer redraws are batched to at most one per this many milliseconds

---@class interpreter_lsp.Options
---@field cmd string[]|string|nil the server command; nil: `interpreter-lsp` on PATH
---@field filetypes string[]|nil start for these filetypes only; nil: every buffer with a file
---@field root_markers string[]
---@field settings table the `interpreter` settings section sent to the server
---@field trusted boolean|nil nil: a folder is trusted once the user ran :InterpreterTrust in it; true: every
--- folder is trusted (the old behaviour, your choice); false: none is
---@field codelens boolean show the server's "Run cell" code lenses
---@field log_file string|nil passed to the server as --log-file
---@field log_level string|nil passed to the server as --log-level
---@field keymaps table<string, string|false>
---@field panel interpreter_lsp.PanelOptions
---@field image_dir string|nil where images from output are saved; nil: stdpath("cache")/interpreter_lsp
---@field images "auto"|"image.nvim"|"kitty"|"path" how images are drawn: image.nvim, the kitty graphics
--- protocol, or their path alone; "auto": image.nvim when installed, else kitty's in kitty or Ghostty
---@field install_source string|nil what :InterpreterInstall installs from: a clone, a .whl, a git URL
---@field apply_preview "split"|"inline"|false a diff to accept before a proposal is written into a buffer
---@field inline_output boolean the latest output of a run started from a buffer shows under its code

---@type interpreter_lsp.Options
M.defaults = {
  cmd = nil,
  filetypes = nil,
  root_markers = { ".git", "pyproject.toml", ".interpreter-lsp.toml" },
  settings = {},
  trusted = nil,
  codelens = true,
  log_file = nil,
  log_level = nil,
  keymaps = {
    -- Keys in the panel buffer. They act on the proposal under the cursor, else the newest pending one.
    -- None of them shadows a motion: they are editing keys, of no use in the read-only panel.
    approve = "a",
    edit = "c",
    reject = "r",
    reject_reason = "R",
    apply = "i",
    expand = "o",
    interrupt = "<C-c>",
    close = "q",
    next_turn = "]]",
    prev_turn = "[[",
    -- Global keys (normal and visual mode); off unless set, so the plugin takes no key by surprise.
    run = false,
    chat = false,
    toggle_panel = false,
  },
  panel = {
    position = "right",
    size = 0.4,
    open_on_activity = true,
    max_output_lines = 400,
    tail_lines = 20,
    throttle_ms = 50,
  },
  image_dir = nil,
  images = "auto",
  apply_preview = "split",
  install_source = nil,
  inline_output = true,
}

-- Settings the server knows (its settings.py, section `interpreter`) and the Lua type each must have.
-- The server checks values and reports bad ones; this only catches a wrong type early.
-- known_settings: generated from the server's settings schema
M.known_settings = {
  model = "string",
  apiBase = "string",
  apiKey = "string",
  temperature = "number",
  maxTokens = "number",
  contextWindow = "number",
  compactAt = "number",
  maxCost = "number",
  maxTokensPerTurn = "number",
  codeFormat = "string",
  autoRun = "boolean",
  autoRunMaxRisk = "string",
  maxSteps = "number",
  maxOutput = "number",
  systemMessage = "string",
  customInstructions = "string",
  sandbox = "string",
  sandboxNetwork = "boolean",
  allowEnv = "table",
  runTimeout = "number",
  undoVariables = "boolean",
  connectTimeout = "number",
  firstTokenTimeout = "number",
  streamStallTimeout = "number",
  maxRetries = "number",
  kernel = "table",
  reviewModel = "string",
  confirmDestructive = "boolean",
}
-- end of known_settings

local function fail(msg)
  error("interpreter_lsp.setup: " .. msg, 0)
end

-- vim.validate changed its signature in 0.11; this plain check reads the same on 0.10 and 0.11.
local function check(name, value, types, optional)
  if value == nil and optional then
    return
  end
  if not vim.tbl_contains(types, type(value)) then
    fail(string.format("%s must be a %s, got %s", name, table.concat(types, " or "), type(value)))
  end
end

local function check_table_keys(name, given, defaults)
  for key in pairs(given) do
    if defaults[key] == nil and key ~= "cmd" and key ~= "filetypes" and key ~= "log_file"
      and key ~= "log_level" and key ~= "image_dir" and key ~= "trusted" and key ~= "install_source" then
      fail(string.format("unknown option %s%s (see :help interpreter_lsp-options)", name, key))
    end
  end
end

---@param user table|nil
---@return interpreter_lsp.Options
function M.resolve(user)
  user = user or {}
  if type(user) ~= "table" then
    fail("setup() takes a table of options, got " .. type(user))
  end
  check_table_keys("", user, M.defaults)
  local opts = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), user)
  -- Lists replace, they do not merge element by element.
  if user.root_markers then
    opts.root_markers = user.root_markers
  end
  if type(user.keymaps) == "table" then
    check_table_keys("keymaps.", user.keymaps, M.defaults.keymaps)
  end
  if type(user.panel) == "table" then
    check_table_keys("panel.", user.panel, M.defaults.panel)
  end

  check("cmd", opts.cmd, { "string", "table" }, true)
  check("filetypes", opts.filetypes, { "table" }, true)
  check("root_markers", opts.root_markers, { "table" })
  check("settings", opts.settings, { "table" })
  check("trusted", opts.trusted, { "boolean" }, true)
  check("codelens", opts.codelens, { "boolean" })
  check("log_file", opts.log_file, { "string" }, true)
  check("log_level", opts.log_level, { "string" }, true)
  check("image_dir", opts.image_dir, { "string" }, true)
  if opts.apply_preview ~= false and opts.apply_preview ~= "split" and opts.apply_preview ~= "inline" then
    fail("apply_preview must be \"split\", \"inline\" or false, got " .. tostring(opts.apply_preview))
  end
  check("inline_output", opts.inline_output, { "boolean" })
  if not vim.tbl_contains(require("interpreter_lsp.images").MODES, opts.images) then
    fail("images must be \"auto\", \"image.nvim\", \"kitty\" or \"path\", got " .. tostring(opts.images))
  end
  check("install_source", opts.install_source, { "string" }, true)
  if not vim.tbl_contains({ "right", "left", "bottom", "top" }, opts.panel.position) then
    fail("panel.position must be one of right, left, bottom, top, got " .. tostring(opts.panel.position))
  end
  check("panel.size", opts.panel.size, { "number" })
  check("panel.open_on_activity", opts.panel.open_on_activity, { "boolean" })
  check("panel.max_output_lines", opts.panel.max_output_lines, { "number" })
  check("panel.tail_lines", opts.panel.tail_lines, { "number" })
  check("panel.throttle_ms", opts.panel.throttle_ms, { "number" })
  for key, value in pairs(opts.keymaps) do
    if value ~= false and type(value) ~= "string" then
      fail(string.format("keymaps.%s must be a key (string) or false, got %s", key, type(value)))
    end
  end
  if type(opts.cmd) == "string" then
    opts.cmd = { opts.cmd }
  end
  if opts.cmd and #opts.cmd == 0 then
    fail("cmd is an empty list: give the server command, e.g. { '/path/to/.venv/bin/interpreter-lsp' }")
  end
  if opts.panel.tail_lines >= opts.panel.max_output_lines then
    fail("panel.tail_lines must be smaller than panel.max_output_lines")
  end
  for key, want in pairs(M.known_settings) do
    local value = opts.settings[key]
    if value ~= nil and type(value) ~= want then
      fail(string.format("settings.%s must be a %s, got %s", key, want, type(value)))
    end
  end
  return opts
end

--- Settings keys the server does not document: likely typos (reported by :checkhealth, not fatal).
---@param settings table
---@return string[]
function M.unknown_settings(settings)
  local unknown = {}
  for key in pairs(settings) do
    if M.known_settings[key] == nil then
      table.insert(unknown, key)
    end
  end
  table.sort(unknown)
  return unknown
end

--- A Lua table as a JSON object: empty tables would otherwise encode as `[]`.
---@param value any
---@return any
function M.json_object(value)
  if type(value) ~= "table" or vim.islist(value) and #value > 0 then
    return value
  end
  if next(value) == nil then
    return vim.empty_dict()
  end
  local out = {}
  for k, v in pairs(value) do
    out[k] = M.json_object(v)
  end
  return out
end

return M
