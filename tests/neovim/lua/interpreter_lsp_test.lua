-- Helpers the tests call through RPC. Waits are vim.wait on a condition (Neovim's event loop runs
-- meanwhile), bounded by a timeout; they return what a user would see so a failure message shows it.
local M = {}

local function session()
  for _, s in pairs(require("interpreter_lsp.session").all()) do
    return s
  end
end
M.session = session

--- The panel's lines (after writing anything pending), or {} when there is no panel yet.
function M.panel_lines()
  local s = session()
  if not s then
    return {}
  end
  s.panel:flush()
  return vim.api.nvim_buf_get_lines(s.panel.buf, 0, -1, false)
end

local function panel_text()
  return table.concat(M.panel_lines(), "\n")
end

--- Wait until the panel's text contains `needle` (plain text) `count` times.
function M.wait_panel(needle, timeout_ms, count)
  count = count or 1
  local ok = vim.wait(timeout_ms, function()
    local text = panel_text()
    local n, from = 0, 1
    while true do
      local s, e = text:find(needle, from, true)
      if not s then
        break
      end
      n, from = n + 1, e + 1
    end
    return n >= count
  end, 20)
  return { ok = ok, lines = M.panel_lines() }
end

--- Wait until the LSP client of the current buffer finished initialize.
function M.wait_client(timeout_ms)
  local ok = vim.wait(timeout_ms, function()
    local c = vim.lsp.get_clients({ name = "interpreter_lsp", bufnr = 0 })[1]
    return c ~= nil and c.initialized == true
  end, 20)
  return ok
end

--- Wait until the session knows the kernel of `language` is in `state`.
function M.wait_kernel(language, state, timeout_ms)
  local ok = vim.wait(timeout_ms, function()
    local s = session()
    return s ~= nil and s.kernels[language] == state
  end, 20)
  local s = session()
  return { ok = ok, kernels = s and s.kernels or {} }
end

--- Highlight groups on panel lines containing `needle`.
function M.highlights_of(needle)
  local s = session()
  local lines = M.panel_lines()
  local ns = require("interpreter_lsp.panel").ns
  local groups = {}
  for row, line in ipairs(lines) do
    if line:find(needle, 1, true) then
      local marks = vim.api.nvim_buf_get_extmarks(s.panel.buf, ns, { row - 1, 0 }, { row - 1, -1 }, { details = true })
      for _, m in ipairs(marks) do
        groups[#groups + 1] = m[4].hl_group
      end
    end
  end
  return groups
end

--- Messages shown with vim.notify, captured for the tests.
M.notes = {}
function M.capture_notify()
  vim.notify = function(msg, level)
    table.insert(M.notes, { msg = msg, level = level })
  end
end

--- Measure how long Neovim's main loop stays busy: a 10 ms timer schedules work on the main loop and
--- records the longest gap between two runs. A stalled editor shows as a long gap.
function M.start_lag_probe()
  M.lag = { max_ms = 0, ticks = 0, last = vim.uv.hrtime() }
  M.lag_timer = vim.uv.new_timer()
  M.lag_timer:start(10, 10, function()
    vim.schedule(function()
      local now = vim.uv.hrtime()
      if M.lag then
        M.lag.max_ms = math.max(M.lag.max_ms, (now - M.lag.last) / 1e6)
        M.lag.ticks = M.lag.ticks + 1
        M.lag.last = now
      end
    end)
  end)
end

function M.stop_lag_probe()
  M.lag_timer:stop()
  M.lag_timer:close()
  local lag = M.lag
  M.lag = nil
  return { max_ms = lag.max_ms, ticks = lag.ticks }
end

--- Send interpreter.status through the plugin's client and wait for the answer; returns how long it
--- took and whether the given run was still running when the answer came.
function M.status_round_trip(timeout_ms)
  local c = vim.lsp.get_clients({ name = "interpreter_lsp" })[1]
  local s = session()
  local started = vim.uv.hrtime()
  local answered, result = false, nil
  require("interpreter_lsp.client").execute(c, "interpreter.status", {}, function(r)
    answered, result = true, r
  end)
  vim.wait(timeout_ms, function()
    return answered
  end, 5)
  local running = {}
  for id, run in pairs(s.runs) do
    running[id] = run.state
  end
  return { answered = answered, ms = (vim.uv.hrtime() - started) / 1e6, runs = running, model = result and result.model }
end

--- Ask interpreter.status until `check(result)` holds (a Lua expression of `r`), bounded.
function M.wait_status(expr, timeout_ms)
  local check = assert(loadstring("local r = ... return " .. expr))
  local c = vim.lsp.get_clients({ name = "interpreter_lsp" })[1]
  local last
  local ok = vim.wait(timeout_ms, function()
    local answered = false
    require("interpreter_lsp.client").execute(c, "interpreter.status", {}, function(r)
      answered, last = true, r
    end)
    vim.wait(10000, function() return answered end, 10)
    return last ~= nil and check(last) == true
  end, 200)
  return { ok = ok, status = last }
end

--- Ask interpreter.history until it holds an event of type `kind`, bounded; returns the event types.
function M.wait_history(kind, timeout_ms)
  local c = vim.lsp.get_clients({ name = "interpreter_lsp" })[1]
  local s = session()
  local types = {}
  local ok = vim.wait(timeout_ms, function()
    local answered = false
    require("interpreter_lsp.client").execute(c, "interpreter.history", { uri = vim.uri_from_fname(s.root) }, function(r)
      answered, types = true, {}
      for _, e in ipairs(type(r) == "table" and r.messages or {}) do
        types[#types + 1] = e.type
      end
    end)
    vim.wait(10000, function() return answered end, 10)
    return vim.tbl_contains(types, kind)
  end, 200)
  return { ok = ok, types = types }
end

--- A session of its own for `root`, with no server: the unit-level tests feed it notifications.
function M.fresh_session(root)
  local s = require("interpreter_lsp.session").get(root, require("interpreter_lsp.client").opts)
  s.kernels.python = "idle"
  s.starting = false
  return s
end

--- Redraw the screen as the user sees it a moment later, once highlighting has parsed.
--- Neovim 0.11 parses for highlighting in 3 ms slices between redraws: on a loaded machine a redraw shows
--- markdown before its inline parse (`**` and backticks not concealed yet). Setting
--- `_ts_force_sync_parsing` is not enough on its own: a parse that an earlier redraw started is still
--- pending on the event loop, and while it is, a new parse of the same range returns at once and the
--- highlighter keeps its stale state. So: parse every buffer on screen completely, let the pending parses
--- finish (vim.wait runs the scheduled steps, now synchronous), then redraw.
local function settled_redraw()
  vim.g._ts_force_sync_parsing = true
  local hl = require("vim.treesitter.highlighter")
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    local active = hl.active[vim.api.nvim_win_get_buf(win)]
    if active then
      active.tree:parse(true)
    end
  end
  vim.wait(10000, function()
    for _, win in ipairs(vim.api.nvim_list_wins()) do
      local active = hl.active[vim.api.nvim_win_get_buf(win)]
      -- Neovim 0.11: a table by window (0.10 had one boolean for the buffer).
      local pending = active and (type(active.parsing) == "table" and active.parsing[win] or active.parsing == true)
      if pending then
        return false
      end
    end
    return true
  end, 10)
  vim.cmd("redraw!")
end

--- The screen as the user sees it with `s`'s panel as the only window, `width` columns wide: window bar
--- and text rows, trailing blanks removed, rows after the text left out.
function M.screen_of(root, width, height)
  local s = require("interpreter_lsp.session").get(root, require("interpreter_lsp.client").opts)
  vim.o.columns, vim.o.lines, vim.o.laststatus = width, height, 0
  local win = s.panel:open()
  vim.api.nvim_set_current_win(win)
  vim.cmd("only")
  s.panel:flush()
  vim.api.nvim_win_set_cursor(win, { 1, 0 })
  vim.fn.winrestview({ topline = 1 })
  settled_redraw()
  local rows = {}
  for r = 1, height - 1 do
    local line = {}
    for c = 1, width do
      line[#line + 1] = vim.fn.screenstring(r, c)
    end
    rows[#rows + 1] = (table.concat(line):gsub("%s+$", ""))
  end
  local shown = {}
  for _, row in ipairs(rows) do
    if row == "~" then
      break
    end
    shown[#shown + 1] = row
  end
  while #shown > 0 and shown[#shown] == "" do
    table.remove(shown)
  end
  return shown
end

--- Lines of the floating windows on screen.
function M.float_lines()
  local out = {}
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(win).relative ~= "" then
      vim.list_extend(out, vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false))
    end
  end
  return out
end

--- Wait until a captured notification contains `needle`; returns all of them.
function M.wait_note(needle, timeout_ms)
  local ok = vim.wait(timeout_ms, function()
    for _, n in ipairs(M.notes) do
      if n.msg:find(needle, 1, true) then
        return true
      end
    end
    return false
  end, 20)
  return { ok = ok, notes = M.notes }
end

--- Wait until a float shows `needle`; returns its lines.
function M.wait_float(needle, timeout_ms)
  local ok = vim.wait(timeout_ms, function()
    return table.concat(M.float_lines(), "\n"):find(needle, 1, true) ~= nil
  end, 20)
  return { ok = ok, lines = M.float_lines() }
end

--- The whole screen as the user sees it now (every window, virtual lines, conceal, the message line),
--- trailing blanks removed.
function M.screen()
  settled_redraw()
  local rows = {}
  for r = 1, vim.o.lines do
    local line = {}
    for c = 1, vim.o.columns do
      line[#line + 1] = vim.fn.screenstring(r, c)
    end
    rows[#rows + 1] = (table.concat(line):gsub("%s+$", ""))
  end
  return rows
end

--- The virtual lines under the code of buffer `buf` (inline output), as text.
function M.inline_lines(buf)
  local out = {}
  local ns = require("interpreter_lsp.inline").ns
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
    for _, vl in ipairs(m[4].virt_lines or {}) do
      local parts = {}
      for _, chunk in ipairs(vl) do
        parts[#parts + 1] = chunk[1]
      end
      out[#out + 1] = { row = m[2], text = table.concat(parts) }
    end
  end
  return out
end

--- The lines of the :checkhealth buffer for this plugin.
function M.checkhealth()
  vim.cmd("checkhealth interpreter_lsp")
  return vim.api.nvim_buf_get_lines(0, 0, -1, false)
end

return M
