import assert from "node:assert/strict";
import { test } from "node:test";
import {
  MAX_RUN_TEXT,
  activityLine,
  applyEvent,
  emptyConversation,
  pendingProposals,
  type AssistantEntry,
  type RunEntry,
} from "../../src/conversation";
import type { ProposalParams } from "../../src/protocol";

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

test("history becomes user, assistant and output entries; clear empties", () => {
  const s = emptyConversation();
  const change = applyEvent(s, {
    type: "history",
    messages: [
      { role: "system", content: "be nice" },
      { role: "user", content: "plot it" },
      { role: "assistant", content: [{ type: "text", text: "Sure" }] },
      { role: "computer", content: "42" },
    ],
  });
  assert.deepEqual(change, { all: true });
  assert.deepEqual(
    s.entries.map((e) => e.kind),
    ["user", "assistant", "run"],
  );
  assert.equal((s.entries[2] as RunEntry).outputs[0].text, "42");
  applyEvent(s, { type: "clear" });
  assert.equal(s.entries.length, 0);
});
