"""The interpreter-lsp protocol, version 1: every custom command and notification name, every payload,
and every history event.

This is the one place in the server where these names are spelled. docs/protocol.md documents them.
Payloads and events are plain attrs classes; `to_wire` turns one into the camelCase JSON object clients
receive (history events carry their `type`). The clients' mirrors (clients/vscode/src/protocol.ts,
clients/neovim/lua/interpreter_lsp/protocol.lua) are checked against this module by tests/test_mirrors.py.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

PROTOCOL_VERSION = 1

# Commands: client -> server, workspace/executeCommand with one JSON object as the only argument.
CHAT = "interpreter.chat"
RUN = "interpreter.run"
APPROVE = "interpreter.approve"
REJECT = "interpreter.reject"
APPLY_PROPOSAL = "interpreter.applyProposal"
INTERRUPT = "interpreter.interrupt"
RESTART_KERNEL = "interpreter.restartKernel"
RESET = "interpreter.reset"
UNDO = "interpreter.undo"
REDO = "interpreter.redo"
HISTORY = "interpreter.history"
VARIABLES = "interpreter.variables"
STATUS = "interpreter.status"
EXPORT_NOTEBOOK = "interpreter.exportNotebook"
SET_TRUSTED = "interpreter.setTrusted"
COMPACT = "interpreter.compact"

# interpreter.exportNotebook with `verify: true` answers when the re-run ends, or after this many seconds
# (`verifyTimeout` overrides it) with an error; the notebook is written either way.
VERIFY_TIMEOUT = 600.0
# Where a verified export stamps its verdicts: cell.metadata[VERIFY_METADATA]["verify"], and the
# notebook's record in nb.metadata[VERIFY_METADATA]["verify"].
VERIFY_METADATA = "interpreter_lsp"

ALL_COMMANDS: tuple[str, ...] = (
    CHAT,
    RUN,
    APPROVE,
    REJECT,
    APPLY_PROPOSAL,
    INTERRUPT,
    RESTART_KERNEL,
    RESET,
    UNDO,
    REDO,
    HISTORY,
    VARIABLES,
    STATUS,
    EXPORT_NOTEBOOK,
    SET_TRUSTED,
    COMPACT,
)

# Notifications: server -> client.
MESSAGE = "interpreter/message"
PROPOSAL = "interpreter/proposal"
OUTPUT = "interpreter/output"
RUN_STATUS = "interpreter/runStatus"
TURN_STATUS = "interpreter/turnStatus"
KERNEL_STATUS = "interpreter/kernelStatus"
PROPOSAL_STATUS = "interpreter/proposalStatus"

ALL_NOTIFICATIONS: tuple[str, ...] = (
    MESSAGE,
    PROPOSAL,
    OUTPUT,
    RUN_STATUS,
    TURN_STATUS,
    KERNEL_STATUS,
    PROPOSAL_STATUS,
)

# Requests: server -> client. Sent only to clients that declare support (see INPUT_CAPABILITY).
INPUT = "interpreter/input"
# A client that can answer `interpreter/input` says so in initializationOptions
# ({"capabilities": {"input": true}}) or in capabilities.experimental.interpreter.input.
INPUT_CAPABILITY = "input"

RiskLevel = Literal["low", "medium", "high"]
RunState = Literal["queued", "running", "ok", "error", "interrupted", "died", "timeout"]
TurnState = Literal["thinking", "compacting", "awaiting-approval", "running", "done", "cancelled", "error"]
OutputKind = Literal["stdout", "stderr", "result", "display", "error"]
KernelState = Literal["starting", "idle", "busy", "dead", "restarting", "stopped"]
ProposalState = Literal["approved", "auto-run", "rejected", "applied", "expired"]
Origin = Literal["user", "model", "agent"]  # "agent": another agent, over MCP (docs/agents.md)

FINAL_RUN_STATES: frozenset[str] = frozenset({"ok", "error", "interrupted", "died", "timeout"})
FINAL_TURN_STATES: frozenset[str] = frozenset({"done", "cancelled", "error"})


# The payloads below: attrs classes without a generated __repr__ (never shown: they leave as JSON, to_wire),
# which saves ~5 of the ~15 ms their 55 classes cost the server's start.
_payload = attrs.define(repr=False)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


# Per payload class: its "type" (or None) and (field, wire key) pairs. Worked out once: a notification is sent
# for every output chunk, and the names' conversion was ~15 us a field.
_WIRE: dict[type, tuple[str | None, tuple[tuple[str, str], ...]]] = {}


def _wire_fields(cls: type) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    kind = getattr(cls, "type", None)
    shape = (kind if isinstance(kind, str) else None, tuple((f.name, _camel(f.name)) for f in attrs.fields(cls)))
    _WIRE[cls] = shape
    return shape


def to_wire(payload: Any) -> dict[str, Any]:
    """An attrs payload as the JSON object on the wire: camelCase keys, None fields left out."""
    cls = type(payload)
    kind, fields = _WIRE.get(cls) or _wire_fields(cls)
    out: dict[str, Any] = {} if kind is None else {"type": kind}
    for name, key in fields:
        value = getattr(payload, name)
        if value is None:
            continue
        if attrs.has(type(value)):
            value = to_wire(value)
        elif isinstance(value, (list, tuple)):
            value = [to_wire(v) if attrs.has(type(v)) else v for v in value]
        out[key] = value
    return out


@_payload
class Risk:
    level: RiskLevel
    reasons: list[str] = attrs.field(factory=list)


@_payload
class MessageParams:
    """A piece of assistant Markdown. `delta` appends to what came before with the same turnId."""

    turn_id: str
    seq: int
    delta: str
    done: bool


@_payload
class ProposalParams:
    proposal_id: str
    turn_id: str
    language: str
    code: str
    risk: Risk
    auto_run: bool
    # Why it waits ("auto-run is off: waits for approval", ...), when it does not run by itself.
    wait_reason: str | None = None
    # Another agent's proposal (over MCP): origin "agent", the agent's name (its MCP client info, as it
    # says itself) and when it asked (ISO 8601, UTC). Absent for our own model's proposals.
    origin: Literal["agent"] | None = None
    agent: str | None = None
    created: str | None = None


@_payload
class OutputParams:
    run_id: str
    seq: int
    kind: OutputKind
    text: str | None = None
    data: dict[str, Any] | None = None
    # For kind "error": the exception's name and value, the traceback as plain text in `text`, and the
    # kernel's traceback lines as they came (with ANSI colour codes) in `traceback`, for clients that colour.
    ename: str | None = None
    evalue: str | None = None
    traceback: list[str] | None = None


@_payload
class RunStatusParams:
    run_id: str
    state: RunState
    duration_ms: int | None = None
    language: str | None = None
    message: str | None = None
    turn_id: str | None = None
    proposal_id: str | None = None
    # On "queued" only: what runs and who started it ("user" or "model"), for clients that did not
    # start the run themselves (code lenses, code actions, the loop).
    code: str | None = None
    origin: Origin | None = None
    agent: str | None = None  # origin "agent": which agent
    # On final states: workspace files the run created, modified or deleted ([{path, change}]),
    # relative to `root`, the workspace folder the run belongs to.
    files: list[dict[str, str]] | None = None
    root: str | None = None
    # On "queued" only, for runs started from a document (a code lens, a code action, run cell/selection):
    # {uri, kind: "selection" | "cell" | "document", startLine, endLine}.
    source: dict[str, Any] | None = None


@_payload
class AgentWaiting:
    """One of interpreter.status `agentsWaiting`: another agent's proposal (over MCP) waiting for a decision."""

    proposal_id: str
    agent: str  # the agent's name and version, from its MCP client info
    language: str
    since: str  # when it asked (ISO 8601, UTC)


@_payload
class ContextUse:
    """How full the model's context is (interpreter.status `context`, turnStatus `context`)."""

    tokens: int  # the prompt the next request would send, counted for the model in use
    window: int
    window_source: Literal["setting", "model", "guess"]
    reply_reserve: int
    cost: float  # this conversation's cost so far, USD (0 for local models)
    cost_known: bool  # litellm has a price for the model
    compactions: int


@_payload
class TurnStatusParams:
    turn_id: str
    state: TurnState
    message: str | None = None
    context: ContextUse | None = None  # with "thinking" and the final state


@_payload
class KernelStatusParams:
    """Kernel life-cycle, for status bars: starting / idle / busy / dead / restarting / stopped."""

    language: str
    state: KernelState
    message: str | None = None


@_payload
class InputParams:
    """Code asked for input (`input()`, `getpass`). The answer is `{value: str}` or null to cancel."""

    run_id: str
    prompt: str
    password: bool


@_payload
class ProposalStatusParams:
    """A proposal was decided, or its turn ended while it still waited ("expired"). Clients drive the
    proposal's card from this: once decided, nothing on it can be approved again."""

    proposal_id: str
    turn_id: str
    state: ProposalState
    run_id: str | None = None
    reason: str | None = None
    uri: str | None = None


# ---- command arguments and results ------------------------------------------------------------------
# `workspace/executeCommand` takes one JSON object (the *Args class of the command) and answers one (its
# *Result class), camelCase on the wire, None fields left out. Most commands take `uri` to pick the
# workspace folder (the first one without it). docs/protocol.md documents them; tests/test_mirrors.py
# checks the clients' copies against these classes.


@_payload
class LspPosition:
    line: int
    character: int


@_payload
class ChatArgs:
    text: str
    uri: str | None = None
    range: dict[str, Any] | None = None  # an LSP Range: the selection the request is about


@_payload
class ChatResult:
    turn_id: str


@_payload
class RunArgs:
    code: str | None = None
    language: str | None = None
    uri: str | None = None
    range: dict[str, Any] | None = None
    position: LspPosition | None = None
    timeout: float | None = None


@_payload
class RunResult:
    run_id: str


@_payload
class ApproveArgs:
    proposal_id: str
    code: str | None = None  # an edited version to run instead


@_payload
class RejectArgs:
    proposal_id: str
    reason: str | None = None


@_payload
class ApplyProposalArgs:
    proposal_id: str
    uri: str | None = None
    range: dict[str, Any] | None = None


@_payload
class ApplyProposalResult:
    applied: bool


@_payload
class WorkspaceArgs:
    """Commands that take nothing but the folder: reset, history, status, compact."""

    uri: str | None = None


@_payload
class LanguageArgs:
    """restartKernel, variables: a kernel's language (python by default)."""

    language: str | None = None
    uri: str | None = None


@_payload
class ExportNotebookArgs:
    path: str
    overwrite: bool | None = None
    uri: str | None = None
    verify: bool | None = None  # re-run the export in a fresh kernel and stamp each cell's verdict
    verify_timeout: float | None = None  # seconds (VERIFY_TIMEOUT when left out)


@_payload
class UndoArgs:
    uri: str | None = None
    dry_run: bool | None = None  # only say what would be taken back and restored; nothing changes
    confirm: bool | None = None  # also overwrite files changed again after the undone runs


@_payload
class RedoArgs:
    uri: str | None = None
    dry_run: bool | None = None  # only say what would be brought back; nothing changes


@_payload
class EmptyArgs:
    """interrupt: `{}` (it interrupts every workspace)."""


@_payload
class SetTrustedArgs:
    trusted: bool


@_payload
class EmptyResult:
    """reject, interrupt, restartKernel, reset, undo, setTrusted: `{}`."""


@_payload
class HistoryResult:
    messages: list[dict[str, Any]]  # history events (below), camelCase, each with `type` and `ts`


@_payload
class Variable:
    name: str
    type: str
    summary: str


@_payload
class VariablesResult:
    variables: list[Variable]


@_payload
class NotRestorable:
    """What an undo cannot bring back, and why (kernel variables, files outside the workspace, …)."""

    name: str
    why: str


@_payload
class UndoResult:
    """interpreter.undo: what it took back, or (`dryRun: true`) what it would, with nothing changed.
    interpreter.redo answers the same shape for what it brought back: the request and runs the last undo
    took back, `restored` the files written back as the undo found them, `removed` the files the undo had
    put back that the runs had deleted, and the variables likewise."""

    request: str | None  # the undone request's text; null when the unit undone is the user's own run
    runs: list[str]  # the ids of the runs taken back with it
    not_restorable: list[NotRestorable]
    restored: list[str] | None = None  # committed: workspace files written back (relative paths)
    removed: list[str] | None = None  # committed: files the undone runs had created, removed
    dry_run: bool | None = None  # true on a dry run; the fields below are then given instead
    restore: list[str] | None = None
    remove: list[str] | None = None
    changed_since: list[str] | None = None  # changed again after the runs: overwritten only with confirm
    running: list[str] | None = None  # runs in progress, which an undo stops first
    variables_restored: list[str] | None = None  # committed: python variables brought back as they were
    variables_removed: list[str] | None = None  # committed: variables the undone runs had created, removed
    variables_restore: list[str] | None = None  # dry run: variables that would come back
    variables_remove: list[str] | None = None  # dry run: variables that would be removed


@_payload
class CellDiffers:
    cell: int  # the code cell's index in the notebook
    cause: str  # why it differs, in words ("the session's error (…) did not happen again", …)


@_payload
class Verification:
    """exportNotebook with verify: the re-run's verdicts (docs/protocol.md, "Verified export")."""

    id: str
    cells: int
    identical: int
    equivalent: int
    differs: list[CellDiffers]
    not_run: int
    seconds: float  # the whole verification
    start_seconds: float  # of it, starting the fresh kernel
    session_seconds: float  # the session's own runs of the same cells
    sandbox: str
    # The re-run ran in the workspace: the files it wrote, created or deleted there, put back as they were
    # (relative paths), and what was left as the re-run made it, and why.
    files_put_back: list[str] = attrs.field(factory=list)
    files_not_put_back: list[NotRestorable] = attrs.field(factory=list)


@_payload
class ExportNotebookResult:
    path: str  # the notebook written, absolute
    verification: Verification | None = None  # with verify: true


@_payload
class CompactResult:
    summary_tokens: int
    dropped_turns: int


@_payload
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cost: float


@_payload
class KernelInfo:
    language: str
    state: KernelState
    kernel: str  # the kernelspec or interpreter chosen
    source: str  # where the choice came from
    sandbox: str
    interpreter: str | None = None
    pid: int | None = None
    limits: str | None = None  # a local kernel's resource limits in force, and how
    gateway: str | None = None  # a kernel on a gateway: its URL (without credentials)
    kernel_id: str | None = None
    files_touched: str | None = None  # why watching the files a run touches is off, when it is


@_payload
class StatusResult:
    version: str
    protocol_version: int
    root: str
    model: str | None  # None (left out) when no model is configured or discovered yet
    auto_run: bool
    auto_run_max_risk: dict[str, str]  # {setting, inForce, why?}
    usage: Usage
    kernels: list[KernelInfo]
    trusted: bool
    settings_errors: list[str]
    settings_ignored: list[str]
    settings_sources: dict[str, str]
    workspaces: list[str]
    context: ContextUse | None = None
    agents_waiting: list[AgentWaiting] | None = None  # other agents' proposals (over MCP) waiting here


COMMAND_SHAPES: dict[str, tuple[type, type]] = {
    CHAT: (ChatArgs, ChatResult),
    RUN: (RunArgs, RunResult),
    APPROVE: (ApproveArgs, RunResult),
    REJECT: (RejectArgs, EmptyResult),
    APPLY_PROPOSAL: (ApplyProposalArgs, ApplyProposalResult),
    INTERRUPT: (EmptyArgs, EmptyResult),
    RESTART_KERNEL: (LanguageArgs, EmptyResult),
    RESET: (WorkspaceArgs, EmptyResult),
    UNDO: (UndoArgs, UndoResult),
    REDO: (RedoArgs, UndoResult),
    HISTORY: (WorkspaceArgs, HistoryResult),
    VARIABLES: (LanguageArgs, VariablesResult),
    STATUS: (WorkspaceArgs, StatusResult),
    EXPORT_NOTEBOOK: (ExportNotebookArgs, ExportNotebookResult),
    SET_TRUSTED: (SetTrustedArgs, EmptyResult),
    COMPACT: (WorkspaceArgs, CompactResult),
}


# ---- history events ---------------------------------------------------------------------------------
# What `interpreter.history` returns and the per-workspace JSONL log holds, one class per `type`. Every
# stored event also has `ts` (seconds since the epoch), added when it is appended.


@_payload
class UserEvent:
    type: ClassVar[str] = "user"
    turn_id: str
    text: str
    content: str  # what the model read: the text with the editor's context
    uri: str | None = None
    range: dict[str, Any] | None = None


@_payload
class AssistantEvent:
    type: ClassVar[str] = "assistant"
    turn_id: str
    text: str
    partial: bool | None = None  # the reply was cut off (interrupt, failure)
    tool_calls: list[dict[str, str]] | None = None  # native tool calls: {id, name, arguments (JSON text)}


@_payload
class ProposalEvent:
    type: ClassVar[str] = "proposal"
    proposal_id: str
    turn_id: str
    language: str
    code: str
    risk: Risk
    auto_run: bool
    complete: bool
    tool_call_id: str | None = None  # it came as a native tool call: the call it answers
    code_hash: str | None = None  # SHA-256 of language + NUL + code: what a decision is bound to (gate.py)
    origin: Literal["agent"] | None = None  # "agent" for another agent's proposal (over MCP); absent for ours
    agent: str | None = None


DecisionKind = Literal["approved", "rejected", "auto-run", "applied"]


@_payload
class DecisionEvent:
    type: ClassVar[str] = "decision"
    proposal_id: str
    turn_id: str
    decision: DecisionKind
    language: str | None = None
    code: str | None = None  # approved / auto-run: what runs
    edited: bool | None = None
    reason: str | None = None  # rejected: the user's reason
    uri: str | None = None  # applied: the document it was written into
    code_hash: str | None = None  # approved / auto-run: the hash of `code` the approval was bound to
    agent: str | None = None  # another agent's proposal: its name


@_payload
class RunEvent:
    type: ClassVar[str] = "run"
    run_id: str
    origin: Origin
    language: str
    code: str
    state: RunState
    duration_ms: int
    output_for_model: str
    outputs: list[dict[str, Any]] = attrs.field(factory=list)  # nbformat v4 outputs
    files: list[dict[str, str]] = attrs.field(factory=list)
    turn_id: str | None = None
    proposal_id: str | None = None
    message: str | None = None
    code_hash: str | None = None  # the hash of `code` its approval was bound to (gate.py)
    agent: str | None = None  # origin "agent": which agent


@_payload
class UsageEvent:
    type: ClassVar[str] = "usage"
    turn_id: str
    prompt_tokens: int
    completion_tokens: int
    cost: float


@_payload
class NoteEvent:
    """A notice the user saw (the loop stopped at maxSteps, ...); `for_model` is what the model reads."""

    type: ClassVar[str] = "note"
    text: str
    turn_id: str | None = None
    for_model: str | None = None


@_payload
class ErrorEvent:
    type: ClassVar[str] = "error"
    turn_id: str
    message: str


@_payload
class AppliedEvent:
    type: ClassVar[str] = "applied"
    proposal_id: str
    uri: str
    applied: bool


@_payload
class TurnEndEvent:
    type: ClassVar[str] = "turnEnd"
    turn_id: str
    state: TurnState
    message: str | None = None  # what the final turnStatus said


@_payload
class KernelEvent:
    """A kernel restarted (asked for) or died (its state was lost)."""

    type: ClassVar[str] = "kernel"
    language: str
    state: Literal["restarted", "died"]
    message: str


@_payload
class CompactionEvent:
    """The model's view starts here: `summary` condenses every turn up to and including `upTo`."""

    type: ClassVar[str] = "compaction"
    summary: str
    up_to: str
    summary_tokens: int | None = None
    turns: int | None = None  # how many turns this compaction condensed
    failed: str | None = None  # the summary could not be written: why (those turns were dropped instead)


@_payload
class ResetEvent:
    """In the log only: the conversation starts afresh here."""

    type: ClassVar[str] = "reset"


@_payload
class UndoEvent:
    """In the log only: the last user message and everything after it are dropped (`run_id`: from that
    user's own run on, when it came after the last message)."""

    type: ClassVar[str] = "undo"
    run_id: str | None = None


@_payload
class RedoEvent:
    """In the log only: the last undo is taken back (what it dropped comes back, before the events that
    came since, which are kernel news and notes only: anything new ends what can be redone)."""

    type: ClassVar[str] = "redo"


HistoryEvent = (
    UserEvent
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
    | ResetEvent
    | UndoEvent
    | RedoEvent
)
HISTORY_EVENTS: tuple[type, ...] = (
    UserEvent,
    AssistantEvent,
    ProposalEvent,
    DecisionEvent,
    RunEvent,
    UsageEvent,
    NoteEvent,
    ErrorEvent,
    AppliedEvent,
    TurnEndEvent,
    KernelEvent,
    CompactionEvent,
    ResetEvent,
    UndoEvent,
    RedoEvent,
)
