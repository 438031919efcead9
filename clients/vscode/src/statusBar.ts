// The status bar item: kernel state and model; a click offers interrupt, restart and reset.

import * as vscode from "vscode";
import type { KernelState, KernelStatusParams } from "./protocol";

const ICON: Record<KernelState, string> = {
  starting: "$(loading~spin)",
  idle: "$(circle-outline)",
  busy: "$(circle-filled)",
  dead: "$(error)",
  restarting: "$(loading~spin)",
  stopped: "$(circle-slash)",
};

/** The status bar text for the kernels' states: the most recently changed one, plus the model. */
export function kernelSummary(
  kernels: ReadonlyMap<string, KernelStatusParams>,
  latest: string | undefined,
  model: string,
  serverRunning: boolean,
): { text: string; tooltip: string } {
  const modelPart = model ? ` · ${model}` : "";
  if (!serverRunning) return { text: `$(debug-disconnect) Interpreter: server stopped`, tooltip: "The interpreter-lsp server is not running. Click for actions." };
  const current = latest ? kernels.get(latest) : undefined;
  const text = current
    ? `${ICON[current.state]} ${current.language}: ${current.state}${modelPart}`
    : `$(circle-outline) Interpreter: no kernel yet${modelPart}`;
  const lines = [...kernels.values()].map((k) => `${k.language}: ${k.state}${k.message ? ` (${k.message})` : ""}`);
  const tooltip = [lines.length ? lines.join("\n") : "No kernel started yet.", model ? `Model: ${model}` : "No model configured (interpreter.model).", "Click: interrupt, restart, reset."].join("\n");
  return { text, tooltip };
}

export class KernelStatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem("interpreterLsp.kernel", vscode.StatusBarAlignment.Left, 50);
  private readonly kernels = new Map<string, KernelStatusParams>();
  private latest: string | undefined;
  private model = "";
  private serverRunning = false;

  constructor(private readonly onChange: (text: string, tooltip: string) => void) {
    this.item.name = "Interpreter kernel";
    this.item.command = "interpreterLsp.statusMenu";
    this.render();
    this.item.show();
  }

  kernel(params: KernelStatusParams): void {
    this.kernels.set(params.language, params);
    this.latest = params.language;
    this.render();
  }

  get hasModel(): boolean {
    return this.model !== "";
  }

  setModel(model: string): void {
    this.model = model;
    this.render();
  }

  setServerRunning(running: boolean): void {
    this.serverRunning = running;
    if (!running) {
      this.kernels.clear();
      this.latest = undefined;
    }
    this.render();
  }

  private render(): void {
    const { text, tooltip } = kernelSummary(this.kernels, this.latest, this.model, this.serverRunning);
    this.item.text = text;
    this.item.tooltip = tooltip;
    const dead = this.latest !== undefined && this.kernels.get(this.latest)?.state === "dead";
    this.item.backgroundColor = dead ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
    this.onChange(text.replace(/\$\([^)]*\)\s*/g, ""), tooltip);
  }

  dispose(): void {
    this.item.dispose();
  }
}
