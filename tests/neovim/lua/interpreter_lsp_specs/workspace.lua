-- Specs of the workspace commands' words: what an undo and a redo say, and how the client shows a redo's
-- answer and its refusals. No server runs: a redo goes to a stand-in client that answers at once.
local specs = {}
local function it(name, fn)
  specs[#specs + 1] = { name, fn }
end

local workspace = require("interpreter_lsp.workspace")

--- A client that answers every workspace/executeCommand with `err` or `result`, and keeps what it was sent.
local function answering(err, result)
  local c = { id = 1000, initialized = true, sent = {} }
  -- Neovim 0.11 calls c:request(...), 0.10 c.request(...): both reach this.
  function c.request(...)
    local args = { ... }
    if args[1] == c then
      table.remove(args, 1)
    end
    table.insert(c.sent, args[2])
    args[3](err, result)
    return true, 1
  end
  return c
end

--- Run require("interpreter_lsp").redo() against `c` for session `s`; the messages it showed (vim.notify).
local function redo_with(c, s)
  local api = require("interpreter_lsp")
  local notes = require("interpreter_lsp_test").notes
  local before = #notes
  local with_session = api._with_session
  api._with_session = function()
    return c, s
  end
  local ok, err = pcall(api.redo)
  api._with_session = with_session
  assert(ok, err)
  -- words.say shows a message a moment later (messages in the same moment share the one line).
  vim.wait(1000, function() return #notes > before end, 10)
  return vim.list_slice(notes, before + 1)
end

it("redo says what came back: the request or the run, the files and variables, and what did not", function(t)
  local text = workspace.redo_text({
    request = "make the data",
    runs = { "r1" },
    notRestorable = { { name = "model", why = "a kernel variable that cannot be copied" } },
    restored = { "data.txt" },
    removed = { "old.txt" },
    variablesRestored = { "x" },
    variablesRemoved = { "tmp" },
  })
  t.eq(text, "↷ Redone: your message and what followed it are back in the conversation; files restored data.txt;"
    .. " removed old.txt; variables restored x; removed tmp. Not restored: model (a kernel variable that cannot"
    .. " be copied).", "a request")
  t.eq(workspace.redo_text({ request = vim.NIL, runs = { "r1" }, notRestorable = {} }),
    "↷ Redone: your run is back in the conversation.", "the user's own run (request null)")
  t.eq(workspace.redo_text({ runs = {}, notRestorable = {}, restored = {}, variablesRemoved = { "a", "b" } }),
    "↷ Redone: your run is back in the conversation; variables removed a, b.", "empty lists say nothing")
end)

it("undo says the same of files and variables, with what left the conversation", function(t)
  t.eq(workspace.undo_text({ request = "make the data", runs = { "r1" }, notRestorable = {},
    restored = { "data.txt" }, variablesRemoved = { "x" } }),
    "↶ Undone: your last message and what followed it are gone from the conversation; files restored data.txt;"
      .. " variables removed x.", "a request")
  t.eq(workspace.undo_text({ request = vim.NIL, runs = { "r1" }, notRestorable = {} }),
    "↶ Undone: your last run is gone from the conversation.", "the user's own run")
end)

it("a redo sends interpreter.redo for the workspace and says what came back, in the panel and one line", function(t)
  local s = t.session()
  local c = answering(nil, { request = vim.NIL, runs = { "r1" }, notRestorable = {}, variablesRestored = { "x" } })
  local said = redo_with(c, s)
  t.eq(c.sent[1].command, "interpreter.redo", "command")
  t.eq(c.sent[1].arguments, { { uri = vim.uri_from_fname(s.root) } }, "arguments")
  t.has_line("↷ Redone: your run is back in the conversation; variables restored x.")
  t.eq(#said, 1, "one message")
  t.truthy(said[1].msg:find("Redone: your run is back", 1, true), said[1].msg)
  t.eq(said[1].level, vim.log.levels.INFO, "level")
end)

it("nothing to redo is a plain note: no warning sign, no error level", function(t)
  local s = t.session()
  local message = "Nothing to redo: no undo to take back."
  local said = redo_with(answering({ code = -32602, message = message }), s)
  t.has_line(message)
  t.lacks("⚠")
  t.eq(t.highlights(message), { "InterpreterMuted" }, "the note's highlight")
  t.eq(#said, 1, "one message")
  t.eq(said[1].msg, "interpreter_lsp: " .. message, "message")
  t.eq(said[1].level, vim.log.levels.INFO, "level")
end)

it("any other refusal of a redo is an error, as every command's", function(t)
  local s = t.session()
  local said = redo_with(answering({ code = -32602, message = "A request is in progress: wait for it." }), s)
  t.has_line("⚠ A request is in progress: wait for it.")
  t.eq(said[1].level, vim.log.levels.ERROR, "level")
end)

return specs
