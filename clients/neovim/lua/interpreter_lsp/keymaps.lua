-- Keymaps: the keys the plugin maps and what each says it does (their defaults and validation are the
-- `keymaps` options of config.lua). Global keys (run, chat, toggle_panel) are off unless set; the panel's
-- keys act on the proposal under the cursor, else the newest pending one. The proposal card's hint line
-- names the panel keys as they are set.
local M = {}

local function api()
  return require("interpreter_lsp")
end

--- Map the global keys that are set (normal and visual mode).
---@param keys table<string, string|false> the `keymaps` option
function M.set_global(keys)
  local map = function(lhs, rhs, desc, modes)
    if lhs then
      vim.keymap.set(modes or { "n", "x" }, lhs, rhs, { desc = desc })
    end
  end
  map(keys.run, ":InterpreterRun<CR>", "Interpreter: run the selection, the cell or the line")
  map(keys.chat, ":Interpreter<CR>", "Interpreter: ask the model")
  map(keys.toggle_panel, "<Cmd>InterpreterPanel<CR>", "Interpreter: toggle the panel", { "n" })
end

--- Map the keys of `s`'s panel buffer (once per panel).
---@param s interpreter_lsp.Session
function M.set_panel(s)
  if s.panel.keys_set then
    return
  end
  s.panel.keys_set = true
  local keys = assert(require("interpreter_lsp.client").opts).keymaps
  local function map(lhs, fn, desc)
    if lhs then
      vim.keymap.set("n", lhs, fn, { buffer = s.panel.buf, desc = desc, nowait = true })
    end
  end
  map(keys.approve, function() api().approve() end, "Interpreter: approve the proposal")
  map(keys.edit, function() api().edit() end, "Interpreter: edit the proposal, :w approves it")
  map(keys.reject, function() api().reject() end, "Interpreter: reject the proposal (the turn ends)")
  map(keys.reject_reason, function() api().reject_with_reason() end,
    "Interpreter: reject the proposal with a reason (the model is asked again)")
  map(keys.apply, function() api().apply() end, "Interpreter: write the proposal into the source buffer")
  map(keys.expand, function() api().show_output() end, "Interpreter: all output of the run under the cursor")
  map(keys.interrupt, function() api().interrupt() end, "Interpreter: interrupt")
  map(keys.close, function() s.panel:close() end, "Interpreter: close the panel")
  map(keys.next_turn, function() M.jump_turn(s, 1) end, "Interpreter: the next request in the conversation")
  map(keys.prev_turn, function() M.jump_turn(s, -1) end, "Interpreter: the request before")
end

-- The keys a pending proposal's card names, in this order, with the word it shows for each.
local PROPOSAL_KEYS = { { "approve", "approve" }, { "edit", "edit" }, { "reject", "reject" },
  { "reject_reason", "reject, say why" }, { "apply", "apply" } }

--- "a approve · c edit · …" for the panel keys that are set.
---@param keys table<string, string|false> the `keymaps` option
---@return string
function M.proposal_hint(keys)
  local acts = {}
  for _, pair in ipairs(PROPOSAL_KEYS) do
    if keys[pair[1]] then
      table.insert(acts, keys[pair[1]] .. " " .. pair[2])
    end
  end
  return table.concat(acts, " · ")
end

--- Move the cursor in the panel to the next (`dir` 1) or previous (-1) request of the user ("## You").
---@param s interpreter_lsp.Session
---@param dir integer
function M.jump_turn(s, dir)
  local win = vim.api.nvim_get_current_win()
  if vim.api.nvim_win_get_buf(win) ~= s.panel.buf then
    return
  end
  s.panel:flush()
  local row = vim.api.nvim_win_get_cursor(win)[1] - 1
  local starts = {}
  for _, sec in ipairs(s.panel.sections) do
    if sec.kind == "user" and sec.shown then
      table.insert(starts, s.panel:line_of(sec))
    end
  end
  local target
  if dir > 0 then
    for _, r in ipairs(starts) do
      if r > row then
        target = r
        break
      end
    end
  else
    for i = #starts, 1, -1 do
      if starts[i] < row then
        target = starts[i]
        break
      end
    end
  end
  if target then
    vim.api.nvim_win_set_cursor(win, { target + 1, 0 })
    vim.cmd("normal! zt")
  end
end

--- The 0-based row of the cursor in `s`'s panel when the panel is the current window, else nil.
---@param s interpreter_lsp.Session
---@return integer|nil
function M.panel_row(s)
  local win = vim.api.nvim_get_current_win()
  if vim.api.nvim_win_get_buf(win) == s.panel.buf then
    return vim.api.nvim_win_get_cursor(win)[1] - 1
  end
  return nil
end

return M
