-- Deciding a proposal from the editor: approve it, reject it (with a reason the model is asked again),
-- edit it in a scratch buffer (:w approves the edit), or write it into a buffer (apply). Each acts on
-- the proposal under the cursor in the panel, else the newest pending one. Part of
-- require("interpreter_lsp")'s API.
local client = require("interpreter_lsp.client")
local cells = require("interpreter_lsp.cells")
local protocol = require("interpreter_lsp.protocol")
local keymaps = require("interpreter_lsp.keymaps")
local session_mod = require("interpreter_lsp.session")

local M = {}

local function with_session()
  return require("interpreter_lsp")._with_session()
end

local function notify(msg, level)
  vim.notify("interpreter_lsp: " .. msg, level or vim.log.levels.INFO)
end

local function pending_proposal(s, verb)
  local prop = s:pick_proposal(keymaps.panel_row(s))
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

return M
