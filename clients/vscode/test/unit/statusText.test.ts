import assert from "node:assert/strict";
import { test } from "node:test";
import type { KernelInfo, KernelStatusParams } from "../../src/protocol";
import { kernelSummary } from "../../src/statusText";

const kernels = new Map<string, KernelStatusParams>([["python", { language: "python", state: "busy" }]]);

test("the status bar shows the latest kernel's state and the model; the tooltip the details", () => {
  const info = new Map<string, KernelInfo>([
    ["python", { language: "python", state: "idle", kernel: "python3", source: "venv", sandbox: "bubblewrap", interpreter: "/ws/.venv/bin/python" }],
  ]);
  const { text, tooltip } = kernelSummary(
    kernels,
    "python",
    { model: "openai/gpt-4o-mini", autoRun: false, usage: { promptTokens: 120, completionTokens: 30, cost: 0.0021 }, trusted: true, settingsErrors: ["maxSteps: must be at least 1"] },
    true,
    info,
  );
  assert.equal(text, "$(circle-filled) python: busy · openai/gpt-4o-mini");
  assert.match(tooltip, /python: busy — \/ws\/\.venv\/bin\/python, sandbox: bubblewrap/);
  assert.match(tooltip, /Model: openai\/gpt-4o-mini/);
  assert.match(tooltip, /Auto-run: off/);
  assert.match(tooltip, /Tokens: 120 in, 30 out, \$0\.0021/);
  assert.match(tooltip, /Settings: maxSteps: must be at least 1/);
});

test("no model, no kernel, untrusted, server stopped: each is said plainly", () => {
  const none = kernelSummary(new Map(), undefined, { model: null, autoRun: false, trusted: false }, true);
  assert.equal(none.text, "$(circle-outline) Interpreter: no kernel yet");
  assert.match(none.tooltip, /No model configured \(interpreter\.model\)/);
  assert.match(none.tooltip, /not trusted: nothing runs/);
  assert.match(kernelSummary(kernels, "python", undefined, false).text, /server stopped/);
});
