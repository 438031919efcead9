-- Deciding a proposal from the editor: approve it, reject it (with a reason the model is asked again),
-- edit it in a scratch buffer (:w approves the edit), or write it into a buffer (apply). Each acts on
-- the proposal under the cursor in the panel, else the newest pending one. Part of
-- require("interpreter_lsp")'s API.
local client = require("interpreter_lsp.client")
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

--- Say why a key did nothing, where the user looks: a small float at the cursor (gone at the next move),
--- and one line in the message area (never a hit-enter prompt).
local function refuse(msg)
  local words = require("interpreter_lsp.words")
  words.say(msg, vim.log.levels.WARN)
  pcall(vim.lsp.util.open_floating_preview, { msg }, "markdown", {
    border = "rounded", focus = false, focusable = false, max_width = math.max(30, math.floor(vim.o.columns * 0.6)),
    close_events = { "CursorMoved", "BufLeave", "InsertEnter", "WinScrolled" },
  })
end

--- The proposal a key acts on: the pending one under the cursor, else the newest pending one. A decided
--- proposal under the cursor is never acted on again; when none waits, the refusal says what became of it.
local function pending_proposal(s, verb)
  local under = s:pick_proposal(keymaps.panel_row(s))
  if under and under.state == "pending" then
    return under
  end
  local newest = s:pick_proposal(nil)
  if newest and newest.state == "pending" then
    return newest
  end
  if under then
    refuse(string.format("Nothing to %s: proposal %d is %s, and no proposal waits.", verb, under.index, under.state))
  else
    refuse("Nothing to " .. verb .. ": no proposal waits.")
  end
  return nil
end

---@param s interpreter_lsp.Session
---@param prop interpreter_lsp.Proposal
---@param code string|nil edited code
local function approve(c, s, prop, code)
  -- An agent's proposal (over MCP) runs as that agent's, as the server records it.
  local run = s:user_run({ language = prop.language, proposal = prop, code = code,
    origin = prop.agent and "agent" or "model", agent = prop.agent })
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
        -- Back where the edit key was pressed (the panel), not wherever Neovim lands after the close.
        if vim.api.nvim_win_is_valid(origin) then
          vim.api.nvim_set_current_win(origin)
        end
      end)
    end,
  })
  vim.cmd("botright split")
  vim.api.nvim_win_set_buf(0, buf)
  -- Characters that do not show or that reorder their line are drawn as `<U+202E>` markers over the
  -- text, which stays the code as proposed: :w approves what the buffer holds (hidden.lua).
  require("interpreter_lsp.hidden").watch(buf)
  vim.wo.conceallevel = 2
  vim.wo.concealcursor = "nvic"
  notify("edit proposal " .. prop.index .. ", then :w to approve it (:q! to leave it pending)")
end

local function is_source(buf)
  return vim.bo[buf].buftype == "" and vim.api.nvim_buf_get_name(buf) ~= "" and not session_mod.by_panel(buf)
end

--- Where `M.apply` writes, as a target (apply.lua): a given range of whole lines; else the lines the chat
--- was about (tracked since the request); else below the cursor line of the source window (on a blank
--- line, in its place). nil when there is no buffer to write into.
---@return interpreter_lsp.Target|nil
local function apply_target(s, prop, args)
  local buf = vim.api.nvim_get_current_buf()
  if is_source(buf) and args.line1 and args.line2 then
    return { buf = buf, first = args.line1 - 1, last = args.line2 }
  end
  local turn = s.turns[prop.turn_id]
  if turn and turn.target and vim.api.nvim_buf_is_valid(turn.target.buf) then
    return turn.target
  end
  if turn and turn.context then
    -- A range chat whose buffer was closed since: the server's copy of the range.
    local tbuf = vim.uri_to_bufnr(turn.context.uri)
    vim.fn.bufload(tbuf)
    local r = turn.context.range
    return { buf = tbuf, first = r.start.line, last = r["end"].line + (r["end"].character > 0 and 1 or 0) }
  end
  local target = is_source(buf) and buf or s.source_buf
  if not (target and vim.api.nvim_buf_is_valid(target)) then
    return nil
  end
  local win = target == buf and vim.api.nvim_get_current_win() or vim.fn.win_findbuf(target)[1]
  local row = win and vim.api.nvim_win_get_cursor(win)[1] or vim.api.nvim_buf_line_count(target)
  local text = vim.api.nvim_buf_get_lines(target, row - 1, row, false)[1] or ""
  -- Below the cursor line, like `p`; on a blank line, in its place (before it).
  local at = vim.trim(text) == "" and row - 1 or row
  return { buf = target, first = at, last = at }
end

--- Write the proposal into a buffer, after a diff the user accepts (apply.lua): over a given range of
--- lines (:'<,'>InterpreterApply); else over the lines the chat was about, wherever they moved; else
--- below the cursor line of the source window. The proposal does not run, and its turn ends.
---@param args {line1: integer|nil, line2: integer|nil}|nil
function M.apply(args)
  args = args or {}
  local c, s = with_session()
  local prop = s and pending_proposal(s, "apply")
  if not c or not s or not prop then
    return
  end
  local target = apply_target(s, prop, args)
  if not target then
    refuse("Nothing to write into: open the file the code is for, put the cursor where it goes, and press i again.")
    return
  end
  local apply = require("interpreter_lsp.apply")
  local preview = client.opts and client.opts.apply_preview
  if preview == nil then
    preview = "split"
  end
  local function write(first, last)
    if prop.state ~= "pending" then
      refuse(string.format("Not written: proposal %d is %s now.", prop.index, prop.state))
      return
    end
    local params = {
      proposalId = prop.id,
      uri = vim.uri_from_bufnr(target.buf),
      range = { start = { line = first, character = 0 }, ["end"] = { line = last, character = 0 } },
    }
    s.panel:follow()
    client.execute(c, protocol.APPLY_PROPOSAL, params, function(result)
      if result and result.applied then
        if prop.state == "pending" then
          local where = vim.fn.fnamemodify(vim.uri_to_fname(params.uri), ":.")
          s:set_proposal_state(prop.id, "applied", "to " .. where)
        end
      else
        refuse("The edit was not applied (the document changed, or the editor refused it).")
      end
    end, nil, target.buf)
  end
  if preview == false then
    local first, last = apply.where(target)
    if not first or apply.changed(target) then
      refuse("Not written: the lines this proposal was for changed since you asked. Select where it goes and :'<,'>InterpreterApply.")
      return
    end
    write(first, last)
    return
  end
  s.reviews = s.reviews or {}
  if s.reviews[prop.id] then
    pcall(s.reviews[prop.id].close, false)
  end
  local review = preview == "inline" and apply.review_inline or apply.review
  s.reviews[prop.id] = review(prop, target, write, function()
    s.reviews[prop.id] = nil
  end)
end

return M
