// Drives a real VS Code (code-server 4.100.3, i.e. VS Code 1.100.3) in headless Debian Chromium through
// playwright-core, following shared practice: its own user-data, extensions and XDG folders, a free
// 127.0.0.1 port, the process group killed on every exit path.

import { spawn, execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const EXT_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const TOOLS = join(EXT_DIR, ".vscode-test/tools");
const CODE_SERVER = join(TOOLS, "node_modules/.bin/code-server");
const requireTool = createRequire(join(TOOLS, "package.json"));

/** A free TCP port on 127.0.0.1. @returns {Promise<number>} */
export function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolvePort(typeof address === "object" && address ? address.port : 0));
    });
  });
}

const liveGroups = new Set();
function killGroups() {
  for (const pid of liveGroups) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  liveGroups.clear();
}
process.on("exit", killGroups);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    killGroups();
    process.exit(130);
  });
}

export class VsCode {
  /**
   * @param {{name: string, workspace: string, settings: object, vsix: string, trust: boolean, log: (s: string) => void, userConfig?: string, env?: object}} options
   *   userConfig: the server's user file (~/.config/interpreter-lsp/config.toml) of this run
   */
  constructor(options) {
    this.options = options;
    // Short and under /tmp: kernels put unix sockets under TMPDIR, and socket paths have a length limit.
    this.root = mkdtempSync(join(tmpdir(), `ilsp-e2e-${options.name}-`));
    this.env = {
      ...process.env,
      XDG_CONFIG_HOME: join(this.root, "config"),
      XDG_DATA_HOME: join(this.root, "data"),
      XDG_CACHE_HOME: join(this.root, "cache"),
      // The server keeps conversation history here: per test run, never in the user's home.
      XDG_STATE_HOME: join(this.root, "state"),
      TMPDIR: join(this.root, "tmp"),
      ...options.env,
    };
    for (const dir of ["config", "data", "cache", "state", "tmp", "user/User", "extensions", "profile"]) {
      mkdirSync(join(this.root, dir), { recursive: true });
    }
    this.userData = join(this.root, "user");
    this.extensions = join(this.root, "extensions");
    this.logLines = [];
  }

  async start() {
    const { log } = this.options;
    writeFileSync(join(this.userData, "User/settings.json"), JSON.stringify(this.options.settings, null, 2));
    if (this.options.userConfig !== undefined) {
      mkdirSync(join(this.env.XDG_CONFIG_HOME, "interpreter-lsp"), { recursive: true });
      writeFileSync(join(this.env.XDG_CONFIG_HOME, "interpreter-lsp/config.toml"), this.options.userConfig);
    }
    const t0 = Date.now();
    execFileSync(CODE_SERVER, ["--user-data-dir", this.userData, "--extensions-dir", this.extensions, "--install-extension", this.options.vsix], {
      env: this.env,
      stdio: "pipe",
    });
    log(`installed the .vsix in ${Date.now() - t0} ms`);
    this.port = await freePort();
    const args = [
      "--bind-addr", `127.0.0.1:${this.port}`, "--auth", "none",
      "--user-data-dir", this.userData, "--extensions-dir", this.extensions,
      "--disable-telemetry", "--disable-update-check", "--disable-getting-started-override", "--disable-file-downloads",
    ];
    // A trusted run turns workspace trust off (everything is trusted); an untrusted run keeps VS Code's
    // default, where the user is asked and answers no.
    if (this.options.trust) args.push("--disable-workspace-trust");
    this.process = spawn(CODE_SERVER, [...args, this.options.workspace], { env: this.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    liveGroups.add(this.process.pid);
    for (const stream of [this.process.stdout, this.process.stderr]) {
      stream.setEncoding("utf8");
      stream.on("data", (d) => this.logLines.push(d));
    }
    await this.waitHealthy(30_000);
    const { chromium } = requireTool("playwright-core");
    const executablePath = execFileSync("sh", ["-c", "command -v chromium"], { encoding: "utf8" }).trim();
    this.context = await chromium.launchPersistentContext(join(this.root, "profile"), {
      executablePath,
      headless: true,
      env: this.env,
      viewport: { width: 1500, height: 950 },
      args: [
        "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--disable-breakpad",
      ],
    });
    // Every text the Interpreter's status bar item shows, in order, from the first page load on (a
    // MutationObserver on the status bar: states too short to poll for are seen too).
    await this.context.addInitScript(() => {
      const seen = [];
      Object.defineProperty(window, "__interpreterStatusTexts", { value: seen });
      const record = () => {
        for (const item of document.querySelectorAll(".statusbar-item")) {
          const text = (item.textContent ?? "").trim();
          if (/^(Interpreter:|python:)/.test(text) && seen[seen.length - 1] !== text) seen.push(text);
        }
      };
      const start = () => {
        const bar = document.getElementById("workbench.parts.statusbar");
        if (!bar) return false;
        record();
        new MutationObserver(record).observe(bar, { subtree: true, childList: true, characterData: true });
        return true;
      };
      const waiting = new MutationObserver(() => {
        if (start()) waiting.disconnect();
      });
      document.addEventListener("DOMContentLoaded", () => {
        if (!start()) waiting.observe(document.body, { childList: true, subtree: true });
      });
    });
    this.page = this.context.pages()[0] ?? (await this.context.newPage());
    this.page.setDefaultTimeout(30_000);
    await this.page.goto(`http://127.0.0.1:${this.port}/?folder=${encodeURIComponent(this.options.workspace)}`);
    await this.page.locator(".monaco-workbench").waitFor({ timeout: 60_000 });
    log(`workbench loaded in ${Date.now() - t0} ms`);
  }

  async waitHealthy(timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    let lastError;
    while (Date.now() < deadline) {
      if (this.process.exitCode !== null) throw new Error(`code-server exited: ${this.logLines.join("")}`);
      try {
        const response = await fetch(`http://127.0.0.1:${this.port}/healthz`, { signal: AbortSignal.timeout(1000) });
        if (response.ok) return;
      } catch (error) {
        lastError = error;
      }
      // Wait for the next chunk of code-server's log (it logs when it listens), bounded.
      await new Promise((r) => {
        const t = setTimeout(r, 250);
        this.process.stdout.once("data", () => {
          clearTimeout(t);
          r(undefined);
        });
      });
    }
    throw new Error(`code-server did not answer /healthz within ${timeoutMs} ms: ${lastError}`);
  }

  /** Runs a command from the palette (F1), retrying while the extension's contributions register. */
  async command(title) {
    const page = this.page;
    for (let attempt = 0; attempt < 20; attempt++) {
      await page.keyboard.press("F1");
      const input = page.locator(".quick-input-widget input");
      await input.waitFor({ state: "visible", timeout: 10_000 });
      await input.fill(`>${title}`);
      const row = page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first();
      try {
        await row.waitFor({ state: "visible", timeout: 3000 });
      } catch {
        await page.keyboard.press("Escape");
        continue;
      }
      await row.click();
      return;
    }
    throw new Error(`the command palette never offered "${title}"`);
  }

  /** Opens a workspace file with Quick Open and waits for its editor. */
  async openFile(name) {
    const page = this.page;
    await page.keyboard.press("Control+P");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible" });
    await input.fill(name);
    // The row of exactly this file, clicked: Enter could take the first row of a list not yet filtered
    // (the recently opened files), and a longer name may contain this one.
    const exact = new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`);
    const row = page.locator(".quick-input-list .monaco-list-row", { has: page.locator(".label-name", { hasText: exact }) }).first();
    await row.waitFor();
    await row.click();
    await page.locator(`.tab.active[aria-label*="${name}"]`).first().waitFor();
    await this.editorLines().first().waitFor();
  }

  /**
   * Runs the code lens `title` of a 1-based line of the active editor, as a keyboard user does ("Show
   * CodeLens Commands for Current Line"): the same command as a click on the lens, without depending on
   * the lens being laid out on screen.
   */
  async runCodeLens(line, title) {
    const page = this.page;
    await this.focusEditor();
    await page.keyboard.press("Control+G");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ state: "visible" });
    await input.fill(`:${line}`);
    await page.keyboard.press("Enter");
    await input.waitFor({ state: "hidden" });
    await this.command("Show CodeLens Commands for Current Line");
    const row = page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first();
    await row.waitFor({ state: "visible", timeout: 30_000 });
    await row.click();
  }

  /** Reloads the window (Developer: Reload Window) and waits for the workbench to come back. */
  async reload() {
    const loaded = this.page.waitForEvent("load", { timeout: 60_000 });
    loaded.catch(() => undefined); // awaited below; a failure before then must not go unhandled
    await this.command("Developer: Reload Window");
    await loaded;
    await this.page.locator(".monaco-workbench").waitFor({ timeout: 60_000 });
  }

  /** The modal dialog VS Code shows (showInformationMessage with modal: true). */
  dialog() {
    return this.page.locator(".monaco-dialog-box");
  }

  /** The input box of vscode.window.showInputBox, found by its title. */
  inputBox(title) {
    return this.page.locator(".quick-input-widget", { has: this.page.locator(".quick-input-title", { hasText: title }) });
  }

  editorLines() {
    return this.page.locator(".editor-group-container.active .monaco-editor .view-lines");
  }

  /** The active editor's text as the user sees it. */
  async editorText() {
    // Monaco positions its lines absolutely and reuses their elements: DOM order is not line order.
    const text = await this.editorLines()
      .first()
      .evaluate((root) =>
        [...root.querySelectorAll(".view-line")]
          .map((line) => ({ top: parseFloat(line.style.top) || 0, text: line.textContent ?? "" }))
          .sort((a, b) => a.top - b.top)
          .map((line) => line.text)
          .join("\n"),
      );
    return text.replace(/\u00a0/g, " ");
  }

  async focusEditor() {
    await this.editorLines().first().click();
  }

  /** The panel's webview frame (an iframe inside an iframe), found by its root element. */
  async panel(timeoutMs = 30_000) {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      for (const frame of this.page.frames()) {
        try {
          if (await frame.$("#interpreter-root")) return frame;
        } catch {
          // a frame that navigated away meanwhile
        }
      }
      await this.page.waitForEvent("framenavigated", { timeout: 1000 }).catch(() => undefined);
    }
    throw new Error("the Interpreter panel's webview did not appear");
  }

  /** A screenshot of the panel's webview, as the user sees it. */
  async screenshotPanel(path) {
    mkdirSync(dirname(path), { recursive: true });
    const webview = this.page.locator("iframe.webview.ready").first();
    await webview.screenshot({ path });
  }

  async screenshot(path) {
    mkdirSync(dirname(path), { recursive: true });
    await this.page.screenshot({ path });
  }

  /** The texts the Interpreter's status bar item showed since this page loaded, in order. */
  statusTexts() {
    return this.page.evaluate(() => [...(window.__interpreterStatusTexts ?? [])]);
  }

  /**
   * Changes the user's settings as a user would: in the settings.json editor, saved. (code-server does not
   * notice the file being written behind its back.)
   */
  async updateSettings(patch) {
    const file = join(this.userData, "User/settings.json");
    const settings = { ...JSON.parse(readFileSync(file, "utf8")), ...patch };
    // One line: nothing for the editor's auto-indent or auto-closing to add to.
    const text = JSON.stringify(settings);
    await this.command("Preferences: Open User Settings (JSON)");
    await this.page.locator('.tab.active[aria-label*="settings.json"]').first().waitFor();
    await this.focusEditor();
    await this.page.keyboard.press("Control+A");
    await this.page.keyboard.press("Delete");
    await this.page.keyboard.insertText(text);
    await this.page.keyboard.press("Control+S");
    const saved = () => {
      try {
        return JSON.stringify(JSON.parse(readFileSync(file, "utf8"))) === text;
      } catch {
        return false;
      }
    };
    const deadline = Date.now() + 30_000;
    while (!saved()) {
      if (Date.now() > deadline) throw new Error(`settings.json was not saved as asked: ${readFileSync(file, "utf8")}`);
      await this.page.waitForTimeout(200);
    }
    await this.command("View: Close Editor");
  }

  /** Drags the side bar's edge until the side bar (where the panel is) is `width` pixels wide. */
  async setSidebarWidth(width) {
    const sidebar = this.page.locator(".part.sidebar").first();
    for (let attempt = 0; attempt < 4; attempt++) {
      const box = await sidebar.boundingBox();
      if (!box) throw new Error("the side bar is not shown");
      if (Math.round(box.width) === width) return;
      const x = box.x + box.width;
      const y = box.y + box.height / 2;
      await this.page.mouse.move(x, y);
      await this.page.mouse.down();
      await this.page.mouse.move(x + (width - box.width), y, { steps: 5 });
      await this.page.mouse.up();
    }
    const box = await sidebar.boundingBox();
    if (Math.round(box?.width ?? 0) !== width) throw new Error(`the side bar is ${box?.width} px wide, not ${width}`);
  }

  statusBar() {
    return this.page.locator(".statusbar-item", { hasText: /python:|Interpreter:/ }).first();
  }

  async stop() {
    await this.context?.close().catch(() => undefined);
    if (this.process?.pid) {
      try {
        process.kill(-this.process.pid, "SIGTERM");
      } catch {
        // already gone
      }
      const exited = new Promise((r) => this.process.once("exit", r));
      const timeout = new Promise((r) => setTimeout(r, 5000));
      await Promise.race([exited, timeout]);
      try {
        process.kill(-this.process.pid, "SIGKILL");
      } catch {
        // already gone
      }
      liveGroups.delete(this.process.pid);
    }
    rmSync(this.root, { recursive: true, force: true });
  }
}
