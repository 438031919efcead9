// The status bar item: kernel state and model; a click offers interrupt, restart and reset.

import * as vscode from "vscode";
import type { AgentWaiting, ContextUse, KernelInfo, KernelStatusParams, ProposalParams, StatusResult } from "./protocol";
import { agentsWaitingSummary, contextDetails, contextLine, kernelSummary, type ServerState, type StatusDetails } from "./statusText";

/** What the panel's status line shows: the status bar's words, and the context use on their own. */
export interface StatusLine {
  text: string;
  /** The model, on its own: the panel's narrow footer shortens it, never the kernel's state. */
  model: string;
  tooltip: string;
  context: string;
  contextTooltip: string;
}

export class KernelStatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem("interpreterLsp.kernel", vscode.StatusBarAlignment.Left, 50);
  /** Shown only while another agent's proposal (over MCP) waits for a decision. */
  private readonly agentItem = vscode.window.createStatusBarItem("interpreterLsp.agents", vscode.StatusBarAlignment.Left, 49);
  /** Other agents' proposals waiting here, by proposal id: from proposals as they come, and each status. */
  private readonly agents = new Map<string, AgentWaiting>();
  private readonly kernels = new Map<string, KernelStatusParams>();
  private readonly kernelInfo = new Map<string, KernelInfo>();
  private latest: string | undefined;
  private details: StatusDetails | undefined;
  private liveContext: ContextUse | undefined;
  private server: ServerState = "starting";
  /** While the item's menu is open its tooltip is off: the pointer still rests on the item. */
  private tooltipOff = false;

  constructor(private readonly onChange: (line: StatusLine) => void) {
    this.item.name = "Interpreter kernel";
    this.item.command = "interpreterLsp.statusMenu";
    this.agentItem.name = "Agent waiting for approval";
    this.agentItem.command = "interpreterLsp.showPanel";
    this.agentItem.backgroundColor = new vscode.ThemeColor("statusBarItem.warningBackground");
    this.render();
    this.item.show();
  }

  /** A proposal arrived: another agent's that waits is shown until it is decided. */
  proposal(params: ProposalParams): void {
    if (params.origin !== "agent" || params.autoRun) return;
    this.agents.set(params.proposalId, {
      proposalId: params.proposalId, agent: params.agent || "an agent", language: params.language, since: params.created ?? "",
    });
    this.renderAgents();
  }

  /** A proposal was decided, written into a document or expired: it no longer waits. */
  proposalDone(proposalId: string): void {
    if (this.agents.delete(proposalId)) this.renderAgents();
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
    if (status.agentsWaiting) {
      // The server's list is the truth (a proposal may have been decided in another client meanwhile).
      this.agents.clear();
      for (const waiting of status.agentsWaiting) this.agents.set(waiting.proposalId, waiting);
      this.renderAgents();
    }
    // The status answer is as new as anything a turn said before it was asked.
    if (details.context) this.liveContext = undefined;
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

  /** The conversation was reset, undone or redone: the last turn's numbers no longer hold. */
  clearContext(): void {
    this.liveContext = undefined;
    if (this.details) this.details = { ...this.details, context: undefined };
    this.render();
  }

  /** A turn's context use (turnStatus `context`), newer than the last status answer. */
  setContext(context: ContextUse): void {
    this.liveContext = context;
    this.render();
  }

  /**
   * Runs `menu` (the item's quick pick) with the tooltip off, and turns it back on only after the pointer
   * has had time to move away: a tooltip must not hang over the panel's input once the menu was used.
   */
  async withoutTooltip<T>(menu: () => Thenable<T>): Promise<T> {
    this.tooltipOff = true;
    this.render();
    try {
      return await menu();
    } finally {
      setTimeout(() => {
        this.tooltipOff = false;
        this.render();
      }, 1500);
    }
  }

  setServerState(state: ServerState): void {
    this.server = state;
    if (state !== "running") {
      this.kernels.clear();
      this.kernelInfo.clear();
      this.latest = undefined;
      this.details = undefined;
      this.liveContext = undefined;
      this.agents.clear();
      this.renderAgents();
    }
    this.render();
  }

  private renderAgents(): void {
    const summary = agentsWaitingSummary([...this.agents.values()]);
    if (!summary) {
      this.agentItem.hide();
      return;
    }
    this.agentItem.text = summary.text;
    this.agentItem.tooltip = summary.tooltip;
    this.agentItem.show();
  }

  private render(): void {
    const { text, tooltip } = kernelSummary(this.kernels, this.latest, this.details, this.server, this.kernelInfo, this.liveContext);
    this.item.text = text;
    this.item.tooltip = this.tooltipOff ? undefined : tooltip;
    const dead = this.latest !== undefined && this.kernels.get(this.latest)?.state === "dead";
    this.item.backgroundColor = dead ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
    const context = this.server === "running" ? (this.liveContext ?? this.details?.context) : undefined;
    // The panel shows the context use on its own, so the kernel part drops it.
    const plain = text.replace(/\$\([^)]*\)\s*/g, "");
    const usage = contextLine(context);
    const model = this.server === "running" ? (this.details?.model ?? "") : "";
    let kernelText = usage ? plain.replace(` · ${usage}`, "") : plain;
    if (model) kernelText = kernelText.replace(` · ${model}`, "");
    this.onChange({
      text: kernelText,
      model,
      tooltip,
      context: usage,
      contextTooltip: contextDetails(context).join("\n"),
    });
  }

  dispose(): void {
    this.item.dispose();
    this.agentItem.dispose();
  }
}
