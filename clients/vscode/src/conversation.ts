// The conversation as the panel shows it: a pure state model fed by protocol notifications and by what
// the user did. The extension host keeps one (to answer "what is pending?" and to refill a reloaded
// panel); the webview keeps a copy fed by the same events and re-renders only the entries that changed.

import type {
  FileChange,
  HistoryEvent,
  LspRange,
  MessageParams,
  NotebookOutput,
  MimeBundle,
  OutputKind,
  OutputParams,
  ProposalParams,
  ProposalStatusParams,
  RunSource,
  RunState,
  RunStatusParams,
  TurnState,
  TurnStatusParams,
} from "./protocol";
import { FINAL_RUN_STATES, FINAL_TURN_STATES } from "./protocol";

/** Characters of text output one run keeps in the panel; past that the rest is counted, not kept. */
export const MAX_RUN_TEXT = 200_000;

export interface UserEntry {
  kind: "user";
  id: string;
  text: string;
  context?: string;
}

export interface AssistantEntry {
  kind: "assistant";
  id: string;
  turnId: string;
  text: string;
  done: boolean;
  /** The reply was cut short (interrupted, or the model failed mid-answer). */
  partial?: boolean;
}

/**
 * Where a proposal stands. "expired": its turn ended without a decision, so it can no longer run.
 * "applied": it was written into a document instead of running (a decision: its turn goes on without it).
 */
export type ProposalStatus = "pending" | "running" | "ran" | "rejected" | "applied" | "expired";

export interface ProposalEntry {
  kind: "proposal";
  id: string;
  proposal: ProposalParams;
  status: ProposalStatus;
  edited: boolean;
  /** The document it was written into ("applied"). */
  appliedTo?: string;
}

export interface OutputItem {
  kind: OutputKind;
  text?: string;
  data?: MimeBundle;
  ename?: string;
  evalue?: string;
}

export interface RunEntry {
  kind: "run";
  id: string;
  runId: string;
  language?: string;
  code?: string;
  state: RunState;
  durationMs?: number;
  message?: string;
  proposalId?: string;
  outputs: OutputItem[];
  /** Workspace files the run created, modified or deleted (from its final status). */
  files?: FileChange[];
  /** "analysis.py, lines 3–5": where a run started from a document came from. */
  location?: string;
  nextSeq: number;
  keptChars: number;
  droppedChars: number;
  lostMessages: number;
}

export interface NoticeEntry {
  kind: "notice";
  id: string;
  level: "info" | "warning" | "error";
  text: string;
  /**
   * A notice about a condition rather than an event ("server-missing", "untrusted"): a newer notice with
   * the same key replaces it (said once, at the end), and `dismiss` removes it once the condition is over.
   */
  key?: string;
}

export type Entry = UserEntry | AssistantEntry | ProposalEntry | RunEntry | NoticeEntry;

export interface ConversationState {
  entries: Entry[];
  /** Live turns and their state, for the activity line ("Thinking…"). */
  turns: Record<string, TurnState>;
  /** The next expected `seq` of each turn's messages. */
  messageSeq: Record<string, number>;
  counter: number;
  /** When each live turn began its current wait (ms since the epoch), for the elapsed time it shows. */
  since?: Record<string, number>;
  /** An on-demand compaction (interpreter.compact) is being written since then. */
  compactingSince?: number;
}

export type PanelEvent =
  | { type: "user"; text: string; context?: string }
  | { type: "message"; params: MessageParams }
  | { type: "proposal"; params: ProposalParams }
  | { type: "output"; params: OutputParams }
  | { type: "runStatus"; params: RunStatusParams }
  | { type: "turnStatus"; params: TurnStatusParams }
  | { type: "runStarted"; runId: string; code?: string; language?: string }
  | { type: "proposalStatus"; proposalId: string; status?: ProposalStatus; edited?: boolean; appliedTo?: string }
  /** The server decided a proposal (or it expired): `interpreter/proposalStatus`. */
  | { type: "proposalState"; params: ProposalStatusParams }
  | { type: "notice"; level: NoticeEntry["level"]; text: string; key?: string }
  /** The condition a keyed notice was about is over (the server started, trust was granted). */
  | { type: "dismiss"; key: string }
  /** The workspace is trusted now: waiting proposals no longer wait for that. */
  | { type: "trusted" }
  /** An on-demand compaction started (true) or ended (false). */
  | { type: "compacting"; active: boolean }
  | { type: "history"; messages: HistoryEvent[] }
  | { type: "serverStopped" }
  | { type: "clear" };

/** What an event changed: entry ids to re-render, or "all" (the whole list changed). */
export type Change = { all: true } | { all: false; ids: string[] };

export function emptyConversation(): ConversationState {
  return { entries: [], turns: {}, messageSeq: {}, counter: 0, since: {} };
}

function findEntry<K extends Entry["kind"]>(
  state: ConversationState,
  id: string,
): Extract<Entry, { kind: K }> | undefined {
  for (let i = state.entries.length - 1; i >= 0; i--) {
    const entry = state.entries[i];
    if (entry.id === id) return entry as Extract<Entry, { kind: K }>;
  }
  return undefined;
}

function nextId(state: ConversationState, prefix: string): string {
  state.counter += 1;
  return `${prefix}:${state.counter}`;
}

function lastAssistantOfTurn(state: ConversationState, turnId: string): AssistantEntry | undefined {
  for (let i = state.entries.length - 1; i >= 0; i--) {
    const entry = state.entries[i];
    if (entry.kind === "assistant" && entry.turnId === turnId) return entry;
  }
  return undefined;
}

function ensureRun(state: ConversationState, runId: string): { run: RunEntry; created: boolean } {
  const id = `run:${runId}`;
  const found = findEntry<"run">(state, id);
  if (found) return { run: found, created: false };
  const run: RunEntry = {
    kind: "run",
    id,
    runId,
    state: "queued",
    outputs: [],
    nextSeq: 0,
    keptChars: 0,
    droppedChars: 0,
    lostMessages: 0,
  };
  state.entries.push(run);
  return { run, created: true };
}

/** Appends text output to a run, merging runs of the same stream and keeping at most MAX_RUN_TEXT. */
function appendOutput(run: RunEntry, item: OutputItem): void {
  if (item.text !== undefined) {
    const room = Math.max(0, MAX_RUN_TEXT - run.keptChars);
    if (room < item.text.length) {
      run.droppedChars += item.text.length - room;
      if (room === 0 && item.data === undefined && item.kind !== "error") return;
      item = { ...item, text: item.text.slice(0, room) };
    }
    run.keptChars += item.text?.length ?? 0;
  }
  const last = run.outputs[run.outputs.length - 1];
  const isStream = item.kind === "stdout" || item.kind === "stderr";
  if (isStream && last && last.kind === item.kind && last.data === undefined && item.data === undefined) {
    last.text = (last.text ?? "") + (item.text ?? "");
    return;
  }
  run.outputs.push(item);
}

/** "analysis.py, lines 3–5" for a range of a document (end-exclusive at column 0, as editors select). */
export function describeRange(name: string, range: LspRange): string {
  const first = range.start.line + 1;
  const last = range.end.character === 0 && range.end.line > range.start.line ? range.end.line : range.end.line + 1;
  return first === last ? `${name}, line ${first}` : `${name}, lines ${first}–${last}`;
}

/** "analysis.py, lines 3–5" for where a run came from (lines 0-based, end inclusive). */
export function describeSource(source: RunSource): string {
  const name = uriName(source.uri);
  const first = source.startLine + 1;
  const last = source.endLine + 1;
  return last <= first ? `${name}, line ${first}` : `${name}, lines ${first}–${last}`;
}

/** The file name of a URI, for a label. */
export function uriName(uri: string): string {
  const path = uri.replace(/[?#].*$/, "");
  const name = path.slice(path.lastIndexOf("/") + 1);
  try {
    return decodeURIComponent(name) || uri;
  } catch {
    return name || uri;
  }
}

function joined(text: string | string[] | undefined): string {
  return Array.isArray(text) ? text.join("") : (text ?? "");
}

/**
 * The text of a kernel's error as the server words it (output.py, error_text): the traceback; without one,
 * `name: value`; a failed shell command (no name, its exit status as the value) reads `exit status N`.
 */
export function errorText(ename: string | undefined, evalue: string | undefined, traceback: string[] | undefined): string {
  const lines = (traceback ?? []).join("\n");
  if (lines) return lines;
  if (ename) return evalue ? `${ename}: ${evalue}` : ename;
  if (evalue && /^[0-9]+$/.test(evalue)) return `exit status ${evalue}`;
  return evalue || "Error";
}

/** An nbformat output (as history keeps it) as the panel's output item (as notifications carry it). */
export function notebookOutputItem(output: NotebookOutput): OutputItem | undefined {
  switch (output.output_type) {
    case "stream":
      return { kind: output.name === "stderr" ? "stderr" : "stdout", text: joined(output.text) };
    case "execute_result":
    case "display_data":
      return { kind: output.output_type === "execute_result" ? "result" : "display", data: output.data ?? {} };
    case "error":
      return {
        kind: "error",
        ename: output.ename,
        evalue: output.evalue,
        text: errorText(output.ename, output.evalue, output.traceback),
      };
    default:
      return undefined;
  }
}

const FILE_CHANGE_KINDS: ReadonlySet<string> = new Set(["created", "modified", "deleted"]);

/** The well-formed entries of a `files` list from the server (anything else is skipped, not shown). */
export function fileChanges(files: unknown): FileChange[] {
  if (!Array.isArray(files)) return [];
  const changes: FileChange[] = [];
  for (const item of files as unknown[]) {
    if (typeof item !== "object" || item === null) continue;
    const { path, change } = item as Record<string, unknown>;
    if (typeof path === "string" && path !== "" && typeof change === "string" && FILE_CHANGE_KINDS.has(change)) {
      changes.push({ path, change: change as FileChange["change"] });
    }
  }
  return changes;
}

function proposalEntry(state: ConversationState, proposalId: string): ProposalEntry | undefined {
  return findEntry<"proposal">(state, `proposal:${proposalId}`);
}

/** The notice a turn's end shows ("Stopped.", a model error, "Written into calc.py; …"), if any. */
export function turnEndNotice(state: TurnState, message: string | null | undefined): { level: NoticeEntry["level"]; text: string } | undefined {
  if (state === "done" && !message) return undefined;
  const level = state === "error" ? "error" : "info";
  return { level, text: message || (state === "cancelled" ? "Stopped." : `The turn ended: ${state}.`) };
}

/** Rebuilds the conversation from the server's history events, as the live panel showed it. */
function loadHistory(state: ConversationState, events: HistoryEvent[]): void {
  // A turn's end repeats its note or error as the message the live panel showed: show it once.
  const endMessages = new Set<string>();
  for (const event of events) {
    if (event.type === "turnEnd" && event.message) endMessages.add(`${event.turnId}\n${event.message}`);
  }
  const notice = (level: NoticeEntry["level"], text: string): void => {
    state.entries.push({ kind: "notice", id: nextId(state, "notice"), level, text });
  };
  for (const event of events) {
    switch (event.type) {
      case "user": {
        const entry: UserEntry = { kind: "user", id: nextId(state, "user"), text: event.text ?? "" };
        if (event.uri && event.range) entry.context = `About ${describeRange(uriName(event.uri), event.range)}`;
        else if (event.uri) entry.context = `About ${uriName(event.uri)}`;
        state.entries.push(entry);
        break;
      }
      case "assistant": {
        // A reply of native tool calls alone has no text: its proposals show it (as when it streamed).
        if (!event.text && !event.partial) break;
        const entry: AssistantEntry = { kind: "assistant", id: nextId(state, "assistant"), turnId: event.turnId, text: event.text ?? "", done: true };
        if (event.partial) entry.partial = true;
        state.entries.push(entry);
        break;
      }
      case "proposal": {
        const { proposalId, turnId, language, code, risk, autoRun, agent } = event;
        // A proposal still undecided in the history belongs to a turn that is over: it cannot run now.
        state.entries.push({
          kind: "proposal",
          id: `proposal:${proposalId}`,
          proposal: { proposalId, turnId, language, code, risk, autoRun, ...(agent ? { agent } : {}) },
          status: "expired",
          edited: false,
        });
        break;
      }
      case "decision": {
        const entry = proposalEntry(state, event.proposalId);
        if (!entry) break;
        if (event.decision === "applied") {
          entry.status = "applied";
          if (event.uri) entry.appliedTo = event.uri;
        } else {
          entry.status = event.decision === "rejected" ? "rejected" : "ran";
        }
        if (event.edited) entry.edited = true;
        break;
      }
      case "applied": {
        const entry = proposalEntry(state, event.proposalId);
        if (entry && event.applied) {
          entry.status = "applied";
          entry.appliedTo = event.uri;
        }
        break;
      }
      case "run": {
        const { run } = ensureRun(state, event.runId);
        run.state = event.state;
        run.language = event.language;
        run.code = event.code;
        if (typeof event.durationMs === "number") run.durationMs = event.durationMs;
        if (event.message) run.message = event.message;
        if (event.proposalId) {
          run.proposalId = event.proposalId;
          const proposal = proposalEntry(state, event.proposalId);
          if (proposal) proposal.status = "ran";
        }
        for (const output of event.outputs ?? []) {
          const item = notebookOutputItem(output);
          if (item) appendOutput(run, item);
        }
        const files = fileChanges(event.files);
        if (files.length) run.files = files;
        break;
      }
      case "note":
        if (event.text && !endMessages.has(`${event.turnId ?? ""}\n${event.text}`)) notice("info", event.text);
        break;
      case "error":
        if (event.message && !endMessages.has(`${event.turnId ?? ""}\n${event.message}`)) notice("error", event.message);
        break;
      case "turnEnd": {
        const end = turnEndNotice(event.state, event.message);
        if (end) notice(end.level, end.text);
        break;
      }
      case "kernel":
        if (event.message) notice(event.state === "died" ? "error" : "info", event.message);
        break;
      case "compaction":
        if (event.failed) notice("warning", compactionFailedNotice(event.failed, event.turns));
        else notice("info", compactionNotice(event.summaryTokens ?? undefined, event.turns ?? undefined));
        break;
      default:
        break; // usage, and types this client does not know
    }
  }
}

/** The one line a compaction shows: the model's view of the conversation starts from a summary. */
export function compactionNotice(tokens?: number, turns?: number): string {
  const what = typeof turns === "number" && turns > 0 ? (turns === 1 ? "1 earlier turn" : `${turns} earlier turns`) : "Earlier turns";
  const head = what.charAt(0).toUpperCase() + what.slice(1);
  return typeof tokens === "number" && tokens > 0
    ? `${head} condensed into a summary of ${tokens.toLocaleString("en")} tokens.`
    : `${head} condensed into a summary.`;
}

/** A compaction whose summary could not be written: those turns were left out of the model's view instead. */
export function compactionFailedNotice(why: string, turns?: number | null): string {
  const count = typeof turns === "number" && turns > 0 ? (turns === 1 ? "the oldest turn was" : `the oldest ${turns} turns were`) : "the oldest turns were";
  return `Earlier turns could not be condensed (${why}): ${count} left out of what the model reads. They stay shown here.`;
}

/** Closes the proposals of a turn that ended: the server no longer waits for them. */
function expireProposals(state: ConversationState, turnId: string | undefined): string[] {
  const changed: string[] = [];
  for (const entry of state.entries) {
    if (entry.kind === "proposal" && entry.status === "pending" && (turnId === undefined || entry.proposal.turnId === turnId)) {
      entry.status = "expired";
      changed.push(entry.id);
    }
  }
  return changed;
}

/** Applies one event to the conversation (in place) and says which entries changed. */
export function applyEvent(state: ConversationState, event: PanelEvent): Change {
  switch (event.type) {
    case "clear":
      state.entries = [];
      state.turns = {};
      state.since = {};
      state.compactingSince = undefined;
      return { all: true };
    case "dismiss": {
      const gone = state.entries.filter((e) => e.kind === "notice" && e.key === event.key).map((e) => e.id);
      if (!gone.length) return { all: false, ids: [] };
      state.entries = state.entries.filter((e) => !(e.kind === "notice" && e.key === event.key));
      return { all: false, ids: gone };
    }
    case "trusted": {
      const changed: string[] = [];
      for (const entry of state.entries) {
        if (entry.kind === "proposal" && entry.status === "pending" && entry.proposal.waitReason && /not trusted/i.test(entry.proposal.waitReason)) {
          entry.proposal = { ...entry.proposal, waitReason: "the workspace is trusted now: waits for your approval" };
          changed.push(entry.id);
        }
      }
      return { all: false, ids: changed };
    }
    case "compacting":
      state.compactingSince = event.active ? Date.now() : undefined;
      return { all: false, ids: [] };
    case "history":
      state.entries = [];
      state.turns = {};
      loadHistory(state, event.messages);
      return { all: true };
    case "serverStopped": {
      // Nothing the old server started can still answer: its turns, proposals and runs are over.
      state.turns = {};
      const changed = expireProposals(state, undefined);
      for (const entry of state.entries) {
        if (entry.kind === "run" && !FINAL_RUN_STATES.has(entry.state)) {
          entry.state = "died";
          entry.message = "The server stopped before the run finished.";
          changed.push(entry.id);
        }
      }
      return { all: false, ids: changed };
    }
    case "user": {
      const entry: UserEntry = { kind: "user", id: nextId(state, "user"), text: event.text };
      if (event.context) entry.context = event.context;
      state.entries.push(entry);
      return { all: false, ids: [entry.id] };
    }
    case "notice": {
      const entry: NoticeEntry = { kind: "notice", id: nextId(state, "notice"), level: event.level, text: event.text };
      const changed: string[] = [];
      if (event.key !== undefined) {
        // Said once: the newer notice of a condition replaces the older, at the end where it is seen.
        entry.key = event.key;
        changed.push(...state.entries.filter((e) => e.kind === "notice" && e.key === event.key).map((e) => e.id));
        state.entries = state.entries.filter((e) => !(e.kind === "notice" && e.key === event.key));
      }
      state.entries.push(entry);
      changed.push(entry.id);
      return { all: false, ids: changed };
    }
    case "message": {
      const { turnId, delta, done, seq } = event.params;
      let entry = lastAssistantOfTurn(state, turnId);
      const expected = state.messageSeq[turnId] ?? 0;
      // seq runs on across the steps of a turn; a repeat is dropped. A server that restarts it per step
      // (seq 0 after a finished message) is still understood.
      if (seq < expected && !(seq === 0 && entry?.done)) return { all: false, ids: [] };
      state.messageSeq[turnId] = seq + 1;
      if (!entry || entry.done) {
        if (delta === "") return { all: false, ids: [] };
        // A finished message followed by more text of the same turn is the model's next step: a new
        // entry, so it shows after the proposals and runs of the step before.
        entry = { kind: "assistant", id: nextId(state, "assistant"), turnId, text: "", done: false };
        state.entries.push(entry);
      }
      entry.text += delta;
      entry.done = done;
      return { all: false, ids: [entry.id] };
    }
    case "proposal": {
      const id = `proposal:${event.params.proposalId}`;
      const existing = findEntry<"proposal">(state, id);
      if (existing) {
        existing.proposal = event.params;
        return { all: false, ids: [id] };
      }
      state.entries.push({ kind: "proposal", id, proposal: event.params, status: "pending", edited: false });
      const changed = [id];
      // The text that carried the code block is complete once its proposal arrives: re-render it so the
      // block folds into the proposal card.
      const assistant = lastAssistantOfTurn(state, event.params.turnId);
      if (assistant) changed.push(assistant.id);
      return { all: false, ids: changed };
    }
    case "proposalStatus": {
      const entry = proposalEntry(state, event.proposalId);
      if (!entry) return { all: false, ids: [] };
      // The server accepted the user's click: that wins over "expired" (the end of the turn it caused
      // may arrive before the command's answer), but a run the server reported (running, ran) wins over
      // a late click. "pending" itself re-renders the card, bringing back the buttons of an action that
      // did not go through.
      const open = entry.status === "pending" || entry.status === "expired";
      if (event.status !== undefined && event.status !== "pending" && open) entry.status = event.status;
      if (event.edited !== undefined) entry.edited = event.edited;
      if (event.appliedTo !== undefined) entry.appliedTo = event.appliedTo;
      return { all: false, ids: [entry.id] };
    }
    case "proposalState": {
      const { proposalId, state: decided, uri } = event.params;
      const entry = proposalEntry(state, proposalId);
      if (!entry) return { all: false, ids: [] };
      const open = entry.status === "pending" || entry.status === "expired";
      switch (decided) {
        case "approved":
        case "auto-run":
          if (open) entry.status = "running";
          break;
        case "rejected":
          entry.status = "rejected";
          break;
        case "applied":
          entry.status = "applied";
          if (uri) entry.appliedTo = uri;
          break;
        case "expired":
          if (entry.status === "pending") entry.status = "expired";
          break;
      }
      return { all: false, ids: [entry.id] };
    }
    case "runStarted": {
      const { run } = ensureRun(state, event.runId);
      if (event.code !== undefined) run.code = event.code;
      if (event.language !== undefined) run.language = event.language;
      return { all: false, ids: [run.id] };
    }
    case "runStatus": {
      const params = event.params;
      const { run } = ensureRun(state, params.runId);
      // A late "running" must not undo a final state that already arrived.
      if (!(FINAL_RUN_STATES.has(run.state) && !FINAL_RUN_STATES.has(params.state))) run.state = params.state;
      if (params.durationMs !== undefined) run.durationMs = params.durationMs;
      if (params.language !== undefined) run.language = params.language;
      if (params.message !== undefined) run.message = params.message;
      if (params.code !== undefined && run.code === undefined) run.code = params.code;
      if (params.source && typeof params.source.uri === "string") run.location = describeSource(params.source);
      const files = fileChanges(params.files);
      if (files.length) run.files = files;
      const changed = [run.id];
      if (params.proposalId !== undefined) {
        run.proposalId = params.proposalId;
        const proposal = proposalEntry(state, params.proposalId);
        if (proposal) {
          if (run.code === undefined) run.code = proposal.proposal.code;
          if (run.language === undefined) run.language = proposal.proposal.language;
          proposal.status = FINAL_RUN_STATES.has(run.state) ? "ran" : "running";
          changed.push(proposal.id);
        }
      }
      return { all: false, ids: changed };
    }
    case "output": {
      const { runId, seq, kind, data, ename, evalue, traceback } = event.params;
      // A traceback in colour when the server sends the kernel's lines (as history keeps them).
      const coloured = kind === "error" && Array.isArray(traceback) && traceback.length > 0;
      const text = coloured ? traceback.join("\n") : event.params.text;
      const { run } = ensureRun(state, runId);
      if (seq < run.nextSeq) return { all: false, ids: [] };
      if (seq > run.nextSeq) run.lostMessages += seq - run.nextSeq;
      run.nextSeq = seq + 1;
      const item: OutputItem = { kind };
      if (text !== undefined) item.text = text;
      if (data !== undefined) item.data = data;
      if (ename !== undefined) item.ename = ename;
      if (evalue !== undefined) item.evalue = evalue;
      appendOutput(run, item);
      return { all: false, ids: [run.id] };
    }
    case "turnStatus": {
      const { turnId, state: turnState, message } = event.params;
      const changed: string[] = [];
      state.since ??= {};
      if (FINAL_TURN_STATES.has(turnState)) {
        delete state.turns[turnId];
        delete state.since[turnId];
        const assistant = lastAssistantOfTurn(state, turnId);
        if (assistant && !assistant.done) {
          assistant.done = true;
          changed.push(assistant.id);
        }
        const end = turnEndNotice(turnState, message);
        if (end) {
          const notice: NoticeEntry = { kind: "notice", id: nextId(state, "notice"), ...end };
          state.entries.push(notice);
          changed.push(notice.id);
        }
        changed.push(...expireProposals(state, turnId));
      } else {
        // The clock shows how long this wait has lasted: it starts again when the turn's state changes.
        if (state.turns[turnId] !== turnState) state.since[turnId] = Date.now();
        state.turns[turnId] = turnState;
      }
      return { all: false, ids: changed };
    }
  }
}

/** Proposals still waiting for the user, oldest first. */
export function pendingProposals(state: ConversationState): ProposalParams[] {
  return state.entries
    .filter((e): e is ProposalEntry => e.kind === "proposal" && e.status === "pending")
    .map((e) => e.proposal);
}

/** " · 12 s" from a start time; nothing for the first two seconds (a quick answer needs no clock). */
function elapsed(since: number | undefined, now: number): string {
  if (since === undefined) return "";
  const seconds = Math.floor((now - since) / 1000);
  if (seconds < 2) return "";
  return seconds < 60 ? ` ${seconds} s` : ` ${Math.floor(seconds / 60)} min ${seconds % 60} s`;
}

/**
 * The one-line activity shown under the conversation, or "" when nothing is going on. A wait on the
 * model says how long it has lasted and, once the answer streams, how much of it has arrived (about four
 * characters a token), so a slow model never looks like a stuck one.
 */
export function activityLine(state: ConversationState, now: number = Date.now()): string {
  const entries = Object.entries(state.turns);
  const states = entries.map(([, s]) => s);
  const since = (wanted: TurnState): number | undefined => state.since?.[entries.find(([, s]) => s === wanted)?.[0] ?? ""];
  if (states.includes("running")) return "Running…";
  if (states.includes("awaiting-approval")) return "Waiting for your approval";
  if (states.includes("compacting")) return `Condensing earlier turns…${elapsed(since("compacting"), now)}`;
  if (state.compactingSince !== undefined) return `Condensing earlier turns…${elapsed(state.compactingSince, now)}`;
  if (states.includes("thinking")) {
    const turnId = entries.find(([, s]) => s === "thinking")?.[0] ?? "";
    const answer = lastAssistantOfTurn(state, turnId);
    const clock = elapsed(since("thinking"), now);
    if (answer && !answer.done && answer.text.length > 0) {
      const tokens = Math.max(1, Math.round(answer.text.length / 4));
      return `Answering…${clock ? `${clock} ·` : ""} ~${tokens.toLocaleString("en")} tokens so far`;
    }
    return `Thinking…${clock}`;
  }
  const running = state.entries.some((e) => e.kind === "run" && (e.state === "running" || e.state === "queued"));
  return running ? "Running…" : "";
}

export function isBusy(state: ConversationState): boolean {
  const line = activityLine(state);
  return line !== "" && line !== "Waiting for your approval";
}
