// The status bar item: kernel state and model; a click offers interrupt, restart and reset.

import * as vscode from "vscode";
import type { KernelInfo, KernelStatusParams, StatusResult } from "./protocol";
import { kernelSummary, type StatusDetails } from "./statusText";

export class KernelStatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem("interpreterLsp.kernel", vscode.StatusBarAlignment.Left, 50);
  private readonly kernels = new Map<string, KernelStatusParams>();
  private readonly kernelInfo = new Map<string, KernelInfo>();
  private latest: string | undefined;
  private details: StatusDetails | undefined;
  private serverRunning = false;

  constructor(private readonly onChange: (text: string, tooltip: string) => void) {
    this.item.name = "Interpreter kernel";
    this.item.command = "interpreterLsp.statusMenu";
    this.render();
    this.item.show();
  }

  /** Shows a kernel's new state; true when a kernel just came up (its interpreter and pid are news). */
  kernel(params: KernelStatusParams): boolean {
    const previous = this.kernels.get(params.language)?.state;
    this.kernels.set(params.language, params);
    this.latest = params.language;
    this.render();
    return params.state === "idle" && (previous === undefined || previous === "starting" || previous === "restarting");
  }


  setStatus(status: StatusResult): void {
    const { kernels, ...details } = status;
    this.details = details;
    this.kernelInfo.clear();
    for (const kernel of kernels ?? []) {
      this.kernelInfo.set(kernel.language, kernel);
      // Live kernelStatus notifications are newer than a status answer: only fill in what is unknown.
      if (!this.kernels.has(kernel.language)) {
        this.kernels.set(kernel.language, { language: kernel.language, state: kernel.state });
        this.latest ??= kernel.language;
      }
    }
    this.render();
  }

  setServerRunning(running: boolean): void {
    this.serverRunning = running;
    if (!running) {
      this.kernels.clear();
      this.kernelInfo.clear();
      this.latest = undefined;
      this.details = undefined;
    }
    this.render();
  }

  private render(): void {
    const { text, tooltip } = kernelSummary(this.kernels, this.latest, this.details, this.serverRunning, this.kernelInfo);
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
