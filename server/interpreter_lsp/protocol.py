"""The interpreter-lsp protocol, version 1: every custom command and notification name, and payloads.

This is the one place in the server where these names are spelled. docs/protocol.md documents them.
Payloads are plain attrs classes; `to_wire` turns one into the camelCase JSON object clients receive.
"""

from __future__ import annotations

from typing import Any, Literal

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
HISTORY = "interpreter.history"
VARIABLES = "interpreter.variables"
STATUS = "interpreter.status"
EXPORT_NOTEBOOK = "interpreter.exportNotebook"

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
    HISTORY,
    VARIABLES,
    STATUS,
    EXPORT_NOTEBOOK,
)

# Notifications: server -> client.
MESSAGE = "interpreter/message"
PROPOSAL = "interpreter/proposal"
OUTPUT = "interpreter/output"
RUN_STATUS = "interpreter/runStatus"
TURN_STATUS = "interpreter/turnStatus"
KERNEL_STATUS = "interpreter/kernelStatus"

# Requests: server -> client. Sent only to clients that declare support (see INPUT_CAPABILITY).
INPUT = "interpreter/input"
# A client that can answer `interpreter/input` says so in initializationOptions
# ({"capabilities": {"input": true}}) or in capabilities.experimental.interpreter.input.
INPUT_CAPABILITY = "input"

RiskLevel = Literal["low", "medium", "high"]
RunState = Literal["queued", "running", "ok", "error", "interrupted", "died", "timeout"]
TurnState = Literal["thinking", "awaiting-approval", "running", "done", "cancelled", "error"]
OutputKind = Literal["stdout", "stderr", "result", "display", "error"]
KernelState = Literal["starting", "idle", "busy", "dead", "restarting", "stopped"]

FINAL_RUN_STATES: frozenset[str] = frozenset({"ok", "error", "interrupted", "died", "timeout"})
FINAL_TURN_STATES: frozenset[str] = frozenset({"done", "cancelled", "error"})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def to_wire(payload: Any) -> dict[str, Any]:
    """An attrs payload as the JSON object on the wire: camelCase keys, None fields left out."""
    out: dict[str, Any] = {}
    for field in attrs.fields(type(payload)):
        value = getattr(payload, field.name)
        if value is None:
            continue
        if attrs.has(type(value)):
            value = to_wire(value)
        elif isinstance(value, (list, tuple)):
            value = [to_wire(v) if attrs.has(type(v)) else v for v in value]
        out[_camel(field.name)] = value
    return out


@attrs.define
class Risk:
    level: RiskLevel
    reasons: list[str] = attrs.field(factory=list)


@attrs.define
class MessageParams:
    """A piece of assistant Markdown. `delta` appends to what came before with the same turnId."""

    turn_id: str
    seq: int
    delta: str
    done: bool


@attrs.define
class ProposalParams:
    proposal_id: str
    turn_id: str
    language: str
    code: str
    risk: Risk
    auto_run: bool


@attrs.define
class OutputParams:
    run_id: str
    seq: int
    kind: OutputKind
    text: str | None = None
    data: dict[str, Any] | None = None
    # For kind "error": the exception's name and value, the traceback as plain text in `text`.
    ename: str | None = None
    evalue: str | None = None


@attrs.define
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
    origin: str | None = None
    # On final states: workspace files the run created, modified or deleted ([{path, change}]),
    # relative to `root`, the workspace folder the run belongs to.
    files: list[dict[str, str]] | None = None
    root: str | None = None


@attrs.define
class TurnStatusParams:
    turn_id: str
    state: TurnState
    message: str | None = None


@attrs.define
class KernelStatusParams:
    """Kernel life-cycle, for status bars: starting / idle / busy / dead / restarting / stopped."""

    language: str
    state: KernelState
    message: str | None = None


@attrs.define
class InputParams:
    """Code asked for input (`input()`, `getpass`). The answer is `{value: str}` or null to cancel."""

    run_id: str
    prompt: str
    password: bool
