-- Specs of a session's state and its panel: the server's notifications (fed by protocol name) and the
-- history replay, asserted on the session's tables and on the lines the panel shows. No server runs.
local specs = {}
local function it(name, fn)
  specs[#specs + 1] = { name, fn }
end

local KEYS = "pending: a approve · c edit · r reject · R reject, say why · i apply"

local function calc_uri()
  return vim.uri_from_fname(vim.fn.getcwd() .. "/calc.py")
end

it("every notification of protocol.lua is routed to a session method, and the client handles it", function(t)
  local protocol = require("interpreter_lsp.protocol")
  local client = require("interpreter_lsp.client")
  local s = t.session()
  local routed = {}
  for name, method in pairs(protocol) do
    if type(method) == "string" and method:find("^interpreter/") and method ~= protocol.INPUT then
      local session_method = client.notification_methods[method]
      t.truthy(session_method and type(s[session_method]) == "function", name .. " has no session method")
      t.truthy(client.handlers[method], name .. " has no handler")
      routed[#routed + 1] = name
    end
  end
  table.sort(routed)
  t.eq(routed, { "KERNEL_STATUS", "MESSAGE", "OUTPUT", "PROPOSAL", "PROPOSAL_STATUS", "RUN_STATUS", "TURN_STATUS" }, "routed")
  t.truthy(client.handlers[protocol.INPUT], "input requests are answered")
end)

-- Conversation -------------------------------------------------------------------------------------

it("streamed text of a turn is one answer, and text after a proposal starts the next one", function(t)
  local s = t.session()
  s:user_chat("what is x?", "calc.py:1-2")
  t.feed(s, "MESSAGE", { turnId = "t1", seq = 0, delta = "x is", done = false })
  t.feed(s, "MESSAGE", { turnId = "t1", seq = 1, delta = " 42.\nLet me check:", done = false })
  t.feed(s, "PROPOSAL", { proposalId = "p1", turnId = "t1", language = "python", code = "print(x)", autoRun = false })
  t.feed(s, "MESSAGE", { turnId = "t1", seq = 2, delta = "Approve it to see.", done = true })
  t.eq(t.lines(s), {
    "## You", "what is x?", "(about calc.py:1-2)", "",
    "## Assistant", "x is 42.", "Let me check:", "",
    "**Proposal 1** · python · risk: low · " .. KEYS, "```python", "print(x)", "```", "",
    "## Assistant", "Approve it to see.", "",
  }, "panel")
  t.eq(t.highlights("(about calc.py:1-2)"), { "InterpreterMuted" }, "the 'about' line")
end)

it("a message piece that arrives twice is shown once (seq), and a new step's seq 0 still starts an answer", function(t)
  local s = t.session()
  t.feed(s, "MESSAGE", { turnId = "t1", seq = 0, delta = "x is", done = false })
  t.feed(s, "MESSAGE", { turnId = "t1", seq = 1, delta = " 42.", done = true })
  t.feed(s, "MESSAGE", { turnId = "t1", seq = 1, delta = " 42.", done = true })
  t.feed(s, "MESSAGE", { turnId = "t1", seq = 0, delta = "Next step.", done = true })
  t.eq(t.lines(s), { "## Assistant", "x is 42.", "", "## Assistant", "Next step.", "" }, "panel")
end)

it("a proposal waits as a card with its risk, its reasons and the keys that decide it", function(t)
  local s = t.session()
  t.feed(s, "PROPOSAL", {
    proposalId = "p1", turnId = "t1", language = "python", autoRun = false,
    code = "import urllib.request\nurllib.request.urlopen('http://x')\n",
    risk = { level = "high", reasons = { "reads the network", "writes files" } },
  })
  local prop = s.proposals.p1
  t.eq({ prop.state, prop.index, prop.turn_id, prop.language }, { "pending", 1, "t1", "python" }, "proposal")
  t.eq(s:pick_proposal(nil), prop, "the keys act on the newest pending proposal")
  t.has_line("**Proposal 1** · python · risk: high · " .. KEYS)
  t.has_line("  ⚠ reads the network")
  t.has_line("  ⚠ writes files")
  t.has_line("urllib.request.urlopen('http://x')")
  t.eq(t.highlights("**Proposal 1**"), { "InterpreterError" }, "a high risk is drawn as an error")
  t.eq(t.highlights("⚠ writes files"), { "InterpreterRisk" }, "a reason")
  -- The cursor on a card picks that card, even when a newer one waits.
  t.feed(s, "PROPOSAL", { proposalId = "p2", turnId = "t1", language = "shell", code = "ls", autoRun = false })
  t.eq(s:pick_proposal(nil).id, "p2", "without a cursor: the newest")
  t.eq(s:pick_proposal(t.row_of("**Proposal 1**") - 1).id, "p1", "the card under the cursor")
end)

it("code the answer already shows is not repeated in the proposal card", function(t)
  local s = t.session()
  t.feed(s, "MESSAGE", { turnId = "t1", seq = 0, delta = "Run this:\n```python\ny = 6 * 7\n```\n", done = true })
  t.feed(s, "PROPOSAL", { proposalId = "p1", turnId = "t1", language = "python", code = "y = 6 * 7\n", autoRun = false })
  local n = 0
  for _, l in ipairs(t.lines(s)) do
    n = n + (l == "y = 6 * 7" and 1 or 0)
  end
  t.eq(n, 1, "lines showing the code")
end)

it("an auto-run proposal says so and is not offered to the keys", function(t)
  local s = t.session()
  t.feed(s, "PROPOSAL", { proposalId = "p1", turnId = "t1", language = "python", code = "1 + 1", autoRun = true,
    risk = { level = "low", reasons = {} } })
  t.eq(s.proposals.p1.state, "auto-run", "state")
  t.eq(s:pick_proposal(nil), nil, "nothing to approve")
  t.has_line("**Proposal 1** · python · risk: low · auto-run")
end)

it("proposalStatus says how each proposal was decided, wherever it was decided", function(t)
  local s = t.session()
  for i = 1, 5 do
    t.feed(s, "PROPOSAL", { proposalId = "p" .. i, turnId = "t1", language = "python", code = "x = " .. i, autoRun = false })
  end
  t.feed(s, "PROPOSAL_STATUS", { proposalId = "p1", turnId = "t1", state = "approved" })
  t.feed(s, "PROPOSAL_STATUS", { proposalId = "p2", turnId = "t1", state = "rejected", reason = "too slow\nto run" })
  t.feed(s, "PROPOSAL_STATUS", { proposalId = "p3", turnId = "t1", state = "applied", uri = calc_uri() })
  t.feed(s, "PROPOSAL_STATUS", { proposalId = "p4", turnId = "t1", state = "expired" })
  t.feed(s, "PROPOSAL_STATUS", { proposalId = "p1", turnId = "t1", state = "expired" })
  t.feed(s, "PROPOSAL_STATUS", { proposalId = "nope", turnId = "t1", state = "approved" })
  local states = {}
  for i = 1, 5 do
    states[i] = s.proposals["p" .. i].state
  end
  t.eq(states, { "approved", "rejected (too slow to run)", "applied to calc.py", "expired", "pending" }, "states")
  t.has_line("**Proposal 1** · python · risk: low · approved")
  t.has_line("**Proposal 2** · python · risk: low · rejected (too slow to run)")
  t.has_line("**Proposal 3** · python · risk: low · applied to calc.py")
  t.has_line("**Proposal 4** · python · risk: low · expired")
  t.has_line("**Proposal 5** · python · risk: low · " .. KEYS)
  t.eq(s:pick_proposal(nil).id, "p5", "the one still pending")
end)

-- Turns --------------------------------------------------------------------------------------------

it("turnStatus drives the bar, and a turn's end expires what still waits in it", function(t)
  local s = t.session()
  s:user_chat("plot it")
  t.feed(s, "TURN_STATUS", { turnId = "t1", state = "thinking" })
  t.eq({ s.turn_state, t.bar(s) }, { "thinking", "python idle | thinking" }, "thinking")
  t.feed(s, "MESSAGE", { turnId = "t1", seq = 0, delta = "Here", done = false })
  t.feed(s, "PROPOSAL", { proposalId = "p1", turnId = "t1", language = "python", code = "plot()", autoRun = false })
  t.feed(s, "PROPOSAL", { proposalId = "p0", turnId = "t0", language = "python", code = "older()", autoRun = false })
  t.feed(s, "TURN_STATUS", { turnId = "t1", state = "awaiting-approval" })
  t.eq(t.bar(s), "python idle | awaiting approval", "awaiting approval")
  t.feed(s, "TURN_STATUS", { turnId = "t1", state = "done", message = "the proposal was left undecided" })
  t.eq(s.turn_state, nil, "an ended turn has no state")
  t.eq(t.bar(s), "python idle", "bar after the end")
  t.eq(s.proposals.p1.state, "expired", "the turn's proposal")
  t.eq(s.proposals.p0.state, "pending", "another turn's proposal")
  t.has_line("the proposal was left undecided")
  t.truthy(s.turns.t1.message.data.closed, "the answer is closed")
end)

it("a failed or stopped turn says so in the panel", function(t)
  local s = t.session()
  t.feed(s, "TURN_STATUS", { turnId = "t1", state = "thinking" })
  t.feed(s, "TURN_STATUS", { turnId = "t1", state = "error", message = "no model is configured" })
  t.feed(s, "TURN_STATUS", { turnId = "t2", state = "cancelled", message = "interrupted" })
  t.feed(s, "TURN_STATUS", { turnId = "t3", state = "error" })
  t.has_line("⚠ no model is configured")
  t.eq(t.highlights("⚠ no model is configured"), { "InterpreterError" }, "an error")
  t.has_line("■ stopped: interrupted")
  t.has_line("⚠ the request failed")
end)

it("turnStatus context is kept and shown; a missing or malformed one keeps the last", function(t)
  local s = t.session()
  local ctx = { tokens = 12345, window = 128000, windowSource = "model", cost = 0.04, costKnown = true, compactions = 1 }
  t.feed(s, "TURN_STATUS", { turnId = "t1", state = "compacting", context = ctx })
  t.eq(s.context, ctx, "context")
  t.eq(t.bar(s), "python idle | condensing the conversation… | 12.3k/128k tok · $0.04", "compacting")
  t.feed(s, "TURN_STATUS", { turnId = "t1", state = "running", context = "nonsense" })
  t.feed(s, "TURN_STATUS", { turnId = "t1", state = "done" })
  t.eq(s.context, ctx, "kept")
  t.eq(t.bar(s), "python idle | 12.3k/128k tok · $0.04", "done")
  t.feed(s, "TURN_STATUS", { turnId = "t2", state = "done", context = { tokens = 2500000, window = 8192, windowSource = "guess",
    cost = 0, costKnown = false } })
  t.eq(t.bar(s), "python idle | 2.5M/8.2k? tok · cost unknown", "a guessed window, an unknown cost")
end)

-- Runs ---------------------------------------------------------------------------------------------

it("a run goes queued, running, ok with its output between fences", function(t)
  local s = t.session()
  local source = { uri = calc_uri(), kind = "selection", startLine = 3, endLine = 3 }
  t.feed(s, "RUN_STATUS", { runId = "r1", state = "queued", language = "python", origin = "user", code = "main()", source = source })
  t.eq(s.runs.r1.state, "queued", "queued")
  t.has_line("… **Run** · python · by you · calc.py:4 · queued")
  t.feed(s, "RUN_STATUS", { runId = "r1", state = "running", language = "python" })
  t.eq(t.bar(s), "python running", "the bar while it runs")
  t.feed(s, "OUTPUT", { runId = "r1", seq = 0, kind = "stdout", text = "hello\nwor" })
  t.feed(s, "OUTPUT", { runId = "r1", seq = 1, kind = "stderr", text = "a warning\n" })
  t.feed(s, "OUTPUT", { runId = "r1", seq = 2, kind = "stdout", text = "ld\r\nprogress 10%\rprogress 100%\n" })
  t.feed(s, "RUN_STATUS", { runId = "r1", state = "ok", language = "python", durationMs = 1500,
    files = { { path = "out/new.csv", change = "created" }, { path = "old.txt", change = "modified" }, { path = 3 } } })
  t.eq({ s.runs.r1.state, s.runs.r1.duration_ms, s.runs.r1.next_seq }, { "ok", 1500, 3 }, "run")
  t.eq(t.lines(s), {
    "✓ **Run** · python · by you · calc.py:4 · ok · 1.5 s",
    "files: + out/new.csv  ~ old.txt",
    "```python", "main()", "```",
    "↳ output", "~~~", "hello", "wora warning", "ld", "progress 100%", "~~~", "",
  }, "panel")
  t.eq(t.bar(s), "python idle", "the bar after it")
  t.eq(t.highlights("✓ **Run**"), { "InterpreterOk" }, "an ok run")
end)

it("stderr, errors and lost output messages are marked", function(t)
  local s = t.session()
  t.feed(s, "RUN_STATUS", { runId = "r1", state = "running", language = "python", code = "f()",
    source = { uri = calc_uri(), kind = "cell", startLine = 0, endLine = 2 } })
  t.feed(s, "OUTPUT", { runId = "r1", seq = 0, kind = "stderr", text = "careful\n" })
  t.feed(s, "OUTPUT", { runId = "r1", seq = 3, kind = "stdout", text = "after a gap\n" })
  t.feed(s, "OUTPUT", { runId = "r1", seq = 4, kind = "error", ename = "NameError", evalue = "name 'f' is not defined" })
  t.feed(s, "RUN_STATUS", { runId = "r1", state = "error", language = "python", durationMs = 12 })
  t.has_line("✗ **Run** · python · cell calc.py:1-3 · error · 12 ms")
  t.has_line("[2 output messages lost]")
  t.has_line("NameError: name 'f' is not defined")
  t.eq(t.highlights("careful"), { "InterpreterStderr" }, "stderr")
  t.eq(t.highlights("[2 output messages lost]"), { "InterpreterMuted" }, "the gap")
  t.eq(t.highlights("NameError"), { "InterpreterError" }, "the error")
  t.eq(t.highlights("✗ **Run**"), { "InterpreterError" }, "a failed run")
end)

it("a run of a proposal names it and marks the proposal approved", function(t)
  local s = t.session()
  t.feed(s, "PROPOSAL", { proposalId = "p1", turnId = "t1", language = "python", code = "x = 1", autoRun = false })
  t.feed(s, "RUN_STATUS", { runId = "r7", proposalId = "p1", state = "running", language = "python", origin = "model" })
  t.eq(s.runs.r7.proposal, s.proposals.p1, "the run's proposal")
  t.eq(s.proposals.p1.state, "approved", "approved by running it")
  t.has_line("**Proposal 1** · python · risk: low · approved")
  t.has_line("▶ **Run** · python · by the model · proposal 1 · running")
  t.feed(s, "RUN_STATUS", { runId = "r7", state = "interrupted", language = "python" })
  t.has_line("■ **Run** · python · by the model · proposal 1 · interrupted")
end)

it("a run started here keeps one section whether its id or its notifications come first", function(t)
  local s = t.session()
  local early = s:user_run({ language = "python", code = "a = 1", where = "demo.py:2" })
  t.eq(#s.unbound_runs, 1, "waiting for its id")
  t.feed(s, "RUN_STATUS", { runId = "r1", state = "running", language = "python" })
  s:bind_run(early, "r1")
  local late = s:user_run({ language = "python", code = "b = 2", where = "demo.py:3" })
  s:bind_run(late, "r2")
  t.feed(s, "RUN_STATUS", { runId = "r2", state = "ok", language = "python" })
  t.eq({ s.runs.r1, s.runs.r2, #s.unbound_runs }, { early, late, 0 }, "runs")
  local n = 0
  for _, l in ipairs(t.lines(s)) do
    n = n + (l:find("**Run**", 1, true) and 1 or 0)
  end
  t.eq(n, 2, "run sections")
  t.has_line("▶ **Run** · python · demo.py:2 · running")
  t.has_line("✓ **Run** · python · demo.py:3 · ok")
end)

it("an approved proposal's run takes the section shown at approval, not another waiting run", function(t)
  local s = t.session()
  t.feed(s, "PROPOSAL", { proposalId = "p1", turnId = "t1", language = "python", code = "x = 1", autoRun = false })
  local mine = s:user_run({ language = "python", code = "y = 2", where = "demo.py:5" })
  local approved = s:user_run({ language = "python", proposal = s.proposals.p1 })
  s:set_proposal_state("p1", "approved")
  t.feed(s, "RUN_STATUS", { runId = "r2", proposalId = "p1", state = "running", language = "python" })
  t.feed(s, "RUN_STATUS", { runId = "r1", state = "running", language = "python" })
  t.eq({ s.runs.r2 == approved, s.runs.r1 == mine, #s.unbound_runs }, { true, true, 0 }, "matched runs")
  t.has_line("▶ **Run** · python · by the model · proposal 1 · running")
  t.has_line("▶ **Run** · python · demo.py:5 · running")
end)

it("long output is folded to its head and tail, and all of it stays one key away", function(t)
  local s = t.session({ panel = { max_output_lines = 10, tail_lines = 3 } })
  t.feed(s, "RUN_STATUS", { runId = "r1", state = "running", language = "python", code = "loop()" })
  local text = {}
  for i = 1, 30 do
    text[i] = "line " .. i
  end
  t.feed(s, "OUTPUT", { runId = "r1", seq = 0, kind = "stdout", text = table.concat(text, "\n", 1, 12) .. "\n" })
  t.lines(s)
  t.feed(s, "OUTPUT", { runId = "r1", seq = 1, kind = "stdout", text = table.concat(text, "\n", 13, 30) .. "\n" })
  local lines = t.lines(s)
  local from = t.row_of("line 1")
  t.eq(vim.list_slice(lines, from, from + 10), {
    "line 1", "line 2", "line 3", "line 4", "line 5", "line 6",
    "⋯ 21 more lines folded (o here or :InterpreterOutput shows all 30) ⋯",
    "line 28", "line 29", "line 30", "~~~",
  }, "folded output")
  t.eq(#s.panel:body_lines(s.runs.r1.section), 30, "all lines kept")
end)

it("a kernel's death and its restart are notes, and the bar follows the kernel", function(t)
  local s = t.session()
  t.feed(s, "KERNEL_STATUS", { language = "python", state = "dead", message = "out of memory" })
  t.eq(s.kernels.python, "dead", "state")
  t.eq(t.bar(s), "python dead", "bar")
  t.has_line("✗ the python kernel died: out of memory (:InterpreterRestart starts it again)")
  s.restarting.python = true
  t.feed(s, "KERNEL_STATUS", { language = "python", state = "restarting" })
  t.eq(t.bar(s), "python restarting…", "bar while restarting")
  t.feed(s, "KERNEL_STATUS", { language = "python", state = "idle" })
  t.feed(s, "KERNEL_STATUS", { language = "shell", state = "starting" })
  t.has_line("↻ Kernel restarted (python)")
  t.eq(s.restarting.python, nil, "the restart ended")
  t.eq(t.bar(s), "python idle | shell starting…", "two kernels")
end)

-- Images and other output -----------------------------------------------------------------------

-- A 1x1 PNG.
local PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="

it("an image is saved to a file and its path shown; other bundles show their best text", function(t)
  local s = t.session()
  t.feed(s, "RUN_STATUS", { runId = "run/1", state = "running", language = "python", code = "show()" })
  t.feed(s, "OUTPUT", { runId = "run/1", seq = 0, kind = "display",
    data = { ["image/png"] = PNG, ["text/plain"] = "<Figure size 640x480 with 1 Axes>" } })
  t.feed(s, "OUTPUT", { runId = "run/1", seq = 1, kind = "result",
    data = { ["text/markdown"] = "**bold**", ["text/plain"] = "plain" } })
  t.feed(s, "OUTPUT", { runId = "run/1", seq = 2, kind = "display", data = { ["application/x-thing"] = "{}" } })
  t.feed(s, "OUTPUT", { runId = "run/1", seq = 3, kind = "display",
    data = { ["image/png"] = "%%% not base64 %%%", ["text/plain"] = "a broken image" } })
  local path = s.opts.image_dir .. "/run_1-1.png"
  t.has_line("[image] " .. path)
  t.eq(t.highlights("[image]"), { "InterpreterMuted" }, "the image line")
  t.has_line("**bold**")
  t.lacks("plain\n")
  t.has_line("[application/x-thing output: no text form to show]")
  t.has_line("a broken image")
  local fd = assert(io.open(path, "rb"))
  local bytes = fd:read("*a")
  fd:close()
  t.eq(bytes:sub(2, 4), "PNG", "the saved file is the decoded image")
end)

-- History ------------------------------------------------------------------------------------------

it("the history is replayed above the live panel, as live notifications draw it", function(t)
  local s = t.session()
  s:user_chat("live question")
  require("interpreter_lsp.history").render(s, {
    { type = "user", turnId = "t0", text = "earlier question" },
    { type = "assistant", turnId = "t0", text = "earlier answer" },
    { type = "proposal", turnId = "t0", proposalId = "p1", language = "python", code = "x = 42",
      risk = { level = "medium", reasons = { "writes x" } } },
    { type = "decision", turnId = "t0", proposalId = "p1", decision = "approved", edited = true },
    { type = "run", runId = "r1", proposalId = "p1", language = "python", code = "x = 42\nprint(x)", state = "ok",
      durationMs = 5, outputs = { { output_type = "stream", name = "stdout", text = { "4", "2\n" } } } },
    { type = "proposal", turnId = "t0", proposalId = "p2", language = "python", code = "del x" },
    { type = "run", runId = "r2", origin = "user", language = "python", code = "1/0", state = "error",
      outputs = { { output_type = "error", ename = "ZeroDivisionError", evalue = "division by zero",
        traceback = { "\27[31mZeroDivisionError\27[0m: division by zero" } } } },
    { type = "turnEnd", turnId = "t0", state = "cancelled", message = "by you" },
    { type = "kernel", language = "python", state = "died", message = "killed" },
    { type = "kernel", language = "shell", state = "restarted" },
    { type = "error", message = "rate limited" },
    { type = "note", text = "a notice" },
    { type = "unknown-kind", text = "ignored" },
  })
  t.eq({ s.proposals.p1.state, s.proposals.p2.state }, { "edited, approved", "expired" }, "proposal states")
  t.eq(s.runs.r1.state, "ok", "a replayed run")
  t.eq(t.lines(s), {
    "── earlier in this workspace ──", "",
    "## You", "earlier question", "",
    "## Assistant", "earlier answer", "",
    "**Proposal 1** · python · risk: medium · edited, approved", "  ⚠ writes x", "```python", "x = 42", "```", "",
    "✓ **Run** · python · by the model · proposal 1 · ok · 5 ms", "```python", "x = 42", "print(x)", "```", "↳ output", "~~~", "42", "~~~", "",
    "**Proposal 2** · python · risk: low · expired", "```python", "del x", "```", "",
    "✗ **Run** · python · by you · error", "```python", "1/0", "```", "↳ output", "~~~", "ZeroDivisionError: division by zero", "~~~", "",
    "■ stopped: by you", "",
    "✗ the python kernel died: killed", "",
    "↻ Kernel restarted (shell)", "",
    "⚠ rate limited", "",
    "a notice", "",
    "── now ──", "",
    "## You", "live question", "",
  }, "panel")
  t.eq(s.replaying, false, "replay ended")
end)

it("compaction: a history event is one line, and the compacting turn shows in the bar", function(t)
  local s = t.session()
  require("interpreter_lsp.history").render(s, {
    { type = "user", turnId = "t0", text = "first" },
    { type = "compaction", summary = "The user asked.", upTo = "t0", summaryTokens = 321 },
    { type = "compaction", summary = "Again." },
  })
  t.has_line("⋯ Earlier turns condensed (321 tokens)")
  t.has_line("⋯ Earlier turns condensed")
  t.lacks("The user asked.")
  t.eq(s.panel:window(), nil, "replaying the history opens no panel")
  t.feed(s, "TURN_STATUS", { turnId = "t1", state = "compacting" })
  t.eq(t.bar(s), "python idle | condensing the conversation…", "compacting")
  t.feed(s, "TURN_STATUS", { turnId = "t1", state = "done" })
  t.eq(t.bar(s), "python idle", "done")
end)

it("an empty or malformed history changes nothing", function(t)
  local s = t.session()
  s:user_chat("live")
  local history = require("interpreter_lsp.history")
  history.render(s, {})
  history.render(s, "nonsense")
  t.eq(t.lines(s), { "## You", "live", "" }, "panel")
end)

it("the cost is one word: priced, or unknown, never 0 and unknown at once", function(t)
  local s = t.session()
  local status = require("interpreter_lsp").status_text
  local unknown = table.concat(status(s, { model = "openai/x", kernels = {}, usage = { cost = 0 },
    context = { tokens = 10, cost = 0, costKnown = false } }), "\n")
  t.truthy(unknown:find("cost unknown", 1, true), unknown)
  t.truthy(not unknown:find("cost 0", 1, true), unknown)
  local priced = table.concat(status(s, { model = "openai/x", kernels = {}, usage = { cost = 0.041 },
    context = { tokens = 10, cost = 0.041, costKnown = true } }), "\n")
  t.truthy(priced:find("cost $0.04", 1, true), priced)
end)

it("automatic compaction leaves a note live, as a reopened panel shows it", function(t)
  local s = t.session()
  t.feed(s, "TURN_STATUS", { turnId = "t1", state = "compacting" })
  t.lacks("condensed")
  t.feed(s, "TURN_STATUS", { turnId = "t1", state = "thinking", context = { tokens = 2000, window = 8000, compactions = 1 } })
  t.has_line("⋯ Earlier turns condensed (the model's view is now 2k/8k tok)")
end)

it("runs say who started them, live and replayed: you, the model, an agent", function(t)
  local s = t.session()
  t.feed(s, "RUN_STATUS", { runId = "r1", state = "queued", language = "python", origin = "user", code = "1" })
  t.feed(s, "RUN_STATUS", { runId = "r2", state = "queued", language = "python", origin = "model", code = "2" })
  t.feed(s, "RUN_STATUS", { runId = "r3", state = "queued", language = "python", origin = "agent", agent = "claude-code", code = "3" })
  t.has_line("… **Run** · python · by you · queued")
  t.has_line("… **Run** · python · by the model · queued")
  t.has_line("… **Run** · python · by an agent (claude-code) · queued")
  local r = t.session()
  require("interpreter_lsp.history").render(r, {
    { type = "run", runId = "h1", origin = "model", language = "python", code = "x", state = "ok", outputs = {} },
    { type = "run", runId = "h2", origin = "user", language = "python", code = "y", state = "ok", outputs = {} },
  })
  t.has("✓ **Run** · python · by the model · ok", r)
  t.has("✓ **Run** · python · by you · ok", r)
end)

it("a reopened long output says it was cut on screen and where the whole of it is", function(t)
  local s = t.session({ panel = { max_output_lines = 10, tail_lines = 3 } })
  local lines = {}
  for i = 1, 50 do
    lines[i] = "line " .. i .. "\n"
  end
  require("interpreter_lsp.history").render(s, {
    { type = "run", runId = "h1", origin = "user", language = "python", code = "for ...", state = "ok",
      outputs = { { output_type = "stream", name = "stdout", text = table.concat(lines) } } },
  })
  t.has("⋯ 41 more lines folded (o here or :InterpreterOutput shows all 50) ⋯")
  t.has_line("line 50")
end)

it("long output under the code shows its last lines and says how many more the panel has", function(t)
  local s = t.session()
  local buf = vim.api.nvim_create_buf(true, false)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, { "for i in range(100):", "    print(i)" })
  local run = s:user_run({ language = "python", code = "...", origin = "user",
    anchor = require("interpreter_lsp.inline").anchor(buf, 0, 2) })
  s:bind_run(run, "r1")
  local text = {}
  for i = 0, 99 do
    text[#text + 1] = tostring(i)
  end
  t.feed(s, "OUTPUT", { runId = "r1", seq = 0, kind = "stdout", text = table.concat(text, "\n") .. "\n" })
  t.feed(s, "RUN_STATUS", { runId = "r1", state = "ok", language = "python", durationMs = 1234 })
  local virt
  vim.wait(2000, function()
    virt = require("interpreter_lsp_test").inline_lines(buf)
    return #virt >= 10
  end, 10)
  t.eq(#virt, 10, "a head line, the count, 8 lines: " .. vim.inspect(virt))
  t.truthy(virt[1].text:find("^  ✓ ok · 1%.2 s · %d%d:%d%d:%d%d$"), virt[1].text)
  t.eq(virt[2].text, "  ⋯ 92 earlier lines in the panel (:InterpreterOutput shows all)", "the count")
  t.eq(virt[10].text, "  │ 99", "the last line")
  t.eq(virt[1].row, 1, "under the code's last line")
end)

return specs
