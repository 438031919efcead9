-- interpreter_lsp: a Neovim client for interpreter-lsp. A model proposes code, you approve it, it runs
-- in the workspace's Jupyter kernel, and the conversation and output stream into a panel.
-- This module is the plugin's Lua API (:help interpreter_lsp-api): setup() and its autocommands, the
-- session of the current buffer, the panel commands and the statusline; the other commands live in
-- source.lua, proposals.lua and workspace.lua and are re-exported here. User commands: commands.lua.
local config = require("interpreter_lsp.config")
local client = require("interpreter_lsp.client")
local keymaps = require("interpreter_lsp.keymaps")
local session_mod = require("interpreter_lsp.session")
local panel_mod = require("interpreter_lsp.panel")
local proposals = require("interpreter_lsp.proposals")
local source = require("interpreter_lsp.source")
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
  keymaps.set_global(opts.keymaps)
  session_mod.on_new = keymaps.set_panel
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

--- current(), with the panel's keys mapped.
local function with_session()
  local c, s = current()
  if s then
    keymaps.set_panel(s)
  end
  return c, s
end

-- Panel commands --------------------------------------------------------------------------------

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
  local row = keymaps.panel_row(s)
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

--- Remove the output shown under the code of the current buffer (inline.lua), images included: all of
--- it, or with a range (1-based lines) the blocks under those lines. The panel keeps every output.
---@param args {line1: integer|nil, line2: integer|nil}|nil
function M.clear_output(args)
  args = args or {}
  local buf = vim.api.nvim_get_current_buf()
  local inline = require("interpreter_lsp.inline")
  if args.line1 and args.line2 then
    inline.clear(buf, args.line1 - 1, args.line2 - 1)
  else
    inline.clear(buf)
  end
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

-- Commands from source buffers (source.lua), on proposals (proposals.lua) and about the workspace
-- (workspace.lua): part of this module's API.
M.chat = source.chat
M.run = source.run
M.run_code = source.run_code
M.approve = proposals.approve
M.reject = proposals.reject
M.reject_with_reason = proposals.reject_with_reason
M.edit = proposals.edit
M.apply = proposals.apply
M.compact = workspace.compact
M.export = workspace.export
M.export_verified = workspace.export_verified
M.interrupt = workspace.interrupt
M.languages = workspace.languages
M.refresh_status = workspace.refresh_status
M.redo = workspace.redo
M.reset = workspace.reset
M.restart = workspace.restart
M.status = workspace.status
M.status_text = workspace.status_text
M.trust = workspace.trust
M.undo = workspace.undo
M.untrust = workspace.untrust
M.update_settings = workspace.update_settings
M.variables = workspace.variables

-- For workspace.lua, source.lua and proposals.lua.
M._with_session = with_session
M._ensure_setup = ensure_setup
M._set_panel_keys = keymaps.set_panel

--- The session of the current buffer's workspace (for tests and integrations).
---@return interpreter_lsp.Session|nil
function M.session()
  local _, s = current()
  return s
end

return M
