// The interpreter-lsp protocol, version 1, as the client sees it. Mirrors server/interpreter_lsp/protocol.py:
// every name is spelled here once, and test/unit/protocol.test.ts checks the two lists agree.

export const PROTOCOL_VERSION = 1;

export const Commands = {
  chat: "interpreter.chat",
  run: "interpreter.run",
  approve: "interpreter.approve",
  reject: "interpreter.reject",
  applyProposal: "interpreter.applyProposal",
  interrupt: "interpreter.interrupt",
  restartKernel: "interpreter.restartKernel",
  reset: "interpreter.reset",
  undo: "interpreter.undo",
  history: "interpreter.history",
  variables: "interpreter.variables",
  status: "interpreter.status",
  exportNotebook: "interpreter.exportNotebook",
} as const;

export type ServerCommand = (typeof Commands)[keyof typeof Commands];

export const Notifications = {
  message: "interpreter/message",
  proposal: "interpreter/proposal",
  output: "interpreter/output",
  runStatus: "interpreter/runStatus",
  turnStatus: "interpreter/turnStatus",
  kernelStatus: "interpreter/kernelStatus",
} as const;

export const Requests = {
  input: "interpreter/input",
} as const;

export type RiskLevel = "low" | "medium" | "high";
export type RunState = "queued" | "running" | "ok" | "error" | "interrupted" | "died" | "timeout";
export type TurnState = "thinking" | "awaiting-approval" | "running" | "done" | "cancelled" | "error";
export type OutputKind = "stdout" | "stderr" | "result" | "display" | "error";
export type KernelState = "starting" | "idle" | "busy" | "dead" | "restarting" | "stopped";

export const FINAL_RUN_STATES: ReadonlySet<RunState> = new Set(["ok", "error", "interrupted", "died", "timeout"]);
export const FINAL_TURN_STATES: ReadonlySet<TurnState> = new Set(["done", "cancelled", "error"]);

export interface Risk {
  level: RiskLevel;
  reasons: string[];
}

export interface MessageParams {
  turnId: string;
  seq: number;
  delta: string;
  done: boolean;
}

export interface ProposalParams {
  proposalId: string;
  turnId: string;
  language: string;
  code: string;
  risk: Risk;
  autoRun: boolean;
}

/** A MIME bundle: MIME type -> content (a string, or JSON for application/json and friends). */
export type MimeBundle = Record<string, unknown>;

export interface OutputParams {
  runId: string;
  seq: number;
  kind: OutputKind;
  text?: string;
  data?: MimeBundle;
  ename?: string;
  evalue?: string;
}

export interface RunStatusParams {
  runId: string;
  state: RunState;
  durationMs?: number;
  language?: string;
  message?: string;
  turnId?: string;
  proposalId?: string;
  /** Workspace files the run created or changed, when the server reports them. */
  files?: string[];
}

export interface TurnStatusParams {
  turnId: string;
  state: TurnState;
  message?: string;
}

export interface KernelStatusParams {
  language: string;
  state: KernelState;
  message?: string;
}

export interface InputParams {
  runId: string;
  prompt: string;
  password: boolean;
}

export interface InputResult {
  value: string;
}

export interface LspRange {
  start: { line: number; character: number };
  end: { line: number; character: number };
}

export interface ChatArgs {
  text: string;
  uri?: string;
  range?: LspRange;
}

export interface RunArgs {
  code?: string;
  language?: string;
  uri?: string;
  range?: LspRange;
  position?: { line: number; character: number };
}

export interface StatusResult {
  model: string;
  autoRun: boolean;
  kernels: { language: string; state: KernelState }[];
  usage: { promptTokens: number; completionTokens: number; cost: number };
}

export interface Variable {
  name: string;
  type: string;
  summary: string;
}

/** One message of `interpreter.history`: the server's record of the conversation. */
export interface HistoryMessage {
  role: string;
  content?: unknown;
  [key: string]: unknown;
}
