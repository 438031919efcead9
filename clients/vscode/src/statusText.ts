// The status bar's words, as a pure function of what the server said (tested without VS Code).

import type { AgentWaiting, ContextUse, ExportNotebookResult, KernelInfo, KernelState, KernelStatusParams, StatusResult, UndoResult } from "./protocol";

/** Where the server process is: being started, running, or stopped (crashed, or stopped by the user). */
export type ServerState = "starting" | "running" | "stopped";

const ICON: Record<KernelState, string> = {
  starting: "$(loading~spin)",
  idle: "$(circle-outline)",
  busy: "$(circle-filled)",
  dead: "$(error)",
  restarting: "$(loading~spin)",
  stopped: "$(circle-slash)",
};

/** What `interpreter.status` said last, minus the kernels (their states come live). */
export type StatusDetails = Partial<Omit<StatusResult, "kernels">>;

function kernelLine(kernel: KernelStatusParams, info: KernelInfo | undefined): string {
  const remote = info?.gateway ? `${info.kernel ?? "kernel"} on ${info.gateway}` : undefined;
  const where = [info?.interpreter ?? remote ?? info?.kernel, info?.sandbox && info.sandbox !== "off" ? `sandbox: ${info.sandbox}` : ""]
    .filter(Boolean)
    .join(", ");
  const limits = info?.limits ? `\n  limits: ${info.limits}` : "";
  return `${kernel.language}: ${kernel.state}${kernel.message ? ` (${kernel.message})` : ""}${where ? ` — ${where}` : ""}${limits}`;
}

function formatCost(cost: number): string {
  return cost > 0 ? `, $${cost.toFixed(cost < 0.01 ? 4 : 2)}` : "";
}

/** A token count in a few characters: 812, 12.3k, 128k, 1.2M. */
export function formatTokens(n: number): string {
  if (!Number.isFinite(n) || n < 0) return "?";
  if (n < 1000) return String(Math.round(n));
  const [value, unit] = n < 1_000_000 ? [n / 1000, "k"] : [n / 1_000_000, "M"];
  const text = value < 100 ? value.toFixed(1) : value.toFixed(0);
  return `${text.replace(/\.0$/, "")}${unit}`;
}

/** "12.3k / 128k tokens · $0.04": how full the model's context is, and what the conversation cost. */
export function contextLine(context: ContextUse | undefined): string {
  if (!context || typeof context.tokens !== "number" || typeof context.window !== "number") return "";
  const cost = context.costKnown && context.cost > 0 ? ` · $${context.cost.toFixed(context.cost < 0.01 ? 4 : 2)}` : "";
  return `${formatTokens(context.tokens)} / ${formatTokens(context.window)} tokens${cost}`;
}

/** The tooltip's lines about the context: the counts in full, where the window came from, the cost. */
export function contextDetails(context: ContextUse | undefined): string[] {
  if (!context || typeof context.tokens !== "number" || typeof context.window !== "number") return [];
  const source = { setting: "from interpreter.contextWindow", model: "the model's", guess: "a guess: set interpreter.contextWindow" };
  const where = context.windowSource ? ` (${source[context.windowSource]})` : "";
  const share = context.window > 0 ? ` (${Math.round((100 * context.tokens) / context.window)}%)` : "";
  const lines = [`Context: ${context.tokens.toLocaleString("en")} of ${context.window.toLocaleString("en")} tokens${share}; window${where}`];
  lines.push(context.costKnown ? `Cost of this conversation: $${context.cost.toFixed(context.cost < 0.01 ? 4 : 2)}` : "Cost: unknown for this model");
  if (context.compactions) lines.push(`Earlier turns condensed ${context.compactions === 1 ? "once" : `${context.compactions} times`}`);
  return lines;
}

/** The status bar text and tooltip: the most recently changed kernel, the model, and the details. */
export function kernelSummary(
  kernels: ReadonlyMap<string, KernelStatusParams>,
  latest: string | undefined,
  details: StatusDetails | undefined,
  server: ServerState | boolean,
  kernelInfo: ReadonlyMap<string, KernelInfo> = new Map(),
  liveContext?: ContextUse,
): { text: string; tooltip: string } {
  const state: ServerState = server === true ? "running" : server === false ? "stopped" : server;
  if (state === "starting") return { text: `$(loading~spin) Interpreter: starting…`, tooltip: "The interpreter-lsp server is starting." };
  if (state === "stopped") return { text: `$(debug-disconnect) Interpreter: server stopped`, tooltip: "The interpreter-lsp server is not running. Click for actions." };
  const model = details?.model ?? "";
  const context = liveContext ?? details?.context;
  const usage = contextLine(context);
  const modelPart = `${model ? ` · ${model}` : ""}${usage ? ` · ${usage}` : ""}`;
  const current = latest ? kernels.get(latest) : undefined;
  // In Restricted Mode nothing runs and no kernel starts: the status bar says so.
  const restricted = details?.trusted === false;
  const text = current
    ? `${ICON[current.state]} ${current.language}: ${current.state}${modelPart}`
    : restricted
      ? `$(workspace-untrusted) Interpreter: restricted${modelPart}`
      : `$(circle-outline) Interpreter: no kernel yet${modelPart}`;
  const lines = [...kernels.values()].map((k) => kernelLine(k, kernelInfo.get(k.language)));
  const tooltip = [lines.length ? lines.join("\n") : "No kernel started yet."];
  const modelSource = details?.settingsSources?.model;
  const from = modelSource && modelSource !== "default" ? ` (from ${modelSource})` : "";
  tooltip.push(model ? `Model: ${model}${from}` : "No model configured (interpreter.model).");
  if (details) {
    tooltip.push(details.autoRun ? "Auto-run: on (low-risk code runs without asking)" : "Auto-run: off (every run waits for approval)");
    const usage = details.usage;
    if (usage && usage.promptTokens + usage.completionTokens > 0) {
      tooltip.push(`Tokens: ${usage.promptTokens} in, ${usage.completionTokens} out${formatCost(usage.cost)}`);
    }
    tooltip.push(...contextDetails(context));
    if (details.trusted === false) tooltip.push("Workspace not trusted: nothing runs (Restricted Mode). Trust it with Workspaces: Manage Workspace Trust.");
    for (const error of details.settingsErrors ?? []) tooltip.push(`Settings: ${error}`);
    for (const ignored of details.settingsIgnored ?? []) tooltip.push(`Ignored: ${ignored}`);
  }
  tooltip.push("Click: interrupt, restart, reset, compact.");
  return { text, tooltip: tooltip.join("\n") };
}

/**
 * The status bar item that says another agent (over MCP) waits for a decision in the panel; undefined when
 * none waits. One agent is named; several are counted, and the tooltip lists each with what it asked.
 */
export function agentsWaitingSummary(waiting: readonly AgentWaiting[]): { text: string; tooltip: string } | undefined {
  if (waiting.length === 0) return undefined;
  const agents = [...new Set(waiting.map((w) => w.agent))];
  const who = agents.length === 1 ? agents[0] : `${agents.length} agents`;
  const proposals = waiting.length === 1 ? "a proposal" : `${waiting.length} proposals`;
  const lines = waiting.map((w) => `${w.agent}: ${w.language} code${w.since ? `, since ${clock(w.since)}` : ""}`);
  return {
    text: `$(bell-dot) ${who} waiting`,
    tooltip: [`${who} waits for your decision on ${proposals} (Approve, Edit or Reject in the panel):`, ...lines, "Click: show the panel."].join("\n"),
  };
}

/** "20:15:02" of an ISO 8601 time, in the user's time zone; the text itself when it is not a time. */
function clock(iso: string): string {
  const t = new Date(iso);
  return Number.isNaN(t.getTime()) ? iso : t.toLocaleTimeString("en-GB", { hour12: false });
}

/**
 * A panel notice for news about a running kernel that its state alone does not tell: the connection to a
 * gateway lost (the run looks as if it runs on, for as long as reconnecting takes) and restored. Only a
 * message that comes with an unchanged live state: starts, restarts and deaths have notices of their own.
 */
export function kernelNewsNotice(previous: KernelState | undefined, params: KernelStatusParams): { level: "warning" | "info"; text: string } | undefined {
  if (!params.message || previous !== params.state || (params.state !== "busy" && params.state !== "idle")) return undefined;
  const lost = /lost|unreachable|no answer/i.test(params.message) && !/^reconnected/i.test(params.message);
  return { level: lost ? "warning" : "info", text: `The ${params.language} kernel: ${params.message}.` };
}

/** What a verified export says: whether the notebook reproduces, each cell that does not and why. */
export function verificationSummary(result: ExportNotebookResult): { reproduces: boolean; text: string } {
  const v = result.verification;
  const name = result.path.split(/[\\/]/).pop() ?? result.path;
  if (!v) return { reproduces: false, text: `Notebook ${name} was written without verdicts.` };
  const seconds = `${v.seconds.toFixed(1)} s`;
  if (v.differs.length === 0 && v.notRun === 0) {
    const equivalent = v.equivalent ? ` (${v.equivalent} equivalent: the same once addresses, ids, times and float noise are set aside)` : "";
    const all = v.cells === 1 ? "its one cell gave" : `all ${v.cells} cells gave`;
    return { reproduces: true, text: `Notebook ${name} reproduces: ${all} the session's output again${equivalent}, in ${seconds}.` };
  }
  const parts = v.differs.map((d) => `cell ${d.cell}: ${d.cause}`);
  if (v.notRun) parts.push(`${v.notRun} not run (after an error or the stop)`);
  return { reproduces: false, text: `Notebook ${name} does not fully reproduce (${v.identical + v.equivalent} of ${v.cells} cells as in the session, ${seconds}): ${parts.join("; ")}.` };
}

/** What undo and redo both say after what they took or brought: files, variables, and what could not be. */
function restoredText(result: UndoResult | undefined): string {
  const files: string[] = [];
  if (result?.restored?.length) files.push(`restored ${result.restored.join(", ")}`);
  if (result?.removed?.length) files.push(`removed ${result.removed.join(", ")}`);
  const variables: string[] = [];
  if (result?.variablesRestored?.length) variables.push(`restored ${result.variablesRestored.join(", ")}`);
  if (result?.variablesRemoved?.length) variables.push(`removed ${result.variablesRemoved.join(", ")}`);
  const lost = (result?.notRestorable ?? []).map((item) => item.name);
  return (
    (files.length ? `; files ${files.join("; ")}` : "") +
    (variables.length ? `; variables ${variables.join("; ")}` : "") +
    (lost.length ? `. Not restored: ${lost.join(", ")}.` : ".")
  );
}

/** The panel's notice after an undo: what went, which files came back, and what could not. */
export function undoNotice(result: UndoResult | undefined): string {
  const what =
    result?.request !== null && result?.request !== undefined
      ? "your last message and what followed it are gone from the conversation"
      : "your last run is gone from the conversation";
  return `Undone: ${what}${restoredText(result)}`;
}

/** Longest a request is quoted in a notice: enough to tell which came back; the conversation shows all of it. */
const QUOTED_REQUEST = 60;

/**
 * The panel's notice after a redo: which request (or the user's own run) came back, the files written back
 * as the undo found them (`removed`: those the runs had deleted, deleted again), the variables likewise, and
 * what could not be brought back.
 */
export function redoNotice(result: UndoResult | undefined): string {
  const request = result?.request?.replace(/\s+/g, " ").trim();
  let what = "your run is back in the conversation";
  if (request) {
    const quoted = request.length > QUOTED_REQUEST ? `${request.slice(0, QUOTED_REQUEST - 1).trimEnd()}…` : request;
    what = `your message "${quoted}" and what followed it are back in the conversation`;
  } else if (result?.request !== null && result?.request !== undefined) {
    what = "your message and what followed it are back in the conversation";
  }
  return `Redone: ${what}${restoredText(result)}`;
}
