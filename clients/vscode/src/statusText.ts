// The status bar's words, as a pure function of what the server said (tested without VS Code).

import type { KernelInfo, KernelState, KernelStatusParams, StatusResult } from "./protocol";

const ICON: Record<KernelState, string> = {
  starting: "$(loading~spin)",
  idle: "$(circle-outline)",
  busy: "$(circle-filled)",
  dead: "$(error)",
  restarting: "$(loading~spin)",
  stopped: "$(circle-slash)",
};

/** What `interpreter.status` said last, minus the kernels (their states come live). */
export type StatusDetails = Omit<StatusResult, "kernels">;

function kernelLine(kernel: KernelStatusParams, info: KernelInfo | undefined): string {
  const where = [info?.interpreter ?? info?.kernel, info?.sandbox && info.sandbox !== "off" ? `sandbox: ${info.sandbox}` : ""]
    .filter(Boolean)
    .join(", ");
  return `${kernel.language}: ${kernel.state}${kernel.message ? ` (${kernel.message})` : ""}${where ? ` — ${where}` : ""}`;
}

function formatCost(cost: number): string {
  return cost > 0 ? `, $${cost.toFixed(cost < 0.01 ? 4 : 2)}` : "";
}

/** The status bar text and tooltip: the most recently changed kernel, the model, and the details. */
export function kernelSummary(
  kernels: ReadonlyMap<string, KernelStatusParams>,
  latest: string | undefined,
  details: StatusDetails | undefined,
  serverRunning: boolean,
  kernelInfo: ReadonlyMap<string, KernelInfo> = new Map(),
): { text: string; tooltip: string } {
  if (!serverRunning) return { text: `$(debug-disconnect) Interpreter: server stopped`, tooltip: "The interpreter-lsp server is not running. Click for actions." };
  const model = details?.model ?? "";
  const modelPart = model ? ` · ${model}` : "";
  const current = latest ? kernels.get(latest) : undefined;
  const text = current
    ? `${ICON[current.state]} ${current.language}: ${current.state}${modelPart}`
    : `$(circle-outline) Interpreter: no kernel yet${modelPart}`;
  const lines = [...kernels.values()].map((k) => kernelLine(k, kernelInfo.get(k.language)));
  const tooltip = [lines.length ? lines.join("\n") : "No kernel started yet."];
  tooltip.push(model ? `Model: ${model}` : "No model configured (interpreter.model).");
  if (details) {
    tooltip.push(details.autoRun ? "Auto-run: on (low-risk code runs without asking)" : "Auto-run: off (every run waits for approval)");
    const usage = details.usage;
    if (usage && usage.promptTokens + usage.completionTokens > 0) {
      tooltip.push(`Tokens: ${usage.promptTokens} in, ${usage.completionTokens} out${formatCost(usage.cost)}`);
    }
    if (details.trusted === false) tooltip.push("Workspace not trusted: nothing runs.");
    for (const error of details.settingsErrors ?? []) tooltip.push(`Settings: ${error}`);
  }
  tooltip.push("Click: interrupt, restart, reset.");
  return { text, tooltip: tooltip.join("\n") };
}
