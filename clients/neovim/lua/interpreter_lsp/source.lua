-- What the user sends from a source buffer: a request to the model, about the selected lines when
-- there are some (chat), and code to run (run: the selected characters, the range, the `# %%` cell or
-- the line; run_code: a string). Part of require("interpreter_lsp")'s API.
local client = require("interpreter_lsp.client")
local cells = require("interpreter_lsp.cells")
local protocol = require("interpreter_lsp.protocol")
local session_mod = require("interpreter_lsp.session")

local M = {}

local function with_session()
  return require("interpreter_lsp")._with_session()
end

local function notify(msg, level)
  vim.notify("interpreter_lsp: " .. msg, level or vim.log.levels.INFO)
end

--- Ask the server to run `params` for the panel's `run`: the answer binds the server's run id to it, an
--- error is shown on it.
local function send_run(c, s, run, params, buf)
  client.execute(c, protocol.RUN, params, function(result)
    if result and result.runId then
      s:bind_run(run, result.runId)
    end
  end, function(err)
    run.state = "error"
    run.message = err.message
    s:render_run(run)
  end, buf)
end

local function relative(buf)
  return vim.fn.fnamemodify(vim.api.nvim_buf_get_name(buf), ":.")
end

---@class interpreter_lsp.ChatArgs
---@field text string|nil the request; nil asks for it
---@field line1 integer|nil a 1-based line range the request is about
---@field line2 integer|nil

--- Ask the model. With a range, the selected lines are the context of the request.
---@param args interpreter_lsp.ChatArgs|nil
function M.chat(args)
  args = args or {}
  local buf = vim.api.nvim_get_current_buf()
  local c, s = with_session()
  if not c or not s then
    return
  end
  local function send(text)
    if not text or vim.trim(text) == "" then
      return
    end
    local params, about, context, target = { text = text }, nil, nil, nil
    if args.line1 and args.line2 and not session_mod.by_panel(buf) then
      local span = { first = args.line1 - 1, last = args.line2, kind = "range" }
      context = { uri = vim.uri_from_bufnr(buf), range = cells.lsp_range(buf, span, c.offset_encoding) }
      params.uri, params.range = context.uri, context.range
      about = string.format("%s:%d-%d", relative(buf), args.line1, args.line2)
      -- The lines the request is about, tracked: an apply later writes over them wherever they moved.
      target = require("interpreter_lsp.apply").track(buf, span.first, span.last)
    elseif vim.bo[buf].buftype == "" and vim.api.nvim_buf_get_name(buf) ~= "" then
      params.uri = vim.uri_from_bufnr(buf)
    end
    s:user_chat(text, about)
    client.execute(c, protocol.CHAT, params, function(result)
      if result and result.turnId then
        s:bind_turn(result.turnId, context, target)
      end
    end, function(err)
      s:note("⚠ " .. (err.message or "the request failed"), "InterpreterError")
    end, buf)
  end
  if args.text and args.text ~= "" then
    send(args.text)
  else
    -- A prompt buffer below the panel: several lines, history, the conversation in view.
    s.panel:open()
    local about = args.line1 and string.format("%s:%d-%d", relative(buf), args.line1, args.line2) or nil
    require("interpreter_lsp.prompt").open({ title = about, on_send = send, panel_win = s.panel:window() })
  end
end

--- The character-wise visual selection that gave the range line1..line2, if that is where it came from:
--- {first, last} 0-based rows and byte columns, `last_col` exclusive.
---@return table|nil
local function charwise_selection(buf, line1, line2)
  if vim.fn.visualmode() ~= "v" then
    return nil
  end
  local from, to = vim.fn.getpos("'<"), vim.fn.getpos("'>")
  if from[2] ~= line1 or to[2] ~= line2 or from[2] == 0 then
    return nil
  end
  local last_text = vim.api.nvim_buf_get_lines(buf, to[2] - 1, to[2], false)[1] or ""
  local end_col = math.min(to[3], #last_text) -- 1-based byte of the last character (v$ gives MAXCOL)
  if end_col > 0 then
    end_col = end_col + vim.str_utf_end(last_text, end_col) -- the whole last character
  end
  local first_text = vim.api.nvim_buf_get_lines(buf, from[2] - 1, from[2], false)[1] or ""
  return { first_row = from[2] - 1, first_col = math.min(from[3] - 1, #first_text), last_row = to[2] - 1, last_col = end_col }
end

--- Run a 1-based line range (exactly the selected characters after a character-wise selection); else the
--- `# %%` cell at the cursor; else the cursor line.
---@param args {line1: integer|nil, line2: integer|nil}|nil
function M.run(args)
  args = args or {}
  local buf = vim.api.nvim_get_current_buf()
  if session_mod.by_panel(buf) then
    notify("run code from a source buffer, not from the panel", vim.log.levels.WARN)
    return
  end
  local c, s = with_session()
  if not c or not s then
    return
  end
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  local code, where, range
  local sel = args.line1 and charwise_selection(buf, args.line1, args.line2)
  if sel then
    local lines = vim.api.nvim_buf_get_text(buf, sel.first_row, sel.first_col, sel.last_row, sel.last_col, {})
    code = table.concat(lines, "\n")
    local first_text = vim.api.nvim_buf_get_lines(buf, sel.first_row, sel.first_row + 1, false)[1] or ""
    local last_text = vim.api.nvim_buf_get_lines(buf, sel.last_row, sel.last_row + 1, false)[1] or ""
    local enc = c.offset_encoding
    range = {
      start = { line = sel.first_row, character = cells.character_length(first_text:sub(1, sel.first_col), enc) },
      ["end"] = { line = sel.last_row, character = cells.character_length(last_text:sub(1, sel.last_col), enc) },
    }
    where = string.format("%s:%d:%d", relative(buf), sel.first_row + 1, sel.first_col + 1)
  else
    local span = cells.span(buf, args.line1, args.line2, row)
    code = table.concat(vim.api.nvim_buf_get_lines(buf, span.first, span.last, false), "\n")
    if vim.trim(code) == "" then
      notify("nothing to run: the " .. span.kind .. " is empty", vim.log.levels.WARN)
      return
    end
    where = span.last - span.first == 1 and string.format("%s:%d", relative(buf), span.first + 1)
      or string.format("%s:%d-%d", relative(buf), span.first + 1, span.last)
    range = cells.lsp_range(buf, span, c.offset_encoding)
  end
  if vim.trim(code) == "" then
    notify("nothing to run: the selection is empty", vim.log.levels.WARN)
    return
  end
  local first_row = sel and sel.first_row or range.start.line
  local last_row = sel and sel.last_row or range["end"].line
  local run = s:user_run({ language = vim.bo[buf].filetype ~= "" and vim.bo[buf].filetype or nil, code = code,
    where = where, origin = "user", anchor = require("interpreter_lsp.inline").anchor(buf, first_row, last_row + 1) })
  local params = { uri = vim.uri_from_bufnr(buf), range = range }
  send_run(c, s, run, params, buf)
end

--- Run code given as text (from Lua): require("interpreter_lsp").run_code("1 + 1", "python").
---@param code string
---@param language string|nil
function M.run_code(code, language)
  local c, s = with_session()
  if not c or not s then
    return
  end
  local run = s:user_run({ language = language, code = code, origin = "user" })
  send_run(c, s, run, { code = code, language = language })
end

return M
