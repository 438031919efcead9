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
  /** Why the proposal waits ("auto-run is off: waits for approval", ...), when autoRun is false. */
  waitReason?: string;
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

export type FileChangeKind = "created" | "modified" | "deleted";

/** A workspace file a run touched; `path` is relative to the workspace root, with "/" separators. */
export interface FileChange {
  path: string;
  change: FileChangeKind;
}

export interface RunStatusParams {
  runId: string;
  state: RunState;
  durationMs?: number;
  language?: string;
  message?: string;
  turnId?: string;
  proposalId?: string;
  /** On final states, when the run touched workspace files. */
  files?: FileChange[];
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

export interface KernelInfo {
  language: string;
  state: KernelState;
  /** The kernelspec or interpreter chosen, and where the choice came from. */
  kernel?: string;
  source?: string;
  sandbox?: string;
  interpreter?: string;
  pid?: number;
}

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  cost: number;
}

/** `interpreter.status`: the workspace's model, kernels, usage and trust. */
export interface StatusResult {
  version?: string;
  protocolVersion?: number;
  root?: string;
  /** null when no model is configured or discovered yet. */
  model: string | null;
  autoRun: boolean;
  usage?: Usage;
  kernels: KernelInfo[];
  trusted?: boolean;
  settingsErrors?: string[];
  workspaces?: string[];
}

export interface Variable {
  name: string;
  type: string;
  summary: string;
}

/** nbformat outputs, as `run` events of the history keep them. */
export type NotebookOutput =
  | { output_type: "stream"; name: string; text: string | string[] }
  | { output_type: "execute_result" | "display_data"; data: MimeBundle; metadata?: unknown }
  | { output_type: "error"; ename: string; evalue: string; traceback: string[] };

/**
 * One event of `interpreter.history` ({messages: [event, ...]}): the server's record of the conversation.
 * Every event has `ts` (seconds); unknown types are skipped.
 */
export type HistoryEvent = { ts?: number } & (
  | { type: "user"; turnId: string; text: string; content?: unknown; uri?: string; range?: LspRange | null }
  | { type: "assistant"; turnId: string; text: string; partial?: boolean }
  | {
      type: "proposal";
      proposalId: string;
      turnId: string;
      language: string;
      code: string;
      risk: Risk;
      autoRun: boolean;
      complete?: boolean;
    }
  | {
      type: "decision";
      proposalId: string;
      turnId: string;
      decision: "approved" | "rejected" | "auto-run";
      code?: string;
      edited?: boolean;
      reason?: string | null;
    }
  | {
      type: "run";
      runId: string;
      origin: "model" | "user";
      turnId?: string | null;
      proposalId?: string | null;
      language: string;
      code: string;
      state: RunState;
      durationMs?: number | null;
      message?: string | null;
      outputForModel?: string;
      outputs: NotebookOutput[];
      files?: FileChange[];
    }
  | { type: "usage"; promptTokens: number; completionTokens: number; cost: number }
  | { type: "note"; text: string }
  | { type: "error"; turnId?: string; message: string }
  | { type: "applied"; proposalId: string; uri: string; applied: boolean }
);

export interface HistoryResult {
  messages: HistoryEvent[];
}
