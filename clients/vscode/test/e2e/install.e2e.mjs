// End-to-end test of the managed server install in a real VS Code (code-server), as a user without the
// server meets it: `interpreter-lsp` is on no PATH and no setting names it, so the extension offers to
// install it; Install makes a venv in the extension's global storage from the wheel inside the .vsix, with
// every dependency from the package index through pip's own configuration (nothing pre-seeded: pip's cache
// is this run's own, empty). Then the server starts from there, a cell runs in its kernel, a reload uses it
// without asking, and a changed extension version updates it.
//
// Run: node --test test/e2e/install.e2e.mjs  (after `npm run package`; scripts/test.d/40-vscode.sh runs it)
// Env: INTERPRETER_LSP_VSIX, INTERPRETER_LSP_ARTIFACTS (default <repo>/test-artifacts).

import assert from "node:assert/strict";
import { existsSync, mkdirSync, symlinkSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync, accessSync, constants } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { EXT_DIR, VsCode } from "./vscode.mjs";

const REPO = resolve(EXT_DIR, "../..");
const VSIX = process.env.INTERPRETER_LSP_VSIX ?? join(EXT_DIR, "interpreter-lsp.vsix");
const ARTIFACTS = process.env.INTERPRETER_LSP_ARTIFACTS ?? join(REPO, "test-artifacts");
const STEP = 60_000;
const INSTALL = 10 * 60_000; // a venv and ~100 packages from the index, on a busy machine

const started = Date.now();
const log = (line) => console.log(`# [${((Date.now() - started) / 1000).toFixed(1)}s] ${line}`);

function isExecutable(file) {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

/** PATH without any folder that holds an interpreter-lsp (the repository's .venv/bin, a pipx bin, ...). */
function pathWithoutServer(value) {
  return (value ?? "")
    .split(delimiter)
    .filter((dir) => dir && !isExecutable(join(dir, "interpreter-lsp")) && !dir.startsWith(join(REPO, ".venv")))
    .join(delimiter);
}

/** An interpreter older than 3.10 on this machine (pyenv's), or undefined. */
function oldPython() {
  const root = join(process.env.PYENV_ROOT ?? join(process.env.HOME ?? "/root", ".pyenv"), "versions");
  const versions = existsSync(root) ? readdirSync(root).filter((v) => /^3\.[6-9]\./.test(v)) : [];
  const version = versions.sort().pop();
  return version && join(root, version, "bin/python3");
}

/**
 * A PATH like this machine's, whose only Python is `python`: one folder of links to every other program
 * on PATH (so code-server and Chromium's wrapper still find theirs), minus Pythons, pyenv and the server.
 */
function pathWithOnly(python, dir) {
  mkdirSync(dir, { recursive: true });
  symlinkSync(python, join(dir, "python3"));
  for (const from of pathWithoutServer(process.env.PATH).split(delimiter)) {
    if (from.includes("pyenv") || !existsSync(from)) continue;
    for (const name of readdirSync(from)) {
      if (/^python|^pip|^pydoc|^idle|^2to3|^interpreter-lsp/.test(name) || existsSync(join(dir, name))) continue;
      if (isExecutable(join(from, name))) symlinkSync(join(from, name), join(dir, name));
    }
  }
  return dir;
}

/** A notification toast whose text matches. */
function toast(page, text) {
  return page.locator(".notifications-toasts .notification-toast", { hasText: text });
}

/** A run entry in the panel whose stdout contains `text`. */
function runWithStdout(panel, text) {
  return panel.locator(".entry.run", { has: panel.locator(".stdout", { hasText: text }) });
}

const SETTINGS = {
  "workbench.startupEditor": "none",
  "telemetry.telemetryLevel": "off",
  "extensions.ignoreRecommendations": true,
  "workbench.tips.enabled": false,
  "chat.commandCenter.enabled": false,
};

describe("VS Code without a server, and only a Python older than 3.10", { timeout: 5 * 60_000, skip: oldPython() ? false : "no Python < 3.10 here" }, () => {
  let vscode;
  let workspace;

  before(async () => {
    workspace = mkdtempSync(join(tmpdir(), "ilsp-ws-oldpy-"));
    vscode = new VsCode({ name: "oldpy", workspace, settings: SETTINGS, vsix: VSIX, trust: true, log });
    vscode.env.PATH = pathWithOnly(oldPython(), join(vscode.root, "bin"));
    delete vscode.env.VIRTUAL_ENV;
    // The server would otherwise take the user's login shell environment (PATH) over this one.
    vscode.env.VSCODE_CLI = "1";
    await vscode.start();
  });

  after(async () => {
    if (vscode?.page) await vscode.screenshot(join(ARTIFACTS, "vscode-install-old-python.png")).catch(() => undefined);
    await vscode?.stop();
    if (workspace) rmSync(workspace, { recursive: true, force: true });
  });

  it("Install says which Python it found and what it needs, and leaves nothing behind", async () => {
    const page = vscode.page;
    const offer = toast(page, "interpreter-lsp server was not found");
    await offer.waitFor({ timeout: STEP });
    await offer.getByRole("button", { name: "Install", exact: true }).click();
    const error = toast(page, "installing the server failed");
    await error.waitFor({ timeout: STEP });
    const text = await error.locator(".notification-list-item-message").innerText();
    log(`error shown: ${text}`);
    assert.match(text, /needs Python 3\.10 or newer/);
    const found = join(vscode.root, "bin/python3");
    assert.ok(new RegExp(`found only (\\S+) \\(3\\.[6-9]\\.\\d+\\)`).exec(text)?.[1] === found, `the message names ${found} and its version: ${text}`);
    assert.equal(await toast(page, "installing the server failed").count(), 1, "one message");
    await toast(page, "Interpreter: installing the server:").waitFor({ state: "hidden", timeout: STEP }); // the progress ended
    const storage = join(vscode.userData, "User/globalStorage/interpreter-lsp.interpreter-lsp");
    assert.deepEqual(existsSync(storage) ? readdirSync(storage) : [], [], "a venv was left behind");
  });
});

describe("VS Code without a server: the managed install", { timeout: 28 * 60_000 }, () => {
  let vscode;
  let workspace;
  let venv;
  let stampFile;

  before(async () => {
    assert.ok(existsSync(VSIX), `no .vsix at ${VSIX}: run npm run package in clients/vscode`);
    workspace = mkdtempSync(join(tmpdir(), "ilsp-ws-install-"));
    // One file per run: after a reload the panel shows the earlier runs again, from the server's history.
    for (const n of [1, 2, 3]) writeFileSync(join(workspace, `where${n}.py`), `import sys\nprint("run ${n}:", sys.executable)\n`);
    vscode = new VsCode({
      name: "install",
      workspace,
      settings: SETTINGS,
      vsix: VSIX,
      trust: true,
      log,
    });
    // The machine as a user without the server has it: not on PATH (python3 still is), no setting, no venv.
    vscode.env.PATH = pathWithoutServer(process.env.PATH);
    delete vscode.env.VIRTUAL_ENV;
    vscode.env.VSCODE_CLI = "1"; // this PATH, not the login shell's
    for (const dir of vscode.env.PATH.split(delimiter)) assert.ok(!isExecutable(join(dir, "interpreter-lsp")), `interpreter-lsp is on PATH in ${dir}`);
    venv = join(vscode.userData, "User/globalStorage/interpreter-lsp.interpreter-lsp/server-venv");
    stampFile = join(venv, "interpreter-lsp-install.json");
    mkdirSync(ARTIFACTS, { recursive: true });
    await vscode.start();
  });

  after(async () => {
    if (vscode?.page) await vscode.screenshot(join(ARTIFACTS, "vscode-install-final.png")).catch(() => undefined);
    await vscode?.stop();
    if (workspace) rmSync(workspace, { recursive: true, force: true });
  });

  /** Waits for a progress notification to come and go, logging each message it shows. */
  async function watchProgress(title) {
    const page = vscode.page;
    const progress = toast(page, title);
    await progress.waitFor({ timeout: STEP });
    const t0 = Date.now();
    const messages = [];
    let shot = false;
    while (await progress.isVisible()) {
      const text = (await progress.locator(".notification-list-item-message").innerText().catch(() => "")).trim();
      if (text && text !== messages[messages.length - 1]) {
        messages.push(text);
        log(`progress: ${text}`);
        if (!shot && /dependencies/.test(text)) {
          shot = true;
          await vscode.screenshot(join(ARTIFACTS, "vscode-install-progress.png")).catch(() => undefined);
        }
      }
      assert.ok(Date.now() - t0 < INSTALL, `the install did not end within ${INSTALL / 60_000} minutes`);
      await progress.waitFor({ state: "hidden", timeout: 2000 }).catch(() => undefined);
    }
    const seconds = (Date.now() - t0) / 1000;
    return { messages, seconds };
  }

  /** Runs where<n>.py; its output: the kernel's interpreter. */
  async function runWhere(n) {
    await vscode.openFile(`where${n}.py`);
    await vscode.focusEditor();
    await vscode.page.keyboard.press("Control+A");
    const t0 = Date.now();
    await vscode.command("Interpreter: Run Selection or Cell");
    const panel = await vscode.panel();
    const run = runWithStdout(panel, `run ${n}:`).last();
    await run.locator(".run-state", { hasText: "done" }).waitFor({ timeout: STEP });
    log(`cell ran in ${Date.now() - t0} ms`);
    return (await run.locator(".stdout").innerText()).trim().replace(/^run \d: /, "");
  }

  it("offers the install, installs from the package index with progress, and starts the server from it", async () => {
    const page = vscode.page;
    const offer = toast(page, "interpreter-lsp server was not found");
    await offer.waitFor({ timeout: STEP });
    assert.match(await offer.innerText(), /environment of the extension's own/);
    assert.ok(!existsSync(venv), "nothing is installed before the user says so");
    await offer.getByRole("button", { name: "Install", exact: true }).click();
    const { messages, seconds } = await watchProgress("Interpreter: installing the server");
    const lib = join(venv, "lib", readdirSync(join(venv, "lib"))[0], "site-packages");
    const packages = readdirSync(lib).filter((n) => n.endsWith(".dist-info")).length;
    log(`install took ${seconds.toFixed(0)} s (${packages} packages)`);
    assert.ok(messages.some((m) => /Creating the server's environment \(Python 3\.\d+/.test(m)), messages.join(" | "));
    assert.ok(messages.some((m) => /Installing the server and its dependencies/.test(m)), messages.join(" | "));
    assert.equal(await toast(page, "failed").count(), 0, "the install reported a failure");
    const stamp = JSON.parse(readFileSync(stampFile, "utf8"));
    assert.equal(stamp.serverVersion, JSON.parse(readFileSync(join(EXT_DIR, "package.json"), "utf8")).version);
    assert.match(stamp.wheel, /^interpreter_lsp-.+-py3-none-any\.whl$/);
    // The server is up: the kernel's state shows in the status bar, and a cell runs in the kernel of the
    // server's own interpreter (no workspace .venv): the managed venv's.
    await page.locator(".statusbar-item", { hasText: "python: idle" }).first().waitFor({ timeout: 3 * STEP });
    log("server up after the install");
    // Said when it worked, and the panel's "not found" went with the problem.
    await toast(page, "is installed and running").waitFor({ timeout: STEP });
    assert.match(await toast(page, "is installed and running").innerText(), /interpreter-lsp \S+ \(Python 3\.\d+\.\d+\) is installed and running/);
    assert.equal(await runWhere(1), join(venv, "bin/python"));
    const panel = await vscode.panel();
    assert.equal(await panel.locator(".entry.notice", { hasText: "was not found" }).count(), 0, "the 'not found' notice outlived the install");
  });

  it("a second activation uses the managed server without asking", async () => {
    const installedAt = JSON.parse(readFileSync(stampFile, "utf8")).installedAt;
    const t0 = Date.now();
    await vscode.reload();
    await vscode.page.locator(".statusbar-item", { hasText: "python: idle" }).first().waitFor({ timeout: 3 * STEP });
    log(`server up ${Date.now() - t0} ms after the reload`);
    assert.equal(await runWhere(2), join(venv, "bin/python"));
    assert.equal(await toast(vscode.page, "was not found").count(), 0, "the install was offered again");
    assert.equal(JSON.parse(readFileSync(stampFile, "utf8")).installedAt, installedAt, "it was installed again");
  });

  it("a new extension version updates the install on activation", async () => {
    // As if the install had been made by an earlier version of the extension.
    const stamp = JSON.parse(readFileSync(stampFile, "utf8"));
    writeFileSync(stampFile, JSON.stringify({ ...stamp, extensionVersion: "0.0.1" }));
    await vscode.reload();
    const { seconds } = await watchProgress("Interpreter: updating the server");
    log(`update took ${seconds.toFixed(0)} s (pip's cache warm)`);
    await vscode.page.locator(".statusbar-item", { hasText: "python: idle" }).first().waitFor({ timeout: 3 * STEP });
    const updated = JSON.parse(readFileSync(stampFile, "utf8"));
    assert.equal(updated.extensionVersion, stamp.extensionVersion);
    assert.notEqual(updated.installedAt, stamp.installedAt);
    assert.equal(await runWhere(3), join(venv, "bin/python"));
  });
});
