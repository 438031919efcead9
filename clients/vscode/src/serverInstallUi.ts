// The managed server install as the user meets it: the offer when no server is found, the progress
// notification while it installs, the update when the extension's version changed, and the command
// "Interpreter: Install or Update the Server". The work itself is serverInstall.ts.

import * as fs from "node:fs";
import * as path from "node:path";
import * as vscode from "vscode";
import { resolveServerCommand, ServerNotFoundError, type ResolveInput, type ServerCommand } from "./serverCommand";
import {
  InstallError,
  MANAGED_DIR,
  installServer,
  installSource,
  managedState,
  pythonCandidates,
  shippedWheel,
  type InstallResult,
  type InstallStep,
  type ManagedState,
} from "./serverInstall";

const STEP_TEXT: Record<InstallStep, string> = {
  python: "Looking for Python 3.10 or newer…",
  venv: "Creating the server's environment",
  pip: "Installing the server and its dependencies from your package index",
  check: "Checking the server…",
};
const STEP_SHARE: Record<InstallStep, number> = { python: 5, venv: 15, pip: 65, check: 10 };

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

function readFile(file: string): string | undefined {
  try {
    return fs.readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
}

export class ServerInstaller {
  private readonly storageDir: string;
  private readonly version: string;
  private readonly wheelDir: string;
  private lastInput: ResolveInput | undefined;
  private installing: Promise<InstallResult | undefined> | undefined;
  private offering = false;

  constructor(
    context: vscode.ExtensionContext,
    private readonly output: vscode.OutputChannel,
    /** Starts the server again (after an install). */
    private readonly restartServer: () => Promise<void>,
  ) {
    this.storageDir = context.globalStorageUri.fsPath;
    const version = (context.extension.packageJSON as { version?: unknown }).version;
    this.version = typeof version === "string" ? version : "0";
    this.wheelDir = path.join(context.extensionPath, "server");
  }

  private get venv(): string {
    return path.join(this.storageDir, MANAGED_DIR);
  }

  private wheel(): string | undefined {
    let names: string[] = [];
    try {
      names = fs.readdirSync(this.wheelDir);
    } catch {
      // a development build without the wheel
    }
    const wheel = shippedWheel(names);
    return wheel && path.join(this.wheelDir, wheel.file);
  }

  /** The user's interpreter.server.installSource: from their own settings only (it chooses what runs). */
  private configuredSource(): unknown {
    return vscode.workspace.getConfiguration("interpreter").inspect("server.installSource")?.globalValue;
  }

  /** What an install would use, or undefined (with the reason) when there is nothing to install from. */
  private source(): { source: string; label: string } | { error: string } {
    try {
      return installSource(this.configuredSource(), this.wheel());
    } catch (error) {
      return { error: error instanceof Error ? error.message : String(error) };
    }
  }

  private state(): ManagedState {
    const source = this.source();
    return managedState({ venv: this.venv, extensionVersion: this.version, wheel: "label" in source ? source.label : undefined, readFile, isExecutable });
  }

  /**
   * The client's server lookup: the setting, beside the selected Python, PATH, then the managed install.
   * A managed install of another extension version is updated first (the user chose it once); when the
   * update fails the old one still serves. Nothing found: ServerNotFoundError, which `offer` answers.
   */
  async resolve(input: ResolveInput): Promise<ServerCommand> {
    this.lastInput = input;
    const state = this.state();
    try {
      return resolveServerCommand({ ...input, managed: state.kind === "current" ? state.command : undefined });
    } catch (error) {
      if (!(error instanceof ServerNotFoundError) || state.kind !== "outdated" || !("source" in this.source())) throw error;
    }
    this.output.appendLine(`The managed server in ${this.venv} is out of date (${state.reason}): updating it.`);
    const result = await this.install("Updating");
    if (result) return { command: result.command[0], args: result.command.slice(1), source: "managed" };
    if (!state.usable) throw new ServerNotFoundError(`The server's environment in ${this.venv} is broken and could not be reinstalled.`);
    this.output.appendLine("Using the installed, older server meanwhile.");
    return { command: state.command[0], args: state.command.slice(1), source: "managed" };
  }

  /** No server was found: one notification that offers the install (instead of a bare error). */
  async offer(error: ServerNotFoundError): Promise<void> {
    if (this.offering || this.installing) return;
    this.offering = true;
    try {
      const source = this.source();
      const canInstall = "source" in source;
      const actions = canInstall ? ["Install", "Settings…"] : ["Settings…"];
      const text = canInstall
        ? `Interpreter: the interpreter-lsp server was not found. Install it into an environment of the extension's own? (Python ≥ 3.10; its dependencies come from your package index.)`
        : `Interpreter: ${error.message} ${source.error}`;
      const choice = await vscode.window.showWarningMessage(text, ...actions);
      if (choice === "Install") await this.installAndRestart();
      else if (choice === "Settings…") await vscode.commands.executeCommand("workbench.action.openSettings", canInstall ? "interpreter.server.command" : "interpreter.server");
    } finally {
      this.offering = false;
    }
  }

  /** "Interpreter: Install or Update the Server": a fresh managed install, then the server restarts. */
  async installAndRestart(): Promise<void> {
    const result = await this.install("Installing");
    if (!result) return;
    await this.restartServer();
    const input = this.lastInput;
    const installed = `interpreter-lsp ${result.stamp.serverVersion} (Python ${result.stamp.pythonVersion})`;
    try {
      const used = input ? resolveServerCommand({ ...input, managed: result.command }) : undefined;
      if (used && used.source !== "managed") {
        void vscode.window.showInformationMessage(
          `Interpreter: ${installed} is installed, but the one from ${used.source === "setting" ? "interpreter.server.command" : used.source === "python" ? "the selected Python" : "PATH"} (${used.command}) comes first.`,
        );
        return;
      }
    } catch {
      // the restart said what went wrong
      return;
    }
    void vscode.window.showInformationMessage(`Interpreter: ${installed} is installed and running.`);
  }

  /** Runs an install with a progress notification; undefined (after one error message) when it failed. */
  private install(verb: "Installing" | "Updating"): Promise<InstallResult | undefined> {
    this.installing ??= this.doInstall(verb).finally(() => {
      this.installing = undefined;
    });
    return this.installing;
  }

  private async doInstall(verb: "Installing" | "Updating"): Promise<InstallResult | undefined> {
    const chosen = this.source();
    if ("error" in chosen) {
      this.output.appendLine(`${verb} the server: ${chosen.error}`);
      void vscode.window.showErrorMessage(`Interpreter: ${chosen.error}`, "Settings…").then((choice) => {
        if (choice) void vscode.commands.executeCommand("workbench.action.openSettings", "interpreter.server.installSource");
      });
      return undefined;
    }
    const wheel = chosen.source;
    const started = Date.now();
    const abort = new AbortController();
    this.output.appendLine(`${verb} the server from ${path.basename(wheel)} into ${this.venv}`);
    try {
      const result = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `Interpreter: ${verb.toLowerCase()} the server`, cancellable: true },
        (progress, token) => {
          token.onCancellationRequested(() => abort.abort());
          let current: InstallStep | undefined;
          return installServer({
            storageDir: this.storageDir,
            wheel,
            label: chosen.label,
            extensionVersion: this.version,
            pythons: pythonCandidates({
              selected: this.lastInput?.pythonPath,
              trusted: vscode.workspace.isTrusted,
              pathValue: process.env.PATH,
              isExecutable,
            }),
            env: process.env,
            models: ["model", "reviewModel"].map((key) => vscode.workspace.getConfiguration("interpreter").get<string>(key)),
            signal: abort.signal,
            log: (line) => this.output.appendLine(line),
            report: (step, detail) => {
              const increment = step !== current ? STEP_SHARE[step] : undefined;
              current = step;
              const text = STEP_TEXT[step];
              progress.report({ message: detail ? `${text.replace(/…$/, "")} (${detail})…` : text.endsWith("…") ? text : `${text}…`, increment });
            },
          });
        },
      );
      const seconds = Math.round((Date.now() - started) / 1000);
      this.output.appendLine(`Installed in ${seconds} s: interpreter-lsp ${result.stamp.serverVersion}, Python ${result.stamp.pythonVersion}.`);
      return result;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.output.appendLine(`${verb} the server failed: ${message}`);
      if (abort.signal.aborted) return undefined; // the user pressed Cancel: no error to show
      if (error instanceof InstallError && error.outputTail) {
        this.output.appendLine("The last lines of its output:");
        this.output.appendLine(error.outputTail);
      }
      void vscode.window.showErrorMessage(`Interpreter: ${verb.toLowerCase()} the server failed. ${message}`, "Show Log").then((choice) => {
        if (choice === "Show Log") this.output.show(true);
      });
      return undefined;
    }
  }
}
