import assert from "node:assert/strict";
import { test } from "node:test";
import {
  MAX_RUN_TEXT,
  activityLine,
  applyEvent,
  compactionNotice,
  emptyConversation,
  errorText,
  describeRange,
  describeSource,
  notebookOutputItem,
  pendingProposals,
  type AssistantEntry,
  type ProposalEntry,
  type RunEntry,
  type UserEntry,
} from "../../src/conversation";
import type { HistoryEvent, ProposalParams } from "../../src/protocol";

const proposal = (id: string, turnId = "t1", code = "print(1)"): ProposalParams => ({
  proposalId: id,
  turnId,
  language: "python",
  code,
  risk: { level: "low", reasons: [] },
  autoRun: false,
});

test("streamed message deltas build one assistant entry; a repeated seq is dropped", () => {
  const s = emptyConversation();
  applyEvent(s, { type: "message", params: { turnId: "t1", seq: 0, delta: "Hel", done: false } });
  applyEvent(s, { type: "message", params: { turnId: "t1", seq: 1, delta: "lo", done: false } });
  applyEvent(s, { type: "message", params: { turnId: "t1", seq: 1, delta: "lo", done: false } });
  const change = applyEvent(s, { type: "message", params: { turnId: "t1", seq: 2, delta: "!", done: true } });
  assert.equal(s.entries.length, 1);
  const entry = s.entries[0] as AssistantEntry;
  assert.equal(entry.text, "Hello!");
  assert.equal(entry.done, true);
  assert.deepEqual(change, { all: false, ids: [entry.id] });
});

test("text after a finished message of the same turn is the next step, shown after the run", () => {
  const s = emptyConversation();
  applyEvent(s, { type: "message", params: { turnId: "t1", seq: 0, delta: "Step one", done: true } });
  applyEvent(s, { type: "proposal", params: proposal("p1") });
  applyEvent(s, { type: "runStatus", params: { runId: "r1", state: "ok", proposalId: "p1" } });
  applyEvent(s, { type: "message", params: { turnId: "t1", seq: 1, delta: "Step two", done: true } });
  assert.deepEqual(
    s.entries.map((e) => e.kind),
    ["assistant", "proposal", "run", "assistant"],
  );
  assert.equal((s.entries[3] as AssistantEntry).text, "Step two");
});

test("a run of a proposal takes its code and marks the proposal as ran", () => {
  const s = emptyConversation();
  applyEvent(s, { type: "proposal", params: proposal("p1", "t1", "x = 2") });
  assert.equal(pendingProposals(s).length, 1);
  applyEvent(s, { type: "runStatus", params: { runId: "r1", state: "running", proposalId: "p1", turnId: "t1" } });
  assert.equal(pendingProposals(s).length, 0);
  applyEvent(s, { type: "runStatus", params: { runId: "r1", state: "ok", durationMs: 12, proposalId: "p1" } });
  const run = s.entries.find((e) => e.kind === "run") as RunEntry;
  assert.equal(run.code, "x = 2");
  assert.equal(run.state, "ok");
  assert.equal(run.durationMs, 12);
  const p = s.entries.find((e) => e.kind === "proposal");
  assert.equal(p?.kind === "proposal" && p.status, "ran");
});

test("a late 'running' does not undo a final run state", () => {
  const s = emptyConversation();
  applyEvent(s, { type: "runStatus", params: { runId: "r1", state: "ok" } });
  applyEvent(s, { type: "runStatus", params: { runId: "r1", state: "running" } });
  assert.equal((s.entries[0] as RunEntry).state, "ok");
});

test("stdout pieces merge, stderr stays apart, order is kept, gaps are counted", () => {
  const s = emptyConversation();
  const out = (seq: number, kind: "stdout" | "stderr", text: string) =>
    applyEvent(s, { type: "output", params: { runId: "r1", seq, kind, text } });
  out(0, "stdout", "a");
  out(1, "stdout", "b");
  out(2, "stderr", "warn");
  out(2, "stderr", "warn");
  out(5, "stdout", "c");
  const run = s.entries[0] as RunEntry;
  assert.deepEqual(
    run.outputs.map((o) => [o.kind, o.text]),
    [
      ["stdout", "ab"],
      ["stderr", "warn"],
      ["stdout", "c"],
    ],
  );
  assert.equal(run.lostMessages, 2);
});

test("a flood of output is capped and the rest is counted", () => {
  const s = emptyConversation();
  const chunk = "x".repeat(50_000);
  for (let seq = 0; seq < 6; seq++) {
    applyEvent(s, { type: "output", params: { runId: "r1", seq, kind: "stdout", text: chunk } });
  }
  const run = s.entries[0] as RunEntry;
  assert.equal(run.outputs[0].text?.length, MAX_RUN_TEXT);
  assert.equal(run.droppedChars, 6 * 50_000 - MAX_RUN_TEXT);
});

test("turn status drives the activity line; an error turn leaves a notice", () => {
  const s = emptyConversation();
  applyEvent(s, { type: "turnStatus", params: { turnId: "t1", state: "thinking" } });
  assert.equal(activityLine(s), "Thinking…");
  applyEvent(s, { type: "turnStatus", params: { turnId: "t1", state: "awaiting-approval" } });
  assert.equal(activityLine(s), "Waiting for your approval");
  applyEvent(s, { type: "turnStatus", params: { turnId: "t1", state: "error", message: "No model is configured" } });
  assert.equal(activityLine(s), "");
  const notice = s.entries.at(-1);
  assert.equal(notice?.kind === "notice" && notice.text, "No model is configured");
  assert.equal(notice?.kind === "notice" && notice.level, "error");
});

test("history events rebuild the conversation as the live panel showed it; clear empties", () => {
  const s = emptyConversation();
  const risk = { level: "low" as const, reasons: [] };
  const change = applyEvent(s, {
    type: "history",
    messages: [
      {
        type: "user", ts: 1, turnId: "t1", text: "plot it", content: "plot it\n(context)", uri: "file:///ws/My%20data.py",
        range: { start: { line: 2, character: 0 }, end: { line: 5, character: 0 } },
      },
      { type: "assistant", ts: 2, turnId: "t1", text: "Sure:\n```python\nprint(1)\n```" },
      { type: "proposal", ts: 2, proposalId: "p1", turnId: "t1", language: "python", code: "print(1)", risk, autoRun: false, complete: true },
      { type: "usage", ts: 2, turnId: "t1", promptTokens: 10, completionTokens: 5, cost: 0 },
      { type: "decision", ts: 3, proposalId: "p1", turnId: "t1", decision: "approved", code: "print(2)", edited: true },
      {
        type: "run", ts: 4, runId: "r1", origin: "model", turnId: "t1", proposalId: "p1", language: "python", code: "print(2)",
        state: "error", durationMs: 15, outputForModel: "2", files: [],
        outputs: [
          { output_type: "stream", name: "stdout", text: "2\n" },
          { output_type: "stream", name: "stderr", text: ["warn", "ing\n"] },
          { output_type: "display_data", data: { "image/png": "iVBORw0KGgo=" }, metadata: {} },
          { output_type: "error", ename: "ValueError", evalue: "bad", traceback: ["\u001b[31mValueError\u001b[0m", "bad"] },
        ],
      },
      { type: "proposal", ts: 5, proposalId: "p2", turnId: "t1", language: "shell", code: "rm -rf x", risk, autoRun: false, complete: true },
      { type: "decision", ts: 6, proposalId: "p2", turnId: "t1", decision: "rejected", language: "shell" },
      { type: "proposal", ts: 7, proposalId: "p3", turnId: "t1", language: "python", code: "x = 1", risk, autoRun: false, complete: true },
      { type: "decision", ts: 7, proposalId: "p3", turnId: "t1", decision: "applied", uri: "file:///ws/a.py" },
      { type: "applied", ts: 7, proposalId: "p3", uri: "file:///ws/a.py", applied: true },
      { type: "note", ts: 8, turnId: "t1", text: "Stopped after 20 steps (interpreter.maxSteps)." },
      { type: "turnEnd", ts: 8, turnId: "t1", state: "done", message: "Stopped after 20 steps (interpreter.maxSteps)." },
      { type: "kernel", ts: 8, language: "python", state: "restarted", message: "The python kernel restarted: its variables and imports were cleared." },
      { type: "assistant", ts: 9, turnId: "t2", text: "half an ans", partial: true },
      { type: "error", ts: 9, turnId: "t2", message: "The model is not reachable" },
      { type: "turnEnd", ts: 9, turnId: "t2", state: "error", message: "The model is not reachable" },
      { type: "run", ts: 10, runId: "r2", origin: "user", language: "python", code: "6*7", state: "ok", durationMs: 3, outputForModel: "42", files: [], outputs: [
        { output_type: "execute_result", data: { "text/plain": "42" }, metadata: {} },
      ] },
      { type: "something-new", ts: 11 } as unknown as HistoryEvent,
    ],
  });
  assert.deepEqual(change, { all: true });
  assert.deepEqual(
    s.entries.map((e) => e.kind),
    ["user", "assistant", "proposal", "run", "proposal", "proposal", "notice", "notice", "assistant", "notice", "run"],
  );
  const user = s.entries[0] as UserEntry;
  assert.equal(user.text, "plot it");
  assert.equal(user.context, "About My data.py, lines 3–5");
  const p1 = s.entries[2] as ProposalEntry;
  assert.deepEqual([p1.status, p1.edited], ["ran", true]);
  const run = s.entries[3] as RunEntry;
  assert.deepEqual([run.state, run.durationMs, run.code, run.proposalId], ["error", 15, "print(2)", "p1"]);
  assert.deepEqual(run.outputs.map((o) => o.kind), ["stdout", "stderr", "display", "error"]);
  assert.equal(run.outputs[1].text, "warning\n");
  assert.equal(run.outputs[3].ename, "ValueError");
  assert.match(run.outputs[3].text ?? "", /ValueError[\s\S]*bad/);
  assert.equal((s.entries[4] as ProposalEntry).status, "rejected");
  const p3 = s.entries[5] as ProposalEntry;
  assert.deepEqual([p3.status, p3.appliedTo], ["applied", "file:///ws/a.py"], "written into a document, not run");
  assert.equal(pendingProposals(s).length, 0);
  // The note and its turn's end say the same: shown once; the kernel's restart is a notice too.
  assert.deepEqual(
    s.entries.filter((e) => e.kind === "notice").map((e) => e.kind === "notice" && [e.level, e.text]),
    [
      ["info", "Stopped after 20 steps (interpreter.maxSteps)."],
      ["info", "The python kernel restarted: its variables and imports were cleared."],
      ["error", "The model is not reachable"],
    ],
  );
  assert.equal((s.entries[8] as AssistantEntry).partial, true);
  assert.equal((s.entries[10] as RunEntry).outputs[0].data?.["text/plain"], "42");
  applyEvent(s, { type: "clear" });
  assert.equal(s.entries.length, 0);
});

test("a finished turn closes its undecided proposals; a late click does not undo what the server said", () => {
  const s = emptyConversation();
  applyEvent(s, { type: "proposal", params: proposal("p1", "t1") });
  applyEvent(s, { type: "proposal", params: proposal("p2", "t2") });
  applyEvent(s, { type: "turnStatus", params: { turnId: "t1", state: "cancelled", message: "interrupted by the user" } });
  const p1 = s.entries.find((e) => e.id === "proposal:p1") as ProposalEntry;
  assert.equal(p1.status, "expired");
  assert.deepEqual(pendingProposals(s).map((p) => p.proposalId), ["p2"]);
  const notice = s.entries.at(-1);
  assert.equal(notice?.kind === "notice" && notice.text, "interrupted by the user");
  // A reject ends the turn, and the end may arrive before the reject command's answer.
  applyEvent(s, { type: "proposalStatus", proposalId: "p1", status: "rejected" });
  assert.equal(p1.status, "rejected");
  // The run ended before the approve command's answer came back: "running" must not come after "ran".
  applyEvent(s, { type: "runStatus", params: { runId: "r2", state: "ok", proposalId: "p2" } });
  applyEvent(s, { type: "proposalStatus", proposalId: "p2", status: "running", edited: true });
  const p2 = s.entries.find((e) => e.id === "proposal:p2") as ProposalEntry;
  assert.deepEqual([p2.status, p2.edited], ["ran", true]);
});

test("when the server stops, its turns, proposals and unfinished runs are over", () => {
  const s = emptyConversation();
  applyEvent(s, { type: "turnStatus", params: { turnId: "t1", state: "awaiting-approval" } });
  applyEvent(s, { type: "proposal", params: proposal("p1", "t1") });
  applyEvent(s, { type: "runStatus", params: { runId: "r1", state: "running" } });
  applyEvent(s, { type: "serverStopped" });
  assert.equal(activityLine(s), "");
  assert.equal(pendingProposals(s).length, 0);
  const run = s.entries.find((e) => e.kind === "run") as RunEntry;
  assert.equal(run.state, "died");
  assert.match(run.message ?? "", /server stopped/);
});

test("describeRange names the lines the way an editor selection covers them", () => {
  const r = (a: number, ac: number, b: number, bc: number) => ({ start: { line: a, character: ac }, end: { line: b, character: bc } });
  assert.equal(describeRange("a.py", r(0, 0, 0, 5)), "a.py, line 1");
  assert.equal(describeRange("a.py", r(0, 0, 2, 0)), "a.py, lines 1–2");
  assert.equal(describeRange("a.py", r(0, 0, 2, 3)), "a.py, lines 1–3");
});

test("nbformat outputs map onto the panel's output kinds", () => {
  assert.deepEqual(notebookOutputItem({ output_type: "stream", name: "stderr", text: "x" }), { kind: "stderr", text: "x" });
  assert.deepEqual(notebookOutputItem({ output_type: "execute_result", data: { "text/plain": "1" } }), { kind: "result", data: { "text/plain": "1" } });
  assert.deepEqual(notebookOutputItem({ output_type: "error", ename: "E", evalue: "v", traceback: [] }), {
    kind: "error", ename: "E", evalue: "v", text: "E: v",
  });
  // A failed shell command (bash_kernel: no name, no traceback, the exit status as the value), as live.
  assert.deepEqual(notebookOutputItem({ output_type: "error", ename: "", evalue: "2", traceback: [] }), {
    kind: "error", ename: "", evalue: "2", text: "exit status 2",
  });
  assert.equal(errorText("", "Cell has trailing backslash", []), "Cell has trailing backslash");
  assert.equal(errorText("KeyboardInterrupt", "", []), "KeyboardInterrupt");
  assert.equal(errorText("E", "v", ["Traceback", "E: v"]), "Traceback\nE: v");
});

test("the server's proposalStatus drives the card: applied, rejected, expired, approved", () => {
  const s = emptyConversation();
  for (const id of ["p1", "p2", "p3", "p4"]) applyEvent(s, { type: "proposal", params: proposal(id, "t1") });
  const card = (id: string) => s.entries.find((e) => e.id === `proposal:${id}`) as ProposalEntry;
  applyEvent(s, { type: "proposalState", params: { proposalId: "p1", turnId: "t1", state: "applied", uri: "file:///ws/calc.py" } });
  applyEvent(s, { type: "proposalState", params: { proposalId: "p2", turnId: "t1", state: "rejected" } });
  applyEvent(s, { type: "proposalState", params: { proposalId: "p3", turnId: "t1", state: "approved", runId: "r3" } });
  applyEvent(s, { type: "proposalState", params: { proposalId: "p4", turnId: "t1", state: "expired" } });
  assert.deepEqual([card("p1").status, card("p1").appliedTo], ["applied", "file:///ws/calc.py"]);
  assert.equal(card("p2").status, "rejected");
  assert.equal(card("p3").status, "running");
  assert.equal(card("p4").status, "expired");
  assert.equal(pendingProposals(s).length, 0, "once decided, nothing on it can be approved again");
  // A late "expired" does not undo a decision.
  applyEvent(s, { type: "proposalState", params: { proposalId: "p1", turnId: "t1", state: "expired" } });
  assert.equal(card("p1").status, "applied");
});

test("a run started from a document shows its code and where it came from while live", () => {
  const s = emptyConversation();
  applyEvent(s, {
    type: "runStatus",
    params: {
      runId: "r1", state: "queued", language: "python", code: "print(1)", origin: "user",
      source: { uri: "file:///ws/My%20cells.py", kind: "cell", startLine: 3, endLine: 5 },
    },
  });
  const run = s.entries[0] as RunEntry;
  assert.deepEqual([run.code, run.location], ["print(1)", "My cells.py, lines 4–6"]);
  assert.equal(describeSource({ uri: "file:///ws/a.py", kind: "selection", startLine: 0, endLine: 0 }), "a.py, line 1");
});

test("a compaction in the history is one line with its size; a failed one says so, never as a success", () => {
  const s = emptyConversation();
  // The shapes the server sends (protocol.py CompactionEvent): upTo is a turn id, the size is summaryTokens.
  applyEvent(s, {
    type: "history",
    messages: [
      { type: "user", turnId: "t1", text: "first", content: "first" },
      { type: "assistant", turnId: "t1", text: "answer" },
      { type: "compaction", summary: "The user asked first; the model answered.", upTo: "t1", summaryTokens: 1234, turns: 1 },
      { type: "user", turnId: "t2", text: "second", content: "second" },
      { type: "compaction", summary: "(dropped)", upTo: "t2", turns: 1, failed: "the model failed" },
    ],
  });
  assert.deepEqual(s.entries.map((e) => e.kind), ["user", "assistant", "notice", "user", "notice"]);
  const ok = s.entries[2];
  assert.equal(ok.kind === "notice" && ok.level, "info");
  assert.equal(ok.kind === "notice" && ok.text, "1 earlier turn condensed into a summary of 1,234 tokens.");
  const failed = s.entries[4];
  assert.equal(failed.kind === "notice" && failed.level, "warning");
  assert.match(failed.kind === "notice" ? failed.text : "", /^Earlier turns could not be condensed \(the model failed\): the oldest turn was left out/);
  assert.equal(compactionNotice(1234, 3), "3 earlier turns condensed into a summary of 1,234 tokens.");
  assert.equal(compactionNotice(), "Earlier turns condensed into a summary.");
  applyEvent(s, { type: "turnStatus", params: { turnId: "t3", state: "compacting" } });
  assert.equal(activityLine(s), "Condensing earlier turns…");
});

test("a wait on the model shows its time, then how much of the answer arrived; compacting on demand shows too", () => {
  const s = emptyConversation();
  applyEvent(s, { type: "turnStatus", params: { turnId: "t", state: "thinking" } });
  const start = s.since?.t ?? 0;
  assert.equal(activityLine(s, start + 500), "Thinking…");
  assert.equal(activityLine(s, start + 12_400), "Thinking… 12 s");
  applyEvent(s, { type: "message", params: { turnId: "t", seq: 0, delta: "x".repeat(400), done: false } });
  assert.equal(activityLine(s, start + 15_000), "Answering… 15 s · ~100 tokens so far");
  // A second "thinking" (the request is ready) does not restart the clock.
  applyEvent(s, { type: "turnStatus", params: { turnId: "t", state: "thinking" } });
  assert.equal(s.since?.t, start);
  applyEvent(s, { type: "turnStatus", params: { turnId: "t", state: "done" } });
  assert.equal(activityLine(s), "");
  applyEvent(s, { type: "compacting", active: true });
  assert.equal(activityLine(s), "Condensing earlier turns…");
  assert.equal(activityLine(s, (s.compactingSince ?? 0) + 3000), "Condensing earlier turns… 3 s");
  applyEvent(s, { type: "compacting", active: false });
  assert.equal(activityLine(s), "");
});

test("a notice about a condition is said once, and goes when the condition is over; trust updates a waiting card", () => {
  const s = emptyConversation();
  applyEvent(s, { type: "notice", level: "error", text: "The workspace is not trusted.", key: "untrusted" });
  applyEvent(s, { type: "user", text: "hi" });
  applyEvent(s, { type: "notice", level: "error", text: "The workspace is not trusted.", key: "untrusted" });
  assert.deepEqual(s.entries.map((e) => e.kind), ["user", "notice"]);
  applyEvent(s, {
    type: "proposal",
    params: { proposalId: "p", turnId: "t", language: "python", code: "1", risk: { level: "low", reasons: [] }, autoRun: false, waitReason: "the workspace is not trusted: nothing runs" },
  });
  applyEvent(s, { type: "dismiss", key: "untrusted" });
  applyEvent(s, { type: "trusted" });
  assert.deepEqual(s.entries.map((e) => e.kind), ["user", "proposal"]);
  const card = s.entries[1];
  assert.equal(card.kind === "proposal" && card.proposal.waitReason, "the workspace is trusted now: waits for your approval");
});
