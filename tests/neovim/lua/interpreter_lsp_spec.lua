-- The runner of the Lua unit specs (tests/neovim/lua/interpreter_lsp_specs/*.lua), inside a headless
-- Neovim with the plugin set up and no server: test_nvim_specs.py runs each spec as one pytest case.
-- A spec file returns a list of {name, fn}, written as `it("name", function(t) ... end)`; fn fails by
-- raising an error, and `t` holds the helpers below. Notifications are fed by their protocol name
-- through the client's own routing table, so what a spec shows is what a server's notification does.
local M = {}

local counter = 0

--- Every spec of `module` (interpreter_lsp_specs.<module>), by name, in file order.
---@return string[]
function M.names(module)
  local names = {}
  for _, case in ipairs(require("interpreter_lsp_specs." .. module)) do
    names[#names + 1] = case[1]
  end
  return names
end

local function show(v)
  return type(v) == "string" and string.format("%q", v) or vim.inspect(v)
end

--- The helpers a spec gets as `t`; failures show the last session's panel.
local function helpers()
  local t = {}
  local current

  --- A fresh session of its own root, as after the server reported an idle python kernel.
  ---@param overrides table|nil option changes, e.g. { panel = { max_output_lines = 10 } }
  function t.session(overrides)
    counter = counter + 1
    local opts = vim.tbl_deep_extend("force", vim.deepcopy(require("interpreter_lsp.client").opts), overrides or {})
    local s = require("interpreter_lsp.session").get("/spec/" .. counter, opts)
    s.kernels.python = "idle"
    s.starting = false
    current = s
    return s
  end

  --- Feed a notification (a protocol.lua name, e.g. "PROPOSAL") to `s` as the client's handler would.
  function t.feed(s, name, params)
    local method = require("interpreter_lsp.protocol")[name]
    local session_method = assert(require("interpreter_lsp.client").notification_methods[method],
      "no handler for notification " .. tostring(name))
    s[session_method](s, params)
  end

  --- The panel's lines after writing everything pending.
  function t.lines(s)
    s = s or current
    s.panel:flush()
    return vim.api.nvim_buf_get_lines(s.panel.buf, 0, -1, false)
  end

  function t.text(s)
    return table.concat(t.lines(s), "\n")
  end

  local function fail(msg)
    local where = current and ("\n--- panel:\n" .. t.text(current)) or ""
    error(msg .. where, 0)
  end

  function t.eq(actual, expected, what)
    if not vim.deep_equal(actual, expected) then
      fail(string.format("%s: expected %s, got %s", what or "value", show(expected), show(actual)))
    end
  end

  function t.truthy(v, what)
    if not v then
      fail(what or "expected a true value")
    end
  end

  --- The panel shows exactly this line.
  function t.has_line(line, s)
    for _, l in ipairs(t.lines(s)) do
      if l == line then
        return
      end
    end
    fail("the panel has no line " .. show(line))
  end

  --- The panel's text contains `needle` (plain text).
  function t.has(needle, s)
    if not t.text(s):find(needle, 1, true) then
      fail("the panel does not show " .. show(needle))
    end
  end

  function t.lacks(needle, s)
    if t.text(s):find(needle, 1, true) then
      fail("the panel shows " .. show(needle))
    end
  end

  --- The 1-based row of the first panel line containing `needle`, or fails.
  function t.row_of(needle, s)
    for row, l in ipairs(t.lines(s)) do
      if l:find(needle, 1, true) then
        return row
      end
    end
    fail("the panel does not show " .. show(needle))
  end

  --- Highlight groups on the first panel line containing `needle`.
  function t.highlights(needle, s)
    s = s or current
    local row = t.row_of(needle, s) - 1
    local groups = {}
    local ns = require("interpreter_lsp.panel").ns
    for _, m in ipairs(vim.api.nvim_buf_get_extmarks(s.panel.buf, ns, { row, 0 }, { row, -1 }, { details = true })) do
      groups[#groups + 1] = m[4].hl_group
    end
    return groups
  end

  function t.bar(s)
    return table.concat((s or current):status_parts(), " | ")
  end

  return t
end

--- Run the spec `name` of `module`: {ok = true} or {ok = false, error = message}.
function M.run(module, name)
  for _, case in ipairs(require("interpreter_lsp_specs." .. module)) do
    if case[1] == name then
      local ok, err = xpcall(case[2], function(e)
        return type(e) == "string" and e:find("\n--- panel:", 1, true) and e or debug.traceback(tostring(e), 2)
      end, helpers())
      return { ok = ok, error = not ok and tostring(err) or nil }
    end
  end
  return { ok = false, error = "no spec named " .. name .. " in " .. module }
end

return M
