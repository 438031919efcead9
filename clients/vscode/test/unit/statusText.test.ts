import assert from "node:assert/strict";
import { test } from "node:test";
import type { KernelInfo, KernelStatusParams } from "../../src/protocol";
import { agentsWaitingSummary, contextLine, formatTokens, kernelNewsNotice, kernelSummary, redoNotice, undoNotice, verificationSummary } from "../../src/statusText";

const kernels = new Map<string, KernelStatusParams>([["python", { language: "python", state: "busy" }]]);

test("the status bar shows the latest kernel's state and the model; the tooltip the details", () => {
  const info = new Map<string, KernelInfo>([
    [
      "python",
      {
        language: "python", state: "idle", kernel: "python3", source: "venv", sandbox: "bubblewrap", interpreter: "/ws/.venv/bin/python",
        limits: "rlimits, each process: memory 4 GiB, processes NOT ENFORCED (the server runs as root)",
      },
    ],
  ]);
  const { text, tooltip } = kernelSummary(
    kernels,
    "python",
    { model: "openai/gpt-4o-mini", autoRun: false, usage: { promptTokens: 120, completionTokens: 30, cost: 0.0021 }, trusted: true, settingsErrors: ["maxSteps: must be at least 1"] },
    true,
    info,
  );
  assert.equal(text, "$(circle-filled) python: busy · openai/gpt-4o-mini");
  assert.match(tooltip, /python: busy — \/ws\/\.venv\/bin\/python, sandbox: bubblewrap\n {2}limits: rlimits, each process: memory 4 GiB, processes NOT ENFORCED \(the server runs as root\)\n/);
  assert.match(tooltip, /Model: openai\/gpt-4o-mini/);
  assert.match(tooltip, /Auto-run: off/);
  assert.match(tooltip, /Tokens: 120 in, 30 out, \$0\.0021/);
  assert.match(tooltip, /Settings: maxSteps: must be at least 1/);
});

test("no model, no kernel, untrusted, server stopped: each is said plainly", () => {
  const none = kernelSummary(new Map(), undefined, { model: null, autoRun: false, trusted: false }, true);
  // Restricted Mode is said in the status bar itself, not only in its tooltip.
  assert.equal(none.text, "$(workspace-untrusted) Interpreter: restricted");
  assert.equal(kernelSummary(new Map(), undefined, { model: null, autoRun: false, trusted: true }, true).text, "$(circle-outline) Interpreter: no kernel yet");
  assert.match(none.tooltip, /Manage Workspace Trust/);
  assert.match(none.tooltip, /No model configured \(interpreter\.model\)/);
  assert.match(none.tooltip, /not trusted: nothing runs/);
  assert.match(kernelSummary(kernels, "python", undefined, false).text, /server stopped/);
});

test("the server starting reads as starting, not as a failure", () => {
  const { text, tooltip } = kernelSummary(new Map(), undefined, undefined, "starting");
  assert.equal(text, "$(loading~spin) Interpreter: starting…");
  assert.doesNotMatch(text + tooltip, /stopped/);
});

test("context use: in the text and tooltip when the server sends it, absent otherwise", () => {
  const context = { tokens: 12_345, window: 128_000, windowSource: "model" as const, replyReserve: 4096, cost: 0.04, costKnown: true, compactions: 1 };
  const withContext = kernelSummary(kernels, "python", { model: "openai/gpt-4o", autoRun: false, context }, "running");
  assert.equal(withContext.text, "$(circle-filled) python: busy · openai/gpt-4o · 12.3k / 128k tokens · $0.04");
  assert.match(withContext.tooltip, /Context: 12,345 of 128,000 tokens \(10%\); window \(the model's\)/);
  assert.match(withContext.tooltip, /Cost of this conversation: \$0\.04/);
  assert.match(withContext.tooltip, /condensed once/);
  // A turn's live context wins over the last status answer.
  const live = kernelSummary(kernels, "python", { model: "m", autoRun: false, context }, "running", new Map(), { ...context, tokens: 20_000, costKnown: false });
  assert.equal(live.text, "$(circle-filled) python: busy · m · 20k / 128k tokens");
  assert.match(live.tooltip, /Cost: unknown for this model/);
  // An older server without the field: nothing about context, nothing broken.
  const without = kernelSummary(kernels, "python", { model: "m", autoRun: false }, "running");
  assert.equal(without.text, "$(circle-filled) python: busy · m");
  assert.doesNotMatch(without.tooltip, /Context|Cost/);
  assert.equal(contextLine(undefined), "");
  assert.deepEqual([812, 12_345, 128_000, 1_250_000].map(formatTokens), ["812", "12.3k", "128k", "1.3M"]);
});

test("the tooltip says where the model came from, and which settings were ignored", () => {
  const { tooltip } = kernelSummary(kernels, "python", {
    model: "openai/x", autoRun: false,
    settingsSources: { model: "user file", apiBase: "default" },
    settingsIgnored: ["apiBase from workspace settings: set it in your user settings"],
  }, "running");
  assert.match(tooltip, /Model: openai\/x \(from user file\)/);
  assert.match(tooltip, /Ignored: apiBase from workspace settings/);
  const fromDefault = kernelSummary(kernels, "python", { model: "openai/x", autoRun: false, settingsSources: { model: "default" } }, "running");
  assert.match(fromDefault.tooltip, /Model: openai\/x\n/);
});

test("a kernel on a gateway is named with its gateway", () => {
  const info = new Map<string, KernelInfo>([
    ["python", { language: "python", state: "idle", kernel: "python3", source: "the gateway", gateway: "https://gw.example:8888", kernelId: "k1", sandbox: "off (remote kernel: …)" }],
  ]);
  const { tooltip } = kernelSummary(kernels, "python", undefined, "running", info);
  assert.match(tooltip, /python: busy — python3 on https:\/\/gw\.example:8888, sandbox: off \(remote kernel: …\)/);
});

test("an agent waiting is named in the status bar; several are counted, each listed in the tooltip", () => {
  assert.equal(agentsWaitingSummary([]), undefined);
  const one = agentsWaitingSummary([{ proposalId: "p-1", agent: "Claude Code 2.1", language: "python", since: "2026-12-03T20:15:02Z" }]);
  assert.equal(one?.text, "$(bell-dot) Claude Code 2.1 waiting");
  assert.match(one?.tooltip ?? "", /^Claude Code 2\.1 waits for your decision on a proposal \(Approve, Edit or Reject in the panel\):\nClaude Code 2\.1: python code, since \d\d:\d\d:\d\d\n/);
  const three = agentsWaitingSummary([
    { proposalId: "p-1", agent: "Claude Code 2.1", language: "python", since: "2026-12-03T20:15:02Z" },
    { proposalId: "p-2", agent: "codex 0.9", language: "shell", since: "not a time" },
    { proposalId: "p-3", agent: "codex 0.9", language: "python", since: "" },
  ]);
  assert.equal(three?.text, "$(bell-dot) 2 agents waiting");
  assert.match(three?.tooltip ?? "", /on 3 proposals/);
  assert.match(three?.tooltip ?? "", /codex 0\.9: shell code, since not a time\ncodex 0\.9: python code\n/);
});

test("a gateway connection lost mid-run is a warning in the panel at once, and its return is news too", () => {
  const lost = kernelNewsNotice("busy", { language: "python", state: "busy", message: "the connection to the gateway http://gw:8888 was lost; reconnecting" });
  assert.deepEqual(lost, { level: "warning", text: "The python kernel: the connection to the gateway http://gw:8888 was lost; reconnecting." });
  const back = kernelNewsNotice("busy", { language: "python", state: "busy", message: "reconnected to the same kernel on the gateway; output resumes" });
  assert.equal(back?.level, "info");
  // Starts, restarts and deaths have notices of their own; a state change with a message is not news here.
  assert.equal(kernelNewsNotice("idle", { language: "python", state: "dead", message: "the kernel died" }), undefined);
  assert.equal(kernelNewsNotice("starting", { language: "python", state: "idle", message: "ready" }), undefined);
  assert.equal(kernelNewsNotice("busy", { language: "python", state: "busy" }), undefined);
});

test("a verified export says whether the notebook reproduces, and each cell that does not with its cause", () => {
  const base = { id: "verify-1", cells: 4, identical: 3, equivalent: 1, differs: [], notRun: 0, seconds: 2.41, startSeconds: 0.9, sessionSeconds: 2, sandbox: "off" };
  const ok = verificationSummary({ path: "/w/s.ipynb", verification: base });
  assert.equal(ok.reproduces, true);
  assert.match(ok.text, /^Notebook s\.ipynb reproduces: all 4 cells gave the session's output again \(1 equivalent: .*\), in 2\.4 s\.$/);
  assert.match(verificationSummary({ path: "/w/one.ipynb", verification: { ...base, cells: 1, identical: 1, equivalent: 0 } }).text, /^Notebook one\.ipynb reproduces: its one cell gave/);
  const bad = verificationSummary({
    path: "/w/s.ipynb",
    verification: { ...base, identical: 1, equivalent: 0, differs: [{ cell: 2, cause: "seed not set" }, { cell: 3, cause: "missing input file data.csv" }], notRun: 1 },
  });
  assert.equal(bad.reproduces, false);
  assert.equal(bad.text, "Notebook s.ipynb does not fully reproduce (1 of 4 cells as in the session, 2.4 s): cell 2: seed not set; cell 3: missing input file data.csv; 1 not run (after an error or the stop).");
  assert.equal(verificationSummary({ path: "C:\\w\\n.ipynb" }).reproduces, false);
});

test("an undo's notice names the files and the variables that came back, and what did not", () => {
  const text = undoNotice({
    request: "clean the data", runs: ["r-1"], restored: ["data.csv"], removed: [], variablesRestored: ["df", "model"], variablesRemoved: ["tmp"],
    notRestorable: [{ name: "variable fh", why: "TextIOWrapper (cannot pickle): its state cannot be captured" }],
  });
  assert.equal(
    text,
    "Undone: your last message and what followed it are gone from the conversation; files restored data.csv; " +
      "variables restored df, model; removed tmp. Not restored: variable fh.",
  );
  assert.equal(undoNotice({ request: null, runs: [], notRestorable: [] }), "Undone: your last run is gone from the conversation.");
});

test("a redo's notice names the request that came back, the files and variables, and what did not", () => {
  const text = redoNotice({
    request: "clean the data", runs: ["r-1"], restored: ["data.csv"], removed: ["old.csv"], variablesRestored: ["df"], variablesRemoved: [],
    notRestorable: [{ name: "variable fh", why: "TextIOWrapper (cannot pickle): its state cannot be captured" }],
  });
  assert.equal(
    text,
    'Redone: your message "clean the data" and what followed it are back in the conversation; ' +
      "files restored data.csv; removed old.csv; variables restored df. Not restored: variable fh.",
  );
  assert.equal(redoNotice({ request: null, runs: ["r-2"], notRestorable: [] }), "Redone: your run is back in the conversation.");
  // A long or multi-line request is quoted on one line, shortened.
  const long = redoNotice({ request: `plot the\n\ncolumns ${"x".repeat(100)}`, runs: [], notRestorable: [] });
  assert.match(long, /^Redone: your message "plot the columns x+…" and what followed it are back in the conversation\.$/);
  assert.ok(long.length < 140, long);
});
