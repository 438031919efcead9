// End-to-end tests in a real VS Code with the extension installed from its .vsix, the real interpreter-lsp
// server and real Jupyter kernels; the model is a scripted OpenAI-compatible endpoint on 127.0.0.1.
// Every assertion reads what a user sees: the panel's DOM, the editor's text, files on disk.
//
// Run: node test/e2e/vscode.e2e.mjs  (after `npm run package`; see scripts/test.d/40-vscode.sh)
// Env: INTERPRETER_LSP_SERVER (default <repo>/.venv/bin/interpreter-lsp), INTERPRETER_LSP_VSIX,
//      INTERPRETER_LSP_ARTIFACTS (default <repo>/test-artifacts);
//      E2E_SUITE=<regex>: only the describe blocks whose name matches ("trusted workspace", "untrusted");
//      E2E_ONLY=<regex>: only the tests whose name matches (later tests of a block may rely on earlier ones);
//      UPDATE_SCREENSHOTS=1: rewrite the reference screenshots instead of comparing with them.

import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, chmodSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, afterEach, before, describe, it } from "node:test";
import { compareScreenshot } from "./screenshots.mjs";
import { ScriptedModel } from "./scriptedModel.mjs";
import { EXT_DIR, VsCode } from "./vscode.mjs";

const REPO = resolve(EXT_DIR, "../..");
const SERVER = process.env.INTERPRETER_LSP_SERVER ?? join(REPO, ".venv/bin/interpreter-lsp");
const VSIX = process.env.INTERPRETER_LSP_VSIX ?? join(EXT_DIR, "interpreter-lsp.vsix");
const ARTIFACTS = process.env.INTERPRETER_LSP_ARTIFACTS ?? join(REPO, "test-artifacts");
const STEP = 60_000; // bound for anything that involves a kernel or the model

const SUITE = process.env.E2E_SUITE ? new RegExp(process.env.E2E_SUITE, "i") : undefined;
const ONLY = process.env.E2E_ONLY ? new RegExp(process.env.E2E_ONLY, "i") : undefined;
/** `describe`, skipped when E2E_SUITE does not match its name. */
const suite = (name, options, fn) => describe(name, { ...options, skip: SUITE !== undefined && !SUITE.test(name) }, fn);
/** `it`, skipped when E2E_ONLY does not match its name. */
const test = (name, fn) => it(name, { skip: ONLY !== undefined && !ONLY.test(name) }, fn);

const started = Date.now();
const log = (line) => console.log(`# [${((Date.now() - started) / 1000).toFixed(1)}s] ${line}`);

function makeWorkspace(name, files) {
  const dir = mkdtempSync(join(tmpdir(), `ilsp-ws-${name}-`));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, ".."), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

function settings(modelUrl, logFile) {
  rmSync(logFile, { force: true }); // one run's log, not every run's
  return {
    "interpreter.server.command": [SERVER, "--log-file", logFile, "--log-level", "DEBUG"],
    "interpreter.model": "openai/scripted",
    "interpreter.apiBase": modelUrl,
    "interpreter.apiKey": "sk-test",
    "interpreter.maxRetries": 0, // a model error ends the turn at once
    "workbench.startupEditor": "none",
    "telemetry.telemetryLevel": "off",
    "extensions.ignoreRecommendations": true,
    "editor.minimap.enabled": false,
    "workbench.tips.enabled": false,
    "chat.commandCenter.enabled": false,
    "security.workspace.trust.startupPrompt": "always",
  };
}

function fence(language, code) {
  return "```" + language + "\n" + code + "\n```";
}

/**
 * Sends a chat message from the panel's input box. Returns `until(locator)`, which waits for the locator
 * and fails at once, with the panel's words, if an error notice appears in the panel instead.
 */
async function sendChat(panel, text) {
  const errors = panel.locator(".entry.notice.level-error");
  const newError = errors.nth(await errors.count());
  await panel.locator("#prompt").fill(text);
  await panel.locator("#prompt").press("Enter");
  await panel.locator(".entry.user", { hasText: text }).last().waitFor();
  const failure = newError.waitFor({ timeout: STEP }).then(
    async () => {
      throw new Error(`the panel shows an error: ${await newError.innerText()}`);
    },
    () => new Promise(() => undefined), // no error within the bound: leave the race to the locator
  );
  return (locator) => Promise.race([locator.waitFor({ timeout: STEP }), failure]);
}

/** The data-id of the panel's last entry, or "" when it has none. */
async function lastEntryId(panel) {
  const last = panel.locator("#entries > .entry").last();
  return (await last.count()) ? ((await last.getAttribute("data-id")) ?? "") : "";
}

/** Waits until the panel's last entry is a "not trusted" refusal other than the entry `before`. */
async function newRefusalAtTheEnd(panel, before) {
  const deadline = Date.now() + STEP;
  for (;;) {
    const last = panel.locator("#entries > .entry").last();
    const id = (await last.count()) ? await last.getAttribute("data-id") : "";
    if (id && id !== before && (await last.evaluate((el) => el.matches(".notice.level-error") && /not trusted/.test(el.textContent ?? "")))) return;
    if (Date.now() > deadline) throw new Error(`no new refusal at the end of the panel (last entry: ${id})`);
    await panel.waitForTimeout(200);
  }
}

/** The proposal card of a panel whose code contains `code`: the latest one. */
function proposalCard(panel, code) {
  return panel.locator(".entry.proposal", { hasText: code }).last();
}

/** A run entry whose stdout is exactly `text` (durations like "48 ms" must not match). */
function runWithStdout(panel, text) {
  const exact = new RegExp(`^\\s*${text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\s*$`);
  return panel.locator(".entry.run", { has: panel.locator(".stdout", { hasText: exact }) });
}

suite("VS Code, trusted workspace", { timeout: 9 * 60_000 }, () => {
  const model = new ScriptedModel();
  let vscode;
  let workspace;
  let modelUrl;

  before(async () => {
    assert.ok(existsSync(SERVER), `the server is not installed at ${SERVER}: run scripts/setup.sh`);
    assert.ok(existsSync(VSIX), `no .vsix at ${VSIX}: run npm run package in clients/vscode`);
    modelUrl = await model.start();
    workspace = makeWorkspace("trusted", {
      "analysis.py": 'x = 21\nopen("result.txt", "w").write("x")\nprint("answer", x * 2)\n',
      "plot.py": "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\n",
      // A script's way: the non-interactive backend, then show(): the figure is captured all the same.
      "agg_figure.py": 'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\nplt.figure()\nplt.bar([1, 2, 3], [3, 1, 2])\nplt.show()\n',
      "cells.py": '# %% first\nprint("cell one")\n\n# %% second\ndef f():\n    return 1 / 0\n\nf()\n',
      "boom.py": "def f():\n    return 1 / 0\n\nf()\n",
      "slow.py": "import time\nfor i in range(600):\n    time.sleep(0.1)\n",
      "target.py": "# helpers\n",
      "ask.py": 'name = input("Your name: ")\nprint("hello", name)\n',
      "geometry.py": "def area(r):\n    return 3.14 * r * r\n\nprint(area(2))\n",
      "build/keep.txt": "still here\n",
    });
    vscode = new VsCode({
      name: "trusted", workspace, settings: settings(modelUrl, join(ARTIFACTS, "vscode-server-trusted.log")), vsix: VSIX, trust: true, log,
      // Set only in the user's config file: VS Code's default for it ("") must not override it.
      userConfig: 'custom_instructions = "House rule: name every variable in English."\n',
    });
    mkdirSync(ARTIFACTS, { recursive: true });
    await vscode.start();
  });

  afterEach(async () => {
    // A failed test must not leave a dialog or a live turn behind to fail the next one too.
    if (!vscode?.page) return;
    if (await vscode.dialog().isVisible()) await vscode.page.keyboard.press("Escape");
    const panel = await vscode.panel(2000).catch(() => undefined);
    if (panel && (await panel.locator("#activity").isVisible())) {
      await vscode.command("Interpreter: Interrupt");
      await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
    }
  });

  after(async () => {
    if (vscode?.page) await vscode.screenshot(join(ARTIFACTS, "vscode-trusted-final.png")).catch(() => undefined);
    await vscode?.stop();
    await model.stop();
    if (workspace) rmSync(workspace, { recursive: true, force: true });
  });

  test("activates, starts the server and shows the python kernel in the status bar", async () => {
    await vscode.statusBar().waitFor({ timeout: STEP });
    // The model comes from the settings, which the server reads just after initialize.
    await vscode.page.locator(".statusbar-item", { hasText: "python: idle · openai/scripted" }).first().waitFor({ timeout: STEP });
    await vscode.command("Interpreter: Show Panel");
    const panel = await vscode.panel();
    await panel.locator("#empty", { hasText: "Ask for something below" }).waitFor();
    await panel.locator("#kernel", { hasText: "python: idle" }).waitFor();
    await panel.locator("#model", { hasText: "openai/scripted" }).waitFor();
    // While the server started, the status bar said so; it never read as a stopped (failed) server.
    const texts = await vscode.statusTexts();
    log(`status bar texts: ${JSON.stringify(texts)}`);
    assert.ok(texts.some((t) => /Interpreter: starting/.test(t)), `never said starting: ${JSON.stringify(texts)}`);
    assert.ok(!texts.some((t) => /server stopped/.test(t)), `said "server stopped" during a normal start: ${JSON.stringify(texts)}`);
    // The panel's title bar: Interrupt at hand; Reset (which cannot be undone) only in the "…" menu.
    const titleActions = vscode.page.locator(".part.sidebar .title-actions .action-label");
    await titleActions.filter({ has: vscode.page.locator(":scope[aria-label*='Interrupt']") }).first().waitFor();
    assert.equal(await vscode.page.locator(".part.sidebar .title-actions .action-label[aria-label*='Reset Conversation']").count(), 0);
    log("server up, kernel idle, panel shown");
  });

  test("the status bar's tooltip stays away while its menu is open, and works again after", async () => {
    const page = vscode.page;
    const ours = page.locator(".workbench-hover, .monaco-hover", { hasText: "Model: openai/scripted" });
    const anyHover = page.locator(".workbench-hover, .monaco-hover").filter({ visible: true });
    const centre = async (locator) => {
      const box = await locator.boundingBox();
      assert.ok(box, "a status bar item is not on screen");
      return { x: box.x + box.width / 2, y: box.y + box.height / 2 };
    };
    const item = await centre(vscode.statusBar());
    // The tooltip works: the pointer resting on the item shows it.
    await page.mouse.move(item.x, item.y);
    await ours.first().waitFor({ state: "visible", timeout: STEP });
    // A click opens the menu; the pointer is still on the item, as it is for a user.
    await page.mouse.click(item.x, item.y);
    const menu = vscode.page.locator(".quick-input-widget", { has: page.locator(".quick-input-title", { hasText: "Interpreter" }) });
    await menu.waitFor({ state: "visible" });
    await ours.first().waitFor({ state: "hidden", timeout: STEP });
    // How long a hover takes to show on this machine now, from another status bar item (the bell)...
    const bell = await centre(page.locator(".statusbar-item[id='status.notifications']").first());
    const started = Date.now();
    await page.mouse.move(bell.x, bell.y);
    await anyHover.first().waitFor({ state: "visible", timeout: STEP });
    const hoverDelay = Date.now() - started;
    // ...then back on ours, while the menu is open: three times that long, its tooltip never shows.
    await page.mouse.move(item.x, item.y);
    const quiet = Date.now() + Math.max(3 * hoverDelay, 1500);
    while (Date.now() < quiet) {
      await page.mouse.move(item.x + (Date.now() % 2 ? 2 : -2), item.y);
      assert.equal(await ours.filter({ visible: true }).count(), 0, "the tooltip showed while the menu was open");
      await page.waitForTimeout(100);
    }
    log(`no tooltip over the open menu for ${Math.max(3 * hoverDelay, 1500)} ms (a hover took ${hoverDelay} ms)`);
    await page.keyboard.press("Escape");
    await menu.waitFor({ state: "hidden" });
    // Once the menu is gone and the pointer comes back to the item, the tooltip is there again.
    const back = Date.now() + STEP;
    for (;;) {
      await page.mouse.move(bell.x, bell.y);
      await page.mouse.move(item.x, item.y);
      try {
        await ours.first().waitFor({ state: "visible", timeout: 3000 });
        break;
      } catch (error) {
        if (Date.now() > back) throw error;
      }
    }
    await page.mouse.move(0, 0);
  });

  test("runs the selection and shows its output in the panel", async () => {
    await vscode.openFile("analysis.py");
    await vscode.focusEditor();
    await vscode.page.keyboard.press("Control+A");
    await vscode.command("Interpreter: Run Selection or Cell");
    const panel = await vscode.panel();
    const run = panel.locator(".entry.run", { hasText: "answer 42" }).last();
    await run.waitFor({ timeout: STEP });
    await run.locator(".run-state", { hasText: "done" }).waitFor({ timeout: STEP });
    assert.equal((await run.locator(".stdout").innerText()).trim(), "answer 42");
    assert.match(await run.locator(".run-meta").innerText(), /python · done · \d/);
    // The file the run wrote is listed under its output, and opens in the editor from there.
    const created = run.locator(".run-files li.change-created", { hasText: "result.txt" });
    await created.waitFor({ timeout: STEP });
    assert.equal((await created.innerText()).replace(/\s+/g, " ").trim(), "+ result.txt created");
    await created.locator("[data-action='openFile']").click();
    await vscode.page.locator('.tab.active[aria-label*="result.txt"]').first().waitFor({ timeout: STEP });
    assert.equal(await vscode.editorText(), "x");
  });

  test("input(): the running code asks, and the answer typed in VS Code's input box reaches it", async () => {
    await vscode.openFile("ask.py");
    await vscode.focusEditor();
    await vscode.page.keyboard.press("Control+A");
    await vscode.command("Interpreter: Run Selection or Cell");
    const box = vscode.inputBox("The running code asks for input");
    await box.waitFor({ timeout: STEP });
    assert.match(await box.innerText(), /Your name:/);
    await box.locator("input").fill("Ada");
    await box.locator("input").press("Enter");
    const panel = await vscode.panel();
    const run = runWithStdout(panel, "hello Ada").last();
    await run.locator(".run-state", { hasText: "done" }).waitFor({ timeout: STEP });
  });

  test("shows a matplotlib plot as an image", async () => {
    await vscode.openFile("plot.py");
    await vscode.focusEditor();
    await vscode.page.keyboard.press("Control+A");
    await vscode.command("Interpreter: Run Selection or Cell");
    const panel = await vscode.panel();
    const image = panel.locator(".entry.run img.output-image").last();
    await image.waitFor({ timeout: STEP });
    assert.match((await image.getAttribute("src")) ?? "", /^data:image\/png;base64,/);
    // The image decoded: a real picture, not a broken icon.
    const width = await image.evaluate((img) => (img.complete ? img.naturalWidth : 0));
    assert.ok(width > 100, `the plot image is ${width} pixels wide`);
    // matplotlib.use("Agg") then plt.show(), as a script does: the figure shows all the same.
    const images = await panel.locator(".entry.run img.output-image").count();
    await vscode.openFile("agg_figure.py");
    await vscode.focusEditor();
    await vscode.page.keyboard.press("Control+A");
    await vscode.command("Interpreter: Run Selection or Cell");
    const run = panel.locator(".entry.run", { has: panel.locator(".run-location", { hasText: "agg_figure.py" }) }).last();
    await run.locator(".run-state", { hasText: "done" }).waitFor({ timeout: STEP });
    const agg = run.locator("img.output-image");
    await agg.waitFor({ timeout: STEP });
    assert.equal(await panel.locator(".entry.run img.output-image").count(), images + 1);
    assert.ok((await agg.evaluate((img) => (img.complete ? img.naturalWidth : 0))) > 100, "the Agg figure is a real image");
  });

  test("the Run cell code lens shows the panel without taking focus, with the cell's code, place and a coloured traceback", async () => {
    const page = vscode.page;
    await vscode.command("View: Show Explorer");
    await page.locator(".part.sidebar .composite.title", { hasText: /explorer/i }).first().waitFor();
    await vscode.openFile("cells.py");
    await page.locator(".editor-group-container.active .codelens-decoration a", { hasText: "Run cell" }).nth(1).waitFor({ state: "attached", timeout: STEP });
    await vscode.runCodeLens(4, "Run cell");
    // The panel came to the front; the cursor stayed in the editor.
    await page.locator(".part.sidebar .composite.title", { hasText: /interpreter/i }).first().waitFor({ timeout: STEP });
    await page.locator(".editor-group-container.active .monaco-editor.focused").first().waitFor({ timeout: STEP });
    const panel = await vscode.panel();
    const run = panel.locator(".entry.run", { has: panel.locator(".run-location", { hasText: "cells.py" }) }).last();
    await run.locator(".run-state", { hasText: "error" }).waitFor({ timeout: STEP });
    assert.match(await run.locator(".run-location").innerText(), /^cells\.py, lines [45]–[89]$/);
    assert.match((await run.locator(".run-code code").textContent()) ?? "", /def f\(\):\s+return 1 \/ 0/);
    assert.equal(await run.locator(".error-title").innerText(), "ZeroDivisionError: division by zero");
    assert.ok((await run.locator(".traceback span[class*='ansi-']").count()) > 0, "the live traceback has colour");
    const wraps = await run.locator(".traceback").evaluate((pre) => getComputedStyle(pre).whiteSpace);
    assert.equal(wraps, "pre", "traceback lines scroll, they do not wrap");
  });

  test("interrupts running code from the panel's Stop button", async () => {
    await vscode.openFile("slow.py");
    await vscode.focusEditor();
    await vscode.page.keyboard.press("Control+A");
    await vscode.command("Interpreter: Run Selection or Cell");
    const panel = await vscode.panel();
    const run = panel.locator(".entry.run").last();
    await run.locator(".run-state", { hasText: "running" }).waitFor({ timeout: STEP });
    await panel.locator("#stop").click({ timeout: STEP });
    await run.locator(".run-state", { hasText: "interrupted" }).waitFor({ timeout: STEP });
    assert.match(await run.innerText(), /KeyboardInterrupt/);
  });

  test("chat: streamed text, a proposal, Run, output, and the model's next step", async () => {
    // A slow model: the first answer streams in twelve-character pieces, 150 ms apart.
    model.reply(`I will compute it in Python.\n\n${fence("python", "print(6 * 7)")}\n`, { chunkDelayMs: 150 });
    model.reply("The answer is **42**.");
    const panel = await vscode.panel();
    const until = await sendChat(panel, "What is six times seven?");
    // The text shows while it streams (the entry is still marked as streaming), before the answer is whole.
    await until(panel.locator(".entry.assistant.streaming", { hasText: "I will" }));
    await until(panel.locator(".entry.assistant:not(.streaming)", { hasText: "I will compute it in Python." }));
    const proposal = panel.locator(".entry.proposal", { hasText: "print(6 * 7)" }).last();
    await until(proposal);
    assert.equal(await proposal.locator(".language").innerText(), "python");
    assert.match(await proposal.locator(".risk").innerText(), /risk: (low|medium|high)/);
    await proposal.locator("button[data-action='approve']").click();
    const run = panel.locator(".entry.run", { hasText: "42" }).last();
    await run.locator(".run-state", { hasText: "done" }).waitFor({ timeout: STEP });
    await panel.locator(".entry.assistant strong", { hasText: "42" }).waitFor({ timeout: STEP });
    await model.waitForRequests(2, STEP);
    assert.match(model.requestText(2), /42/, "the run's output went back to the model");
    // The user's config file set customInstructions; the extension sent only settings the user set in
    // VS Code, so its default did not override the file.
    assert.match(model.requestText(1), /House rule: name every variable in English\./);
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
    await vscode.screenshotPanel(join(ARTIFACTS, "vscode-panel-after-loop.png"));
    log("full loop done; panel screenshot saved");
  });

  test("edit: the code opens in an editor, and approving runs the edited code", async () => {
    const page = vscode.page;
    model.replies.length = 0;
    const before = model.requests.length;
    model.reply(`Computing.\n\n${fence("python", "print(6 * 7)")}\n`);
    model.reply("Your version printed 48.");
    const panel = await vscode.panel();
    const until = await sendChat(panel, "Multiply six by seven, please");
    const proposal = proposalCard(panel, "print(6 * 7)");
    await until(proposal.locator("button[data-action='edit']"));
    assert.match(await proposal.locator(".wait-reason").innerText(), /auto-run is off: waits for approval/i);
    await proposal.locator("button[data-action='edit']").click();
    await page.locator('.tab.active[aria-label*="Untitled"]').first().waitFor({ timeout: STEP });
    await vscode.editorLines().first().locator(".view-line", { hasText: "print(6 * 7)" }).waitFor();
    await vscode.focusEditor();
    await page.keyboard.press("Control+A");
    await page.keyboard.insertText("print(6 * 8)");
    await vscode.editorLines().first().locator(".view-line", { hasText: "print(6 * 8)" }).waitFor();
    await vscode.command("Interpreter: Approve");
    const run = runWithStdout(panel, "48").last();
    await run.locator(".run-state", { hasText: "done" }).waitFor({ timeout: STEP });
    assert.equal((await run.locator(".run-code code").textContent())?.trim(), "print(6 * 8)");
    await proposal.locator(".proposal-status", { hasText: "Ran (edited)" }).waitFor({ timeout: STEP });
    assert.equal(await proposal.locator("button").count(), 0);
    // The editor of the edited code closed once it ran, without asking to save; its ✓ went with it.
    await page.locator(".tab", { hasText: "Untitled" }).first().waitFor({ state: "detached", timeout: STEP });
    assert.equal(await vscode.dialog().count(), 0, "closing the edit asked something");
    assert.equal(await page.locator(".editor-actions .action-label[aria-label*='Approve']").count(), 0);
    await model.waitForRequests(before + 2, STEP);
    assert.match(model.requestText(before + 2), /print\(6 \* 8\)[\s\S]*48/, "the model saw the edited code and its output");
    await panel.locator(".entry.assistant", { hasText: "Your version printed 48." }).waitFor({ timeout: STEP });
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
  });

  test("reject: the code does not run and the proposal says so", async () => {
    model.replies.length = 0;
    const before = model.requests.length;
    model.reply(`Cleaning up.\n\n${fence("shell", "rm -rf build")}\n`);
    model.reply("Understood, I left it alone.");
    const panel = await vscode.panel();
    const until = await sendChat(panel, "Delete the build folder");
    const proposal = panel.locator(".entry.proposal", { hasText: "rm -rf build" }).last();
    await until(proposal);
    await proposal.locator("button[data-action='reject']").click();
    await proposal.locator(".proposal-status", { hasText: "Rejected" }).waitFor({ timeout: STEP });
    await model.waitForRequests(before + 1, STEP);
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
    assert.equal(await proposal.locator("button").count(), 0);
    assert.ok(existsSync(join(workspace, "build/keep.txt")), "the rejected command ran: build/ is gone");
    // The turn's closing message says why it ended.
    await panel.locator(".entry.notice", { hasText: "declined" }).last().waitFor({ timeout: STEP });
  });

  test("a model error ends the turn, and the panel says what happened", async () => {
    model.replies.length = 0; // the scripted model answers HTTP 500
    const before = model.requests.length;
    const panel = await vscode.panel();
    const errors = panel.locator(".entry.notice.level-error");
    const count = await errors.count();
    await panel.locator("#prompt").fill("Are you there?");
    await panel.locator("#prompt").press("Enter");
    await errors.nth(count).waitFor({ timeout: STEP });
    const text = await errors.nth(count).innerText();
    log(`model error shown: ${text}`);
    assert.ok(text.trim().length > 20, `the error says little: ${text}`);
    assert.equal(model.requests.length, before + 1, "no retries were asked for");
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
  });

  test("insert: a proposal is written into the document at the cursor", async () => {
    await vscode.openFile("target.py");
    await vscode.focusEditor();
    await vscode.page.keyboard.press("Control+End");
    model.replies.length = 0;
    const before = model.requests.length;
    model.reply(`Here is a helper.\n\n${fence("python", "def double(x):\n    return 2 * x")}\n`);
    const panel = await vscode.panel();
    const until = await sendChat(panel, "Write a function that doubles a number");
    const proposal = panel.locator(".entry.proposal", { hasText: "def double(x):" }).last();
    await until(proposal);
    // The turn that failed before (no reply from the model) is not glued to this question.
    assert.doesNotMatch(model.requestText(before + 1), /Are you there\?/);
    await proposal.locator("button[data-action='insert']").click();
    // Writing it into the document decides the proposal: it did not run, and can no longer be run.
    await proposal.locator(".proposal-status", { hasText: "Written into target.py" }).waitFor({ timeout: STEP });
    assert.equal(await proposal.locator("button").count(), 0);
    await vscode.editorLines().first().locator(".view-line", { hasText: "def double(x):" }).waitFor({ timeout: STEP });
    const text = await vscode.editorText();
    // Whole lines after the cursor's line, never glued to it.
    assert.match(text, /^# helpers\s*\ndef double\(x\):\s+return 2 \* x/);
    await panel.locator(".entry.notice", { hasText: "Written into target.py; it did not run." }).waitFor({ timeout: STEP });
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
  });

  test("insert over a selection: the change is shown as a diff first, then the document changes", async () => {
    const page = vscode.page;
    await vscode.openFile("geometry.py");
    await vscode.focusEditor();
    await page.keyboard.press("Control+Home");
    await page.keyboard.press("Shift+ArrowDown");
    await page.keyboard.press("Shift+End");
    model.replies.length = 0;
    model.reply(`Use math.pi:\n\n${fence("python", "import math\n\ndef area(r):\n    return math.pi * r * r")}\n`);
    const panel = await vscode.panel();
    const until = await sendChat(panel, "Make area() exact");
    const proposal = proposalCard(panel, "math.pi");
    await until(proposal.locator("button[data-action='insert']"));
    await proposal.locator("button[data-action='insert']").click();
    const dialog = vscode.dialog();
    await dialog.waitFor({ timeout: STEP });
    assert.match(await dialog.innerText(), /Replace the selected lines 1–2 of geometry\.py/);
    // Behind the question, the change as a diff: the document's lines against the proposed ones.
    const diff = page.locator(".monaco-diff-editor").first();
    await diff.locator(".editor.modified .view-line", { hasText: "math.pi" }).first().waitFor();
    assert.match(await diff.locator(".editor.original .view-lines").innerText(), /3\.14/);
    assert.match(await vscode.page.locator(".tab.active").first().innerText(), /proposed code/);
    await dialog.getByRole("button", { name: "Replace" }).click();
    await dialog.waitFor({ state: "hidden" });
    await proposal.locator(".proposal-status", { hasText: "Written into geometry.py" }).waitFor({ timeout: STEP });
    await vscode.editorLines().first().locator(".view-line", { hasText: "math.pi" }).waitFor({ timeout: STEP });
    const text = await vscode.editorText();
    assert.match(text, /^import math\s+def area\(r\):\s+return math\.pi \* r \* r\s+print\(area\(2\)\)/);
    assert.doesNotMatch(text, /3\.14/);
    assert.equal(await page.locator(".tab", { hasText: "proposed code" }).count(), 0, "the diff preview was closed");
    assert.match(readFileSync(join(workspace, "geometry.py"), "utf8"), /3\.14/, "the file is left unsaved, as any edit");
    assert.equal(await proposal.locator("button").count(), 0, "written instead of run: nothing left to decide");
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
  });

  test("the conversation comes back after a window reload, from the server's history", async () => {
    await vscode.reload();
    await vscode.page.locator(".statusbar-item", { hasText: "python: idle" }).first().waitFor({ timeout: STEP });
    await vscode.command("Interpreter: Show Panel");
    const panel = await vscode.panel();
    await panel.locator(".entry.user", { hasText: "Make area() exact" }).waitFor({ timeout: STEP });
    const asked = await panel.locator(".entry.user .markdown").allInnerTexts();
    assert.deepEqual(
      asked.map((t) => t.trim()),
      [
        "What is six times seven?",
        "Multiply six by seven, please",
        "Delete the build folder",
        "Are you there?",
        "Write a function that doubles a number",
        "Make area() exact",
      ],
    );
    // Assistant Markdown, proposals with their decisions, runs with their outputs.
    await panel.locator(".entry.assistant strong", { hasText: "42" }).waitFor();
    const sixSeven = panel.locator(".entry.proposal", { hasText: "print(6 * 7)" });
    assert.deepEqual(await sixSeven.locator(".proposal-status").allInnerTexts(), ["Ran", "Ran (edited)"]);
    const edited = runWithStdout(panel, "48");
    assert.equal(await edited.locator(".run-state").innerText(), "done");
    assert.equal((await edited.locator(".run-code code").textContent())?.trim(), "print(6 * 8)");
    assert.equal(await proposalCard(panel, "rm -rf build").locator(".proposal-status").innerText(), "Rejected");
    assert.equal(await proposalCard(panel, "def double(x)").locator(".proposal-status").innerText(), "Written into target.py");
    assert.equal(await proposalCard(panel, "math.pi").locator(".proposal-status").innerText(), "Written into geometry.py");
    // The notices the live panel showed come back too: a declined run, a written proposal.
    await panel.locator(".entry.notice", { hasText: "Written into target.py; it did not run." }).waitFor();
    await panel.locator(".entry.notice", { hasText: /declined/i }).first().waitFor();
    // The view is at the end of the conversation, not at its top.
    const lastEntry = panel.locator(".entry").last();
    await lastEntry.waitFor();
    assert.ok(
      await lastEntry.evaluate((el) => el.getBoundingClientRect().bottom <= (el.ownerDocument.defaultView?.innerHeight ?? 0) + 1),
      "after a reload the panel shows the last message",
    );
    assert.equal(await panel.locator(".entry.proposal button").count(), 0, "a reloaded proposal offers no actions");
    // The user's own runs: their code, output, plot and interruption.
    assert.equal(await runWithStdout(panel, "answer 42").locator(".run-state").innerText(), "done");
    assert.equal(await runWithStdout(panel, "answer 42").locator(".run-files li.change-created [data-path='result.txt']").count(), 1);
    assert.equal(await runWithStdout(panel, "hello Ada").count(), 1);
    const image = panel.locator(".entry.run img.output-image").first();
    assert.ok((await image.evaluate((img) => (img.complete ? img.naturalWidth : 0))) > 100, "the plot came back as an image");
    await panel.locator(".entry.run .run-state", { hasText: "interrupted" }).first().waitFor();
    // The model error of that turn, as it was shown.
    assert.equal(await panel.locator(".entry.notice.level-error").count(), 1);
    await vscode.screenshotPanel(join(ARTIFACTS, "vscode-panel-after-reload.png"));
    log("conversation restored after reload");
  });

  test("undo drops the last message and what followed; reset empties the panel", async () => {
    const panel = await vscode.panel();
    await vscode.command("Interpreter: Undo Last Step");
    await panel.locator(".entry.user", { hasText: "Make area() exact" }).waitFor({ state: "detached", timeout: STEP });
    assert.equal(await proposalCard(panel, "math.pi").count(), 0);
    await panel.locator(".entry.user", { hasText: "Write a function that doubles a number" }).waitFor();
    // Reset cannot be undone: VS Code asks first, and "Cancel" keeps the conversation.
    await vscode.command("Interpreter: Reset Conversation");
    const dialog = vscode.dialog();
    await dialog.waitFor({ timeout: STEP });
    assert.match(await dialog.innerText(), /Start a new conversation\?/);
    await dialog.getByRole("button", { name: "Cancel" }).click();
    await dialog.waitFor({ state: "hidden" });
    assert.ok((await panel.locator(".entry").count()) > 0, "Cancel kept the conversation");
    await vscode.command("Interpreter: Reset Conversation");
    await dialog.waitFor({ timeout: STEP });
    await dialog.getByRole("button", { name: "Reset" }).click();
    await panel.locator("#empty").waitFor({ timeout: STEP });
    assert.equal(await panel.locator(".entry").count(), 0);
  });

  test("restart kernel asks first; at 300 and 600 px the panel's cards look as their reference screenshots", async () => {
    const page = vscode.page;
    const panel = await vscode.panel();
    // Restarting loses the kernel's variables: VS Code asks first.
    await vscode.command("Interpreter: Restart Kernel");
    const dialog = vscode.dialog();
    await dialog.waitFor({ timeout: STEP });
    assert.match(await dialog.innerText(), /Restart the Python kernel\?/);
    await dialog.getByRole("button", { name: "Restart" }).click();
    await panel.locator(".entry.notice", { hasText: "kernel restarted" }).waitFor({ timeout: STEP });
    await page.locator(".statusbar-item", { hasText: "python: idle" }).first().waitFor({ timeout: STEP });

    /** Pictures of `locator` at 300 and 600 px, compared with their references. */
    const shoot = async (name, locator) => {
      for (const width of [300, 600]) {
        await vscode.setSidebarWidth(width);
        // The conversation's column gets a whole number of pixels (the webview's own width may be
        // fractional, and a pixel of rounding moves every right-aligned word); then two frames of layout.
        await panel.locator("#entries").evaluate((entries, w) => {
          entries.style.width = `${w - 24}px`;
          // Fonts every test machine has (setup installs fonts-dejavu-core), not whatever the system's UI
          // font resolves to: pictures then compare across machines.
          const root = entries.ownerDocument.documentElement.style;
          root.setProperty("--vscode-font-family", '"DejaVu Sans"');
          root.setProperty("--vscode-font-size", "13px");
          root.setProperty("--vscode-editor-font-family", '"DejaVu Sans Mono"');
          root.setProperty("--vscode-editor-font-size", "13px");
          return new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(undefined))));
        }, width);
        // Durations change from run to run: the pictures show a fixed one.
        await panel.locator(".run-duration").evaluateAll((spans) => spans.forEach((span) => (span.textContent = "10 ms")));
        // The placeholder fits the input.
        const fits = await panel.locator("#prompt").evaluate((input) => {
          const style = getComputedStyle(input);
          const context = input.ownerDocument.createElement("canvas").getContext("2d");
          context.font = style.font;
          const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
          return context.measureText(input.placeholder).width <= room;
        });
        assert.ok(fits, `the input's placeholder is clipped at ${width} px`);
        // The input row is fixed at the bottom and would cover an element scrolled just above it.
        await panel.locator("#footer").evaluate((footer) => (footer.style.visibility = "hidden"));
        // The element alone at the top: its place (to the fraction of a pixel, which moves every glyph's
        // anti-aliasing) does not depend on what the conversation held before it.
        await locator.evaluate((el) => {
          for (const sibling of el.parentElement.children) if (sibling !== el) sibling.style.display = "none";
          el.ownerDocument.defaultView.scrollTo(0, 0);
          return new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(undefined))));
        });
        const result = compareScreenshot(`${name}-${width}`, await locator.screenshot({ animations: "disabled", caret: "hide" }), ARTIFACTS);
        log(`screenshot ${name}-${width}: ${result}`);
      }
      await panel.locator("#entries").evaluate((entries) => {
        entries.style.width = "";
        for (const entry of entries.children) entry.style.display = "";
      });
      await panel.locator("#footer").evaluate((footer) => (footer.style.visibility = ""));
      await vscode.setSidebarWidth(300);
    };

    // A proposal whose risk is medium (a delete is not on the allowlist that proves "low"), with its reason
    // on the card; the badge never wraps.
    model.replies.length = 0;
    model.reply(`Removing it.\n\n${fence("python", 'import os\nos.remove("scratch.txt")')}\n`);
    const until = await sendChat(panel, "Remove scratch.txt");
    const proposal = proposalCard(panel, "scratch.txt");
    await until(proposal.locator("button[data-action='approve']"));
    assert.equal(await proposal.locator(".risk").innerText(), "risk: medium");
    assert.match(await proposal.locator(".risk-reasons").innerText(), /deletes scratch\.txt \(inside the workspace\)/);
    assert.equal(await proposal.locator(".risk").evaluate((el) => el.getClientRects().length), 1, "the risk badge wraps");
    // One background for the block, none per line: the <code> inside the <pre> is transparent.
    assert.equal(await proposal.locator("pre.code code").evaluate((code) => getComputedStyle(code).backgroundColor), "rgba(0, 0, 0, 0)");
    await shoot("proposal", proposal);
    await proposal.locator("button[data-action='reject']").click();
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });

    // A traceback, and a plot: the first runs of the restarted kernel, so their text is the same every time.
    const runs = {};
    for (const file of ["boom.py", "plot.py"]) {
      // Earlier tests ran these files too: this run is the next one.
      const ofFile = panel.locator(".entry.run", { has: panel.locator(".run-location", { hasText: file }) });
      runs[file] = ofFile.nth(await ofFile.count());
      await vscode.openFile(file);
      await vscode.focusEditor();
      await page.keyboard.press("Control+A");
      await vscode.command("Interpreter: Run Selection or Cell");
      await runs[file].locator(".run-state.state-ok, .run-state.state-error").waitFor({ timeout: STEP });
    }
    const traceback = runs["boom.py"];
    const plot = runs["plot.py"];
    await plot.locator("img.output-image").waitFor({ timeout: STEP });
    await plot.locator("img.output-image").evaluate((img) => (img.complete ? undefined : new Promise((r) => img.addEventListener("load", r))));
    await shoot("traceback", traceback);
    await shoot("plot", plot);

    // A changed model shows in the status bar at once; with none, the chat says what to do, as a list.
    await vscode.updateSettings({ "interpreter.model": "", "interpreter.apiBase": "" });
    await page.locator(".statusbar-item", { hasText: "python: idle", hasNotText: "openai/scripted" }).first().waitFor({ timeout: STEP });
    const errors = panel.locator(".entry.notice.level-error");
    const count = await errors.count();
    await panel.locator("#prompt").fill("Hello?");
    await panel.locator("#prompt").press("Enter");
    const noModel = errors.nth(count);
    await noModel.waitFor({ timeout: STEP });
    assert.match(await noModel.innerText(), /^No model is configured/);
    assert.ok((await noModel.locator("li").count()) >= 3, "the choices are a list");
    assert.ok((await noModel.locator("li code").count()) >= 1, "commands are code");
    await shoot("no-model", noModel);
    await vscode.updateSettings({ "interpreter.model": "openai/scripted-b", "interpreter.apiBase": modelUrl });
    await page.locator(".statusbar-item", { hasText: "python: idle · openai/scripted-b" }).first().waitFor({ timeout: STEP });
    // The question that failed for lack of a model is not sent along with the next one.
    const requests = model.requests.length;
    model.reply("Yes, back.");
    const back = await sendChat(panel, "Are we back?");
    await back(panel.locator(".entry.assistant", { hasText: "Yes, back." }));
    assert.equal(model.requests.length, requests + 1);
    assert.match(model.requestText(requests + 1), /Are we back\?/);
    assert.doesNotMatch(model.requestText(requests + 1), /Hello\?/);
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
  });

  test("another agent's call over MCP waits in the status bar and the panel; approving runs it and answers the agent", async () => {
    // The agent as a user has one: the MCP SDK's client with `interpreter-lsp mcp` started in the workspace.
    const { spawn } = await import("node:child_process");
    const answer = join(mkdtempSync(join(tmpdir(), "ilsp-agent-")), "answer.txt");
    const python = join(REPO, ".venv/bin/python");
    // The agent's TMPDIR is not the editor's (VS Code's server has one of its own here, as on macOS): they
    // meet all the same (the agents' sockets are in /tmp, docs/agents.md).
    const agent = spawn(python, [join(REPO, "tests/mcp_agent.py"), workspace, answer, "claude-code"], { stdio: ["ignore", "inherit", "inherit"] });
    const exited = new Promise((done) => agent.on("exit", (code) => done(code)));
    try {
      const item = vscode.page.locator(".statusbar-item", { hasText: "claude-code 1 waiting" }).first();
      await item.waitFor({ timeout: STEP });
      const panel = await vscode.panel();
      const card = proposalCard(panel, "from the agent");
      await card.waitFor({ timeout: STEP });
      assert.match(await card.locator(".agent").innerText(), /^from claude-code 1/);
      await card.locator("button[data-action='approve']").click();
      await runWithStdout(panel, "from the agent 42").last().waitFor({ timeout: STEP });
      await item.waitFor({ state: "detached", timeout: STEP });
      assert.equal(await Promise.race([exited, new Promise((done) => setTimeout(() => done("still running"), STEP))]), 0);
      assert.match(readFileSync(answer, "utf8"), /from the agent 42/);
    } finally {
      agent.kill();
    }
  });
});


suite("VS Code, untrusted workspace", { timeout: 4 * 60_000 }, () => {
  const model = new ScriptedModel();
  let vscode;
  let workspace;

  before(async () => {
    const modelUrl = await model.start();
    workspace = makeWorkspace("untrusted", {
      "analysis.py": 'open("ran.txt", "w").write("code ran")\nprint("ran")\n',
      "cells.py": '# %% one\nopen("cell-ran.txt", "w").write("x")\n',
      // A workspace virtualenv whose python would betray being started: an untrusted folder's own
      // interpreter must not run either.
      ".venv/bin/python": `#!/bin/sh\necho started > "$(dirname "$0")/../../venv-python-ran.txt"\nexec python3 "$@"\n`,
      ".venv/pyvenv.cfg": "home = /usr/bin\n",
      ".venv/lib/python3.11/site-packages/ipykernel/__init__.py": "",
    });
    chmodSync(join(workspace, ".venv/bin/python"), 0o755);
    // Once trusted, kernels use the server's own environment (the workspace's .venv above is a decoy).
    const userSettings = { ...settings(modelUrl, join(ARTIFACTS, "vscode-server-untrusted.log")), "interpreter.kernel.python": join(REPO, ".venv/bin/python") };
    vscode = new VsCode({ name: "untrusted", workspace, settings: userSettings, vsix: VSIX, trust: false, log });
    await vscode.start();
  });

  after(async () => {
    if (vscode?.page) await vscode.screenshot(join(ARTIFACTS, "vscode-untrusted-final.png")).catch(() => undefined);
    await vscode?.stop();
    await model.stop();
    if (workspace) rmSync(workspace, { recursive: true, force: true });
  });

  test("runs nothing, and says why", async () => {
    const page = vscode.page;
    // VS Code asks whether to trust the folder's authors: the user says no (Restricted Mode).
    await page.getByRole("button", { name: /No, I don.t trust the authors/ }).click({ timeout: STEP });
    await page.locator(".statusbar-item", { hasText: "Restricted Mode" }).first().waitFor({ timeout: STEP });
    await vscode.statusBar().waitFor({ timeout: STEP });
    // The status bar says Restricted Mode in its own words, not only in its tooltip.
    await page.locator(".statusbar-item", { hasText: "Interpreter: restricted" }).first().waitFor({ timeout: STEP });
    await vscode.openFile("analysis.py");
    await vscode.focusEditor();
    await page.keyboard.press("Control+A");
    await vscode.command("Interpreter: Run Selection or Cell");
    const panel = await vscode.panel();
    await panel.locator(".entry.notice.level-error", { hasText: "not trusted" }).waitFor({ timeout: STEP });
    assert.equal(await panel.locator(".entry.run").count(), 0);
    assert.ok(!existsSync(join(workspace, "ran.txt")), "code ran in an untrusted workspace");
    assert.ok(!existsSync(join(workspace, "venv-python-ran.txt")), "the untrusted workspace's own python was started");
    assert.equal(model.requests.length, 0);
  });

  test("a chat's proposal says why it will not run, and Run is refused", async () => {
    model.reply(`Writing the file.\n\n${fence("python", 'open("ran.txt", "w").write("x")')}\n`);
    const panel = await vscode.panel();
    const until = await sendChat(panel, "Write ran.txt");
    const proposal = proposalCard(panel, "ran.txt");
    await until(proposal.locator(".wait-reason"));
    assert.match(await proposal.locator(".wait-reason").innerText(), /not trusted: nothing runs/);
    // The first news of a turn told the status bar the model, though no kernel ever started.
    await vscode.page.locator(".statusbar-item", { hasText: "openai/scripted" }).first().waitFor({ timeout: STEP });
    const refusals = panel.locator(".entry.notice.level-error", { hasText: "not trusted" });
    const said = await lastEntryId(panel);
    await proposal.locator("button[data-action='approve']").click();
    await newRefusalAtTheEnd(panel, said);
    await proposal.locator("button[data-action='approve']:enabled").waitFor({ timeout: STEP });
    // Said once: the same refusal again replaces the earlier notice at the end, it does not pile up.
    assert.equal(await refusals.count(), 1, "the same refusal shows more than once");
    assert.equal(await panel.locator(".entry.run").count(), 0);
    assert.ok(!existsSync(join(workspace, "ran.txt")), "code ran in an untrusted workspace");
    assert.ok(!existsSync(join(workspace, "venv-python-ran.txt")), "the untrusted workspace's own python was started");
    await proposal.locator("button[data-action='reject']").click();
    await proposal.locator(".proposal-status", { hasText: "Rejected" }).waitFor({ timeout: STEP });
  });

  test("a Run cell code lens says why nothing ran, once, in the server's words", async () => {
    const page = vscode.page;
    await vscode.openFile("cells.py");
    await vscode.focusEditor();
    const panel = await vscode.panel();
    const refusals = panel.locator(".entry.notice.level-error", { hasText: "not trusted" });
    const said = await lastEntryId(panel);
    await page.locator(".editor-group-container.active .codelens-decoration a", { hasText: "Run cell" }).first().waitFor({ state: "attached", timeout: STEP });
    await vscode.runCodeLens(1, "Run cell");
    await newRefusalAtTheEnd(panel, said);
    assert.match(await refusals.last().innerText(), /Manage Workspace Trust/, "the notice says how to trust");
    const toasts = page.locator(".notifications-toasts .notification-toast");
    await toasts.filter({ hasText: "not trusted" }).first().waitFor({ timeout: STEP });
    assert.equal(await toasts.filter({ hasText: "not trusted" }).count(), 1, "one toast");
    assert.equal(await toasts.filter({ hasText: /Request workspace\/executeCommand failed/ }).count(), 0, "no raw request failure");
    // The toast offers what helps here: managing the workspace's trust, not the server's log.
    const toast = toasts.filter({ hasText: "not trusted" }).first();
    await toast.getByRole("button", { name: "Manage Workspace Trust" }).waitFor({ timeout: STEP });
    assert.equal(await toast.getByRole("button", { name: "Show Log" }).count(), 0);
    assert.equal(await refusals.count(), 1, "the same refusal shows more than once");
    // Again: still one notice, still one toast.
    const again = await lastEntryId(panel);
    await vscode.runCodeLens(1, "Run cell");
    await newRefusalAtTheEnd(panel, again);
    assert.equal(await refusals.count(), 1);
    assert.equal(await toasts.filter({ hasText: "not trusted" }).count(), 1, "a second identical toast");
    assert.ok(!existsSync(join(workspace, "cell-ran.txt")), "the cell ran in an untrusted workspace");
    await page.keyboard.press("Escape");
  });

  test("granting trust keeps a waiting proposal: it is not interrupted, and runs when approved", async () => {
    const page = vscode.page;
    model.replies.length = 0;
    model.reply(`Writing it.\n\n${fence("python", 'open("trusted.txt", "w").write("yes")\nprint("wrote it")')}\n`);
    model.reply("Done.");
    const panel = await vscode.panel();
    const until = await sendChat(panel, "Write trusted.txt");
    const proposal = proposalCard(panel, "trusted.txt");
    await until(proposal.locator(".wait-reason", { hasText: "not trusted" }));
    await vscode.command("Workspaces: Manage Workspace Trust");
    const trustEditor = page.locator(".workspace-trust-editor");
    await trustEditor.waitFor({ timeout: STEP });
    await trustEditor.getByRole("button", { name: "Trust", exact: true }).first().click();
    await panel.locator(".entry.notice", { hasText: "trusted now" }).waitFor({ timeout: STEP });
    assert.equal(await panel.locator(".entry.notice", { hasText: /interrupted/i }).count(), 0, "the turn was interrupted");
    assert.match(await proposal.locator(".proposal-status").innerText(), /Waiting for your approval/);
    // The card no longer says it waits because the workspace is not trusted; the refusals are gone.
    await proposal.locator(".wait-reason", { hasText: "trusted now" }).waitFor({ timeout: STEP });
    assert.doesNotMatch(await proposal.innerText(), /not trusted/);
    assert.equal(await panel.locator(".entry.notice.level-error", { hasText: "not trusted" }).count(), 0, "a stale 'not trusted' notice");
    await proposal.locator("button[data-action='approve']").click();
    const run = runWithStdout(panel, "wrote it").last();
    await run.locator(".run-state", { hasText: "done" }).waitFor({ timeout: STEP });
    assert.equal(readFileSync(join(workspace, "trusted.txt"), "utf8"), "yes");
    await panel.locator(".entry.assistant", { hasText: "Done." }).waitFor({ timeout: STEP });
  });

  test("Export Notebook and Verify It Reproduces: the verdict in words, in the panel", async () => {
    const panel = await vscode.panel();
    await vscode.command("Interpreter: Export Notebook and Verify It Reproduces");
    const box = vscode.inputBox("Export the conversation as a notebook");
    await box.waitFor({ timeout: STEP });
    await box.locator("input").fill("verified.ipynb");
    await box.locator("input").press("Enter");
    const verdict = panel.locator(".entry.notice", { hasText: /^Notebook verified\.ipynb (reproduces|does not fully reproduce)/ });
    await verdict.waitFor({ timeout: 3 * STEP });
    assert.match(await verdict.innerText(), /^Notebook verified\.ipynb reproduces: its one cell gave the session's output again/);
    const notebook = JSON.parse(readFileSync(join(workspace, "verified.ipynb"), "utf8"));
    const code = notebook.cells.filter((c) => c.cell_type === "code");
    assert.deepEqual(code.map((c) => c.metadata.interpreter_lsp.verify.verdict), ["identical"]);
  });
});


// ---- issue 22: a panel that follows the user and never misleads -------------------------------------------

const THEMES = { light: "Default Light Modern", dark: "Default Dark Modern" };

/**
 * Pictures of `locator` (a function of the panel, so it is found again after a theme change re-renders the
 * webview) at 300 and 720 px wide, in the light and the dark theme, saved to the artifacts and compared with
 * the references in test/screenshots/ (UPDATE_SCREENSHOTS=1 writes them). `check(width)` runs at each width.
 */
async function shootThemes(vscode, name, locator, check = async () => undefined) {
  const results = [];
  await vscode.command("Notifications: Clear All Notifications");
  for (const [theme, id] of Object.entries(THEMES)) {
    // A toast, or a wide side bar's webview, over the settings editor takes its clicks.
    await vscode.command("Notifications: Clear All Notifications");
    await vscode.setSidebarWidth(300);
    await vscode.updateSettings({ "workbench.colorTheme": id });
    await vscode.page.locator(`.monaco-workbench.vs${theme === "dark" ? "-dark" : ""}`).first().waitFor({ timeout: STEP });
    for (const width of [300, 720]) {
      await vscode.setSidebarWidth(width);
      const panel = await vscode.panel();
      await panel.locator("body").evaluate((body) => {
        const root = body.ownerDocument.documentElement.style;
        root.setProperty("--vscode-font-family", '"DejaVu Sans"');
        root.setProperty("--vscode-font-size", "13px");
        root.setProperty("--vscode-editor-font-family", '"DejaVu Sans Mono"');
        root.setProperty("--vscode-editor-font-size", "13px");
        return new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(undefined))));
      });
      await panel.locator(".run-duration").evaluateAll((spans) => spans.forEach((span) => (span.textContent = "10 ms")));
      const element = locator(panel);
      await element.scrollIntoViewIfNeeded();
      await check(width, panel);
      const png = await element.screenshot({ animations: "disabled", caret: "hide" });
      results.push(`${name}-${theme}-${width}: ${compareScreenshot(`${name}-${theme}-${width}`, png, ARTIFACTS)}`);
    }
  }
  await vscode.command("Notifications: Clear All Notifications");
  await vscode.setSidebarWidth(300);
  await vscode.updateSettings({ "workbench.colorTheme": THEMES.dark });
  log(results.join("; "));
}

/** Whether the whole of an element is in the part of the panel the footer does not cover. */
function wholeInView(locator) {
  return locator.evaluate((el) => {
    const box = el.getBoundingClientRect();
    const footer = el.ownerDocument.getElementById("footer").getBoundingClientRect();
    return box.top >= 0 && box.bottom <= footer.top + 1;
  });
}

suite("VS Code, panel truths", { timeout: 15 * 60_000 }, () => {
  const model = new ScriptedModel();
  let vscode;
  let workspace;
  let modelUrl;
  let serverSettings;
  let bin;

  before(async () => {
    assert.ok(existsSync(SERVER), `the server is not installed at ${SERVER}: run scripts/setup.sh`);
    modelUrl = await model.start();
    workspace = makeWorkspace("truths", {
      "long.py": 'for i in range(120):\n    print("line", i)\n',
      "cells.py": '# %% one\nprint("cell one ran")\n',
      "ask.py": "x = 1\n",
    });
    serverSettings = settings(modelUrl, join(ARTIFACTS, "vscode-server-truths.log"));
    // No server anywhere at first: the setting is empty and PATH has no interpreter-lsp (until the first
    // test puts one in `bin`, as a user's own install would).
    const start = { ...serverSettings, "interpreter.server.command": "", "interpreter.confirmDestructive": false, "workbench.colorTheme": THEMES.dark };
    delete start["interpreter.server.command"];
    bin = mkdtempSync(join(tmpdir(), "ilsp-bin-"));
    const path = [bin, ...(process.env.PATH ?? "").split(":").filter((dir) => !existsSync(join(dir, "interpreter-lsp")))].join(":");
    vscode = new VsCode({ name: "truths", workspace, settings: start, vsix: VSIX, trust: true, log, env: { PATH: path, VSCODE_CLI: "1" } }); // VSCODE_CLI: this PATH, not the login shell's
    mkdirSync(ARTIFACTS, { recursive: true });
    await vscode.start();
  });

  afterEach(async () => {
    if (!vscode?.page) return;
    if (await vscode.dialog().isVisible()) await vscode.page.keyboard.press("Escape");
    const panel = await vscode.panel(2000).catch(() => undefined);
    if (panel && (await panel.locator("#activity").isVisible())) {
      await vscode.command("Interpreter: Interrupt");
      await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
    }
  });

  after(async () => {
    if (vscode?.page) await vscode.screenshot(join(ARTIFACTS, "vscode-truths-final.png")).catch(() => undefined);
    await vscode?.stop();
    await model.stop();
    if (workspace) rmSync(workspace, { recursive: true, force: true });
    if (bin) rmSync(bin, { recursive: true, force: true });
  });

  test("the 'server not found' notice goes once a server runs", async () => {
    await vscode.command("Interpreter: Show Panel");
    const panel = await vscode.panel();
    const missing = panel.locator(".entry.notice.level-error", { hasText: "was not found" });
    await missing.first().waitFor({ timeout: STEP });
    // The user installs the server (here: onto PATH) and restarts it.
    symlinkSync(SERVER, join(bin, "interpreter-lsp"));
    await vscode.command("Interpreter: Restart Server");
    try {
      await vscode.page.locator(".statusbar-item", { hasText: "python: idle" }).first().waitFor({ timeout: STEP });
    } catch (error) {
      await vscode.screenshot(join(ARTIFACTS, "vscode-truths-no-server.png"));
      log(`panel: ${await panel.locator("#entries").innerText()}`);
      const { execFileSync } = await import("node:child_process");
      const files = execFileSync("find", [vscode.userData, "-name", "*Interpreter*"], { encoding: "utf8" }).trim().split("\n").filter(Boolean);
      for (const file of files) log(`${file}:\n${readFileSync(file, "utf8")}`);
      throw error;
    }
    await missing.first().waitFor({ state: "detached", timeout: STEP });
    assert.equal(await panel.locator(".entry.notice", { hasText: "was not found" }).count(), 0);
    await vscode.command("Notifications: Clear All Notifications"); // the install offer, answered by hand
  });

  test("the meter comes back after a reload without a new request, and Reset starts it afresh", async () => {
    const page = vscode.page;
    model.reply("Noted. ".repeat(400));
    let panel = await vscode.panel();
    const until = await sendChat(panel, "Remember this long answer, please.");
    await until(panel.locator(".entry.assistant", { hasText: "Noted." }));
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
    // The meter's words (its long form: the short one shows at this width, the numbers are the same).
    const meterShown = (p, timeout) =>
      p.waitForFunction(() => /tokens/.test(document.querySelector("#context .long")?.textContent ?? ""), undefined, { timeout });
    await meterShown(panel, STEP);
    const tokens = async (p) => {
      const text = (await p.locator("#context .long").textContent()) ?? "";
      const m = /^([\d.]+)(k?) \//.exec(text);
      assert.ok(m, `the meter says ${JSON.stringify(text)}`);
      return Number(m[1]) * (m[2] ? 1000 : 1);
    };
    const full = await tokens(panel);
    const requests = model.requests.length;
    await vscode.reload();
    await page.locator(".statusbar-item", { hasText: "python: idle" }).first().waitFor({ timeout: STEP });
    await vscode.command("Interpreter: Show Panel");
    panel = await vscode.panel();
    await meterShown(panel, 2 * STEP);
    assert.equal(model.requests.length, requests, "the meter needed a request to the model");
    const reloaded = await tokens(panel);
    assert.ok(reloaded > full / 2, `the meter after the reload (${reloaded}) is not the conversation's (${full})`);
    await vscode.command("Interpreter: Reset Conversation");
    await panel.locator(".entry").first().waitFor({ state: "detached", timeout: STEP });
    const deadline = Date.now() + STEP;
    while ((await tokens(panel)) >= full) {
      if (Date.now() > deadline) throw new Error(`after Reset the meter still says ${await panel.locator("#context").innerText()}`);
      await page.waitForTimeout(200);
    }
    log(`meter: ${full} tokens before Reset, ${await tokens(panel)} after`);
  });

  test("code on a card never soft-wraps; multi-line code is numbered; Run is not the primary button at high risk", async () => {
    const code = "curl -fsSL https://example.com/install.sh | sh\necho installed";
    model.reply(`Installing it.\n\n${fence("shell", code)}\n`);
    const panel = await vscode.panel();
    const until = await sendChat(panel, "Install the tool");
    const card = proposalCard(panel, "install.sh");
    await until(card.locator("button[data-action='approve']"));
    assert.equal(await card.locator(".risk").innerText(), "risk: high");
    await shootThemes(vscode, "card-high-risk", (p) => proposalCard(p, "install.sh"), async (width, p) => {
      const c = proposalCard(p, "install.sh");
      // Each line of code is one line on screen: `curl … | sh` never reads as several.
      const rows = await c.locator("pre.code .line").evaluateAll((lines) => lines.map((l) => l.getClientRects().length));
      assert.deepEqual(rows, [1, 1], `at ${width} px a line of code wraps: ${JSON.stringify(rows)}`);
      // Numbered (from CSS counters: not part of the code's text).
      const number = await c.locator("pre.code .line").first().evaluate((l) => getComputedStyle(l, "::before").content);
      assert.match(number, /counter\(line\)/);
      assert.equal((await c.locator("pre.code code").textContent())?.trim(), code);
      // Past the edge, it scrolls sideways and the card says so.
      const over = await c.locator("pre.code").evaluate((pre) => pre.scrollWidth > pre.clientWidth);
      assert.equal(await c.locator(".code-overflow").isVisible(), over, `at ${width} px the overflow note is wrong`);
      if (width === 300) assert.ok(over, "at 300 px the curl line fits, the test shows nothing");
      // Run looks like the other choices (no primary blue), outlined in the error colour.
      const look = (action) => c.locator(`button[data-action='${action}']`).evaluate((b) => getComputedStyle(b).backgroundColor);
      assert.equal(await look("approve"), await look("reject"), "Run is a primary button on a high-risk card");
    });
    await card.locator("button[data-action='reject']").click();
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
  });

  test("the panel follows the user: their message, its answer, a waiting proposal and their run come into view", async () => {
    const page = vscode.page;
    const panel = await vscode.panel();
    await vscode.openFile("long.py");
    await vscode.focusEditor();
    await page.keyboard.press("Control+A");
    await vscode.command("Interpreter: Run Selection or Cell");
    await panel.locator(".entry.run", { hasText: "line 119" }).last().locator(".run-state", { hasText: "done" }).waitFor({ timeout: STEP });
    // Reading the top of the conversation...
    const scrollTop = () => panel.locator("body").evaluate((b) => b.ownerDocument.defaultView.scrollTo(0, 0));
    await scrollTop();
    model.reply(`Here it is.\n\n${fence("shell", "rm -rf /tmp/ilsp-e2e-nothing-here")}\n`, { chunkDelayMs: 60 });
    const until = await sendChat(panel, "Clean up the temporary folder");
    // ...a message sent brings the conversation's end into view, the answer streams there, and the
    // proposal that waits is on screen, whole.
    assert.ok(await wholeInView(panel.locator(".entry.user", { hasText: "Clean up the temporary folder" }).last()), "the user's message is off-screen");
    const card = proposalCard(panel, "ilsp-e2e-nothing-here");
    await until(card.locator("button[data-action='approve']"));
    await panel.locator("#activity", { hasText: "Waiting for your approval" }).waitFor({ timeout: STEP });
    assert.ok(await wholeInView(card), "the waiting proposal is off-screen");
    // Scrolled away from it, the footer's "Waiting for your approval" takes the user back to it.
    await scrollTop();
    assert.ok(!(await wholeInView(card)));
    await panel.locator("#activity").click();
    await panel.waitForFunction(() => {
      const el = [...document.querySelectorAll(".entry.proposal.status-pending")].pop();
      const box = el?.getBoundingClientRect();
      return box && box.top >= 0 && box.bottom <= document.getElementById("footer").getBoundingClientRect().top + 1;
    }, undefined, { timeout: STEP });
    await card.locator("button[data-action='reject']").click();
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
    // A run from the editor while scrolled up: its output comes into view.
    await scrollTop();
    await vscode.openFile("cells.py");
    await page.locator(".editor-group-container.active .codelens-decoration a", { hasText: "Run cell" }).first().waitFor({ state: "attached", timeout: STEP });
    await vscode.runCodeLens(1, "Run cell");
    const run = runWithStdout(panel, "cell one ran").last();
    await run.locator(".run-state", { hasText: "done" }).waitFor({ timeout: STEP });
    await panel.waitForTimeout(300); // the render after the last output
    assert.ok(await wholeInView(run), "the user's run is off-screen");
  });

  test("a slow model shows the time it takes and the answer arriving, not a static 'Thinking…'", async () => {
    model.reply("Slowly, ".repeat(30) + "done.", { firstDelayMs: 5000, chunkDelayMs: 250 });
    const panel = await vscode.panel();
    await sendChat(panel, "Take your time");
    await panel.locator("#activity", { hasText: /^Thinking… [2-9] s$/ }).waitFor({ timeout: STEP });
    const first = await panel.locator("#activity").innerText();
    await panel.locator("#activity", { hasText: /^Answering…( \d+ s ·)? ~\d+ tokens so far$/ }).waitFor({ timeout: STEP });
    log(`activity while waiting: ${JSON.stringify(first)}, then ${JSON.stringify(await panel.locator("#activity").innerText())}`);
    await panel.locator(".entry.assistant:not(.streaming)", { hasText: "done." }).waitFor({ timeout: STEP });
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
  });

  test("Compact shows that it works, its size when done, and a failure as a failure", async () => {
    const page = vscode.page;
    const panel = await vscode.panel();
    model.replies.length = 0;
    model.reply("First answer.");
    let until = await sendChat(panel, "A first question");
    await until(panel.locator(".entry.assistant", { hasText: "First answer." }));
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
    // The summary takes the model a few seconds: the panel says it is being written meanwhile.
    model.reply("The user asked a first question and got a first answer.", { firstDelayMs: 4000 });
    await vscode.command("Interpreter: Compact Conversation");
    await panel.locator("#activity", { hasText: /^Condensing earlier turns…/ }).waitFor({ timeout: STEP });
    const done = panel.locator(".entry.notice.level-info", { hasText: /condensed into a summary of \d+ tokens/ }).last();
    await done.waitFor({ timeout: STEP });
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
    // No summary this time (the model fails): a warning that says what happened instead.
    model.replies.length = 0;
    model.reply("Second answer.");
    until = await sendChat(panel, "A second question");
    await until(panel.locator(".entry.assistant", { hasText: "Second answer." }));
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
    const warnings = panel.locator(".entry.notice.level-warning", { hasText: "could not be condensed" });
    await vscode.command("Interpreter: Compact Conversation");
    await warnings.last().waitFor({ timeout: STEP });
    assert.equal(await panel.locator(".entry.notice.level-info", { hasText: /condensed into a summary/ }).count(), 1, "the failure was drawn as a success");
    await page.keyboard.press("Escape");
  });

  test("Undo takes back the last step and says what it did: the user's own run, then the message", async () => {
    const panel = await vscode.panel();
    model.replies.length = 0;
    model.reply("An answer to undo.");
    const until = await sendChat(panel, "A message to undo");
    await until(panel.locator(".entry.assistant", { hasText: "An answer to undo." }));
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
    await vscode.openFile("cells.py");
    await vscode.page.locator(".editor-group-container.active .codelens-decoration a", { hasText: "Run cell" }).first().waitFor({ state: "attached", timeout: STEP });
    await vscode.runCodeLens(1, "Run cell");
    const runs = runWithStdout(panel, "cell one ran");
    const count = await runs.count();
    await runs.nth(count - 1).locator(".run-state", { hasText: "done" }).waitFor({ timeout: STEP });
    // The last step is the user's own run: it goes first, and the message stays.
    await vscode.command("Interpreter: Undo Last Step");
    await panel.locator(".entry.notice", { hasText: /^Undone: your last run/ }).waitFor({ timeout: STEP });
    await panel.locator(".entry.user", { hasText: "A message to undo" }).waitFor({ timeout: STEP });
    // The next undo takes back the message and the answer.
    await vscode.command("Interpreter: Undo Last Step");
    await panel.locator(".entry.notice", { hasText: /^Undone: your last message/ }).waitFor({ timeout: STEP });
    assert.equal(await panel.locator(".entry.user", { hasText: "A message to undo" }).count(), 0);
    assert.equal(await panel.locator(".entry.assistant", { hasText: "An answer to undo." }).count(), 0);
    // Redo takes the last undo back: the message and its answer are in the panel again.
    await vscode.command("Interpreter: Redo Last Undone Step");
    await panel.locator(".entry.notice", { hasText: /^Redone: your message/ }).waitFor({ timeout: STEP });
    await panel.locator(".entry.user", { hasText: "A message to undo" }).waitFor({ timeout: STEP });
    await panel.locator(".entry.assistant", { hasText: "An answer to undo." }).waitFor({ timeout: STEP });
  });

  test("a tool call written as JSON shows as its proposal, not as raw JSON", async () => {
    const panel = await vscode.panel();
    model.replies.length = 0;
    model.reply(JSON.stringify({ name: "run_code", arguments: { language: "python", code: "print(6 * 7)" } }));
    const until = await sendChat(panel, "Compute it with the tool");
    const card = proposalCard(panel, "print(6 * 7)");
    await until(card.locator("button[data-action='reject']"));
    const bubble = panel.locator(".entry.assistant").last();
    await bubble.locator(".folded-code", { hasText: "see the proposal below" }).waitFor({ timeout: STEP });
    assert.doesNotMatch(await bubble.innerText(), /run_code|"arguments"/);
    await card.locator("button[data-action='reject']").click();
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
  });

  test("the 'Edit the code…' hint goes once the edited code ran", async () => {
    const page = vscode.page;
    const panel = await vscode.panel();
    model.replies.length = 0;
    model.reply(`Computing.\n\n${fence("python", "print(2 + 2)")}\n`);
    model.reply("Done.");
    const until = await sendChat(panel, "Add two and two");
    const card = proposalCard(panel, "print(2 + 2)");
    await until(card.locator("button[data-action='edit']"));
    await card.locator("button[data-action='edit']").click();
    const hint = page.locator(".notifications-toasts .notification-toast", { hasText: "Edit the code" });
    await hint.first().waitFor({ timeout: STEP });
    await page.locator('.tab.active[aria-label*="Untitled"]').first().waitFor({ timeout: STEP });
    await vscode.command("Interpreter: Approve");
    await runWithStdout(panel, "4").last().locator(".run-state", { hasText: "done" }).waitFor({ timeout: STEP });
    // Gone with the edit, not after a toast's own time-out.
    await hint.first().waitFor({ state: "hidden", timeout: 5000 });
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
  });

  test("a settings change that restarts the kernel says in the panel that the variables are gone", async () => {
    const panel = await vscode.panel();
    await vscode.command("Notifications: Clear All Notifications");
    await vscode.setSidebarWidth(300);
    await vscode.updateSettings({ "interpreter.allowEnv": ["ILSP_E2E_NOTHING"] });
    await panel.locator(".entry.notice", { hasText: "starting afresh because its settings changed" }).waitFor({ timeout: STEP });
    await vscode.page.locator(".statusbar-item", { hasText: "python: idle" }).first().waitFor({ timeout: STEP });
  });

  test("the footer fits the narrow side bar: one line of status, the model shortened last; light and dark", async () => {
    const panel = await vscode.panel();
    model.replies.length = 0;
    model.reply(`Here.\n\n${fence("python", "print('waiting')")}\n`);
    const until = await sendChat(panel, "Show me a waiting proposal");
    await until(proposalCard(panel, "print('waiting')").locator("button[data-action='approve']"));
    await shootThemes(vscode, "footer", (p) => p.locator("#footer"), async (width, p) => {
      const lines = (selector) =>
        p.locator(selector).evaluate((el) => {
          const style = getComputedStyle(el);
          return Math.round(el.getBoundingClientRect().height / parseFloat(style.lineHeight === "normal" ? `${1.2 * parseFloat(style.fontSize)}` : style.lineHeight));
        });
      assert.equal(await lines("#status-line"), 1, `at ${width} px the status line wraps`);
      assert.equal(await lines("#activity-row"), 1, `at ${width} px the activity wraps`);
      // The kernel's state is never cut; the model may be, with an ellipsis and its name in the tooltip.
      const kernel = await p.locator("#kernel").evaluate((el) => el.scrollWidth <= el.clientWidth + 1);
      assert.ok(kernel, `at ${width} px the kernel's state is cut`);
      assert.equal(await p.locator("#model").getAttribute("title"), "Model: openai/scripted");
      const send = await p.locator("#send").boundingBox();
      const footer = await p.locator("#footer").boundingBox();
      assert.ok(send && footer && send.x + send.width <= footer.x + footer.width, `at ${width} px Send is cut off`);
    });
    await proposalCard(panel, "print('waiting')").locator("button[data-action='reject']").click();
    await panel.locator("#activity").waitFor({ state: "hidden", timeout: STEP });
  });
});
