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
  redo: "interpreter.redo",
  history: "interpreter.history",
  variables: "interpreter.variables",
  status: "interpreter.status",
  exportNotebook: "interpreter.exportNotebook",
  setTrusted: "interpreter.setTrusted",
  compact: "interpreter.compact",
} as const;

export type ServerCommand = (typeof Commands)[keyof typeof Commands];

export const Notifications = {
  message: "interpreter/message",
  proposal: "interpreter/proposal",
  output: "interpreter/output",
  runStatus: "interpreter/runStatus",
  turnStatus: "interpreter/turnStatus",
  kernelStatus: "interpreter/kernelStatus",
  proposalStatus: "interpreter/proposalStatus",
} as const;

export const Requests = {
  input: "interpreter/input",
} as const;

export type RiskLevel = "low" | "medium" | "high";
export type RunState = "queued" | "running" | "ok" | "error" | "interrupted" | "died" | "timeout";
export type TurnState = "thinking" | "compacting" | "awaiting-approval" | "running" | "done" | "cancelled" | "error";
export type OutputKind = "stdout" | "stderr" | "result" | "display" | "error";
export type KernelState = "starting" | "idle" | "busy" | "dead" | "restarting" | "stopped";
/** How a waiting proposal was decided, or "expired": its turn (or step) ended while it still waited. */
export type ProposalState = "approved" | "auto-run" | "rejected" | "applied" | "expired";

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
  /** Another agent's proposal (over MCP): "agent", its name and when it asked (ISO 8601, UTC). */
  origin?: "agent";
  agent?: string;
  created?: string;
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
  /** For "error": the kernel's traceback lines as they came, ANSI colour codes included. */
  traceback?: string[];
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
  /** The workspace folder `files` are relative to. */
  root?: string;
  /** On "queued": what runs and who started it. */
  code?: string;
  origin?: "user" | "model" | "agent";
  /** On "queued", origin "agent": which agent. */
  agent?: string;
  /** On "queued", for runs started from a document (a code lens, a code action, run cell or selection). */
  source?: RunSource;
}

/** Where a run started from a document came from; lines are 0-based, `endLine` inclusive. */
export interface RunSource {
  uri: string;
  kind: "selection" | "cell" | "document";
  startLine: number;
  endLine: number;
}

export interface ProposalStatusParams {
  proposalId: string;
  turnId: string;
  state: ProposalState;
  /** When it runs. */
  runId?: string;
  /** A rejection's reason. */
  reason?: string;
  /** The document it was written into ("applied"). */
  uri?: string;
}

export interface TurnStatusParams {
  turnId: string;
  state: TurnState;
  message?: string;
  /** With "thinking" and at the end of a turn: how full the model's context is. */
  context?: ContextUse;
}

/** How much of the model's context window the conversation uses, and what it cost so far. */
export interface ContextUse {
  /** The prompt the next request would send, counted for the model in use. */
  tokens: number;
  window: number;
  windowSource: "setting" | "model" | "guess";
  replyReserve: number;
  /** This conversation's cost so far in USD (0 for local models). */
  cost: number;
  /** False when litellm has no price for the model. */
  costKnown: boolean;
  compactions: number;
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

export interface LspPosition {
  line: number;
  character: number;
}

export interface LspRange {
  start: LspPosition;
  end: LspPosition;
}

// ---- command arguments and results, one interface per class of protocol.py (COMMAND_SHAPES) ----------

export interface ChatArgs {
  text: string;
  uri?: string;
  range?: LspRange;
}

export interface ChatResult {
  turnId: string;
}

export interface RunArgs {
  code?: string;
  language?: string;
  uri?: string;
  range?: LspRange;
  position?: LspPosition;
  timeout?: number;
}

export interface RunResult {
  runId: string;
}

export interface ApproveArgs {
  proposalId: string;
  /** An edited version to run instead. */
  code?: string;
}

export interface RejectArgs {
  proposalId: string;
  reason?: string;
}

export interface ApplyProposalArgs {
  proposalId: string;
  uri?: string;
  range?: LspRange;
}

export interface ApplyProposalResult {
  applied: boolean;
}

/** interrupt: nothing (it interrupts every workspace). */
export type EmptyArgs = Record<string, never>;

/** reset, history, status, compact: only the folder. */
export interface WorkspaceArgs {
  uri?: string;
}

export interface UndoArgs {
  uri?: string;
  /** Only say what would be taken back and restored; nothing changes. */
  dryRun?: boolean;
  /** Also overwrite files changed again after the undone runs. */
  confirm?: boolean;
}

export interface RedoArgs {
  uri?: string;
  /** Only say what would be brought back; nothing changes. */
  dryRun?: boolean;
}

/** restartKernel, variables: a kernel's language (python by default). */
export interface LanguageArgs {
  language?: string;
  uri?: string;
}

export interface ExportNotebookArgs {
  path: string;
  overwrite?: boolean;
  uri?: string;
  /** Re-run the export in a fresh kernel and stamp each cell's verdict. */
  verify?: boolean;
  /** Seconds; the server's default when left out. */
  verifyTimeout?: number;
}

export interface SetTrustedArgs {
  trusted: boolean;
}

/** reject, interrupt, restartKernel, reset, undo, setTrusted. */
export type EmptyResult = Record<string, never>;

export interface Variable {
  name: string;
  type: string;
  summary: string;
}

export interface VariablesResult {
  variables: Variable[];
}

export interface ExportNotebookResult {
  /** The notebook written, absolute. */
  path: string;
  /** With verify: true. */
  verification?: Verification;
}

/** exportNotebook with verify: the re-run's verdicts (docs/protocol.md, "Verified export"). */
export interface Verification {
  id: string;
  cells: number;
  identical: number;
  equivalent: number;
  differs: CellDiffers[];
  notRun: number;
  /** The whole verification; startSeconds of it starting the fresh kernel. */
  seconds: number;
  startSeconds: number;
  /** The session's own runs of the same cells. */
  sessionSeconds: number;
  sandbox: string;
  /** Workspace files the re-run wrote, created or deleted, put back as they were. */
  filesPutBack?: string[];
  /** What the re-run changed that was left as it made it, and why. */
  filesNotPutBack?: NotRestorable[];
}

export interface CellDiffers {
  /** The code cell's index in the notebook. */
  cell: number;
  cause: string;
}

/** What an undo cannot bring back, and why. */
export interface NotRestorable {
  name: string;
  why: string;
}

/**
 * interpreter.undo: what it took back, or (dryRun: true) what it would, with nothing changed.
 * interpreter.redo answers the same shape for what it brought back: the request and runs the last undo took
 * back, `restored` the files written back as the undo found them, `removed` the files the undo had put back
 * that the runs had deleted, and the variables likewise. With nothing to redo it fails ("Nothing to redo…").
 */
export interface UndoResult {
  /** The undone request's text; null when the unit undone is the user's own run. */
  request: string | null;
  runs: string[];
  notRestorable: NotRestorable[];
  restored?: string[];
  removed?: string[];
  dryRun?: boolean;
  restore?: string[];
  remove?: string[];
  changedSince?: string[];
  running?: string[];
  variablesRestored?: string[];
  variablesRemoved?: string[];
  variablesRestore?: string[];
  variablesRemove?: string[];
}

export interface CompactResult {
  summaryTokens: number;
  droppedTurns: number;
}

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  cost: number;
}

export interface KernelInfo {
  language: string;
  state: KernelState;
  /** The kernelspec or interpreter chosen, and where the choice came from. */
  kernel: string;
  source: string;
  sandbox: string;
  interpreter?: string;
  pid?: number;
  /** A local kernel's resource limits in force and how ("rlimits, each process: …", "cgroup …, the whole
   * process tree: …"); a limit that does not hold says so ("processes NOT ENFORCED (…)"). */
  limits?: string;
  /** A kernel on a gateway: its URL (without credentials) and id; it has no pid or interpreter. */
  gateway?: string;
  kernelId?: string;
  /** Why watching the files a run touches is off, when it is ("off (remote kernel: …)"). */
  filesTouched?: string;
}

/** `interpreter.status`: the workspace's model, kernels, usage and trust. */
export interface StatusResult {
  version: string;
  protocolVersion: number;
  root: string;
  /** null when no model is configured or discovered yet. */
  model: string | null;
  autoRun: boolean;
  autoRunMaxRisk: { setting: string; inForce: string; why?: string };
  usage: Usage;
  kernels: KernelInfo[];
  trusted: boolean;
  settingsErrors: string[];
  settingsIgnored: string[];
  /** Where each setting's value came from ("workspace/configuration", "user file", "default", ...). */
  settingsSources: Record<string, string>;
  workspaces: string[];
  context?: ContextUse;
  /** Other agents' proposals (over MCP) that wait for a decision here. */
  agentsWaiting?: AgentWaiting[];
}

/** One entry of `interpreter.status`'s `agentsWaiting`. */
export interface AgentWaiting {
  proposalId: string;
  /** The agent's name and version, from its MCP client info. */
  agent: string;
  language: string;
  /** When it asked (ISO 8601, UTC). */
  since: string;
}

/** nbformat outputs, as `run` events of the history keep them. */
export type NotebookOutput =
  | { output_type: "stream"; name: string; text: string | string[] }
  | { output_type: "execute_result" | "display_data"; data: MimeBundle; metadata?: unknown }
  | { output_type: "error"; ename: string; evalue: string; traceback: string[] };

/** How a proposal was decided, as the history records it. */
export type DecisionKind = "approved" | "rejected" | "auto-run" | "applied";
export type Origin = "user" | "model" | "agent";

// One interface per history event, named as protocol.py names its class (tests/test_mirrors.py compares
// names, fields, optionality and types both ways). The server leaves out fields that have no value: an
// optional field is absent, never null.

export interface UserEvent {
  type: "user";
  turnId: string;
  text: string;
  /** What the model read: the text with the editor's context. */
  content: string;
  uri?: string;
  range?: LspRange;
}

export interface AssistantEvent {
  type: "assistant";
  turnId: string;
  text: string;
  /** The reply was cut off (interrupt, failure). */
  partial?: boolean;
  /** Native tool calls of the reply; each also came as a proposal (with its toolCallId). */
  toolCalls?: { id: string; name: string; arguments: string }[];
}

export interface ProposalEvent {
  type: "proposal";
  proposalId: string;
  turnId: string;
  language: string;
  code: string;
  risk: Risk;
  autoRun: boolean;
  complete: boolean;
  toolCallId?: string;
  /** SHA-256 of language + NUL + code: what a decision is bound to. */
  codeHash?: string;
  /** "agent" for another agent's proposal (over MCP); absent for the model's. */
  origin?: "agent";
  agent?: string;
}

export interface DecisionEvent {
  type: "decision";
  proposalId: string;
  turnId: string;
  decision: DecisionKind;
  language?: string;
  code?: string;
  edited?: boolean;
  reason?: string;
  uri?: string;
  codeHash?: string;
  agent?: string;
}

export interface RunEvent {
  type: "run";
  runId: string;
  origin: Origin;
  language: string;
  code: string;
  state: RunState;
  durationMs: number;
  outputForModel: string;
  outputs: NotebookOutput[];
  files: FileChange[];
  turnId?: string;
  proposalId?: string;
  message?: string;
  codeHash?: string;
  /** origin "agent": which agent. */
  agent?: string;
}

export interface UsageEvent {
  type: "usage";
  turnId: string;
  promptTokens: number;
  completionTokens: number;
  cost: number;
}

export interface NoteEvent {
  type: "note";
  text: string;
  turnId?: string;
  forModel?: string;
}

export interface ErrorEvent {
  type: "error";
  turnId: string;
  message: string;
}

export interface AppliedEvent {
  type: "applied";
  proposalId: string;
  uri: string;
  applied: boolean;
}

export interface TurnEndEvent {
  type: "turnEnd";
  turnId: string;
  state: TurnState;
  message?: string;
}

export interface KernelEvent {
  type: "kernel";
  language: string;
  state: "restarted" | "died";
  message: string;
}

/** The model's view starts from this summary; the panel still shows every earlier event. */
export interface CompactionEvent {
  type: "compaction";
  summary: string;
  /** The last turn the summary condenses. */
  upTo: string;
  summaryTokens?: number;
  /** How many turns this compaction condensed (or, when it failed, left out). */
  turns?: number;
  /** The summary could not be written: why (those turns were left out of the model's view instead). */
  failed?: string;
}

/** In the server's log only (`interpreter.history` returns the history with it applied): an undo from the
 * last user message on, or (`runId`) from that user's own run on. */
export interface UndoEvent {
  type: "undo";
  runId?: string;
}

/** In the server's log only (`interpreter.history` returns the history with it applied): the last undo is
 * taken back, what it dropped comes back (anything new since ends what can be redone). */
export interface RedoEvent {
  type: "redo";
}

/**
 * One event of `interpreter.history` ({messages: [event, ...]}): the server's record of the conversation.
 * Every event has `ts` (seconds); unknown types are skipped. (`reset`, `undo` and `redo` are in the server's
 * log only: the history it returns has them applied. `redo`, which has no fields, is in the union as in
 * protocol.py's; the panel skips it like any type it does not draw.)
 */
export type HistoryEvent = { ts?: number } & (
  | UserEvent
  | AssistantEvent
  | ProposalEvent
  | DecisionEvent
  | RunEvent
  | UsageEvent
  | NoteEvent
  | ErrorEvent
  | AppliedEvent
  | TurnEndEvent
  | KernelEvent
  | CompactionEvent
  | RedoEvent
);

export interface HistoryResult {
  messages: HistoryEvent[];
}
