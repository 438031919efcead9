"""The one execution path: the requests in flight on a kernel and the routing of the kernel's messages to
them, for every backend (a local kernel's zmq channels, a gateway's websocket). A backend sends a request,
registers it here, and hands every message it reads to `route`; what is not an execution of ours (another
client's, the gateway's own news) comes back to the backend.

An execution ends on its shell reply *and* its iopub idle status, whichever comes last (the reply can
precede trailing output), or NO_REPLY_WAIT after its idle status when no reply came (the kernel dropped
it). Its busy status says it started (`ExecutionSink.on_busy`), the first of its reply and its idle status that
its code ended (`on_ended`: a run's files can be settled while the rest comes); its output goes to its sink; its input
requests go to the backend's `answer_input`. The server's own silent requests (no sink:
a snapshot, the variables, kernel_info) do not make the kernel show busy.

A comm message of the server's own (`comm=True`: a comm_open or comm_msg, which no shell reply answers) ends
at its idle status with the data of the first comm message the kernel sent in answer to it, or with status
"error" when it sent none (an interrupt landed in the handler, no such comm).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

# After its idle status, how long a request's reply may still take to arrive (the shell socket is read apart
# from iopub, and the reply is sent before the idle status): past it, there is none.
NO_REPLY_WAIT = 5.0
# A comm message's reply when the kernel answered nothing before its idle status (no such comm, or its target
# gone: kernel code can close it or unregister the target).
NO_COMM_ANSWER = "the kernel sent no answer to the comm message"


class ExecutionSink(Protocol):
    """Receives what one execution produces, in order."""

    def on_busy(self) -> None: ...

    def on_ended(self) -> None:
        """Its code ended (the first of its reply and its idle status came): what it wrote is written, though
        output may still come."""

    def on_iopub(self, msg_type: str, content: dict[str, Any]) -> None: ...

    async def on_input(self, prompt: str, password: bool) -> str | None: ...


@dataclass
class ExecuteReply:
    status: str  # "ok" | "error" | "aborted" | "died" | "interrupted"
    content: dict[str, Any] = field(default_factory=dict)


@dataclass
class Pending:
    sink: ExecutionSink | None
    done: asyncio.Future[ExecuteReply]
    frame: str = ""  # a gateway's request as sent (sent again after a reconnect if it never arrived)
    idle: bool = False
    reply: dict[str, Any] | None = None
    saw_iopub: bool = False  # any iopub message for it: the request reached the kernel
    ended: bool = False  # its reply or its idle status came (the sink was told)
    sent_epoch: int = -1  # a gateway's connection it went out on
    replied: asyncio.Event = field(default_factory=asyncio.Event)
    no_reply: asyncio.TimerHandle | None = None  # idle came first: the check that a reply still comes
    comm: bool = False  # a comm message: answered on iopub (a comm_msg), never on shell


class Executions:
    def __init__(
        self,
        state: Callable[[], str],
        set_state: Callable[[str], None],
        answer_input: Callable[[ExecutionSink, dict[str, Any], dict[str, Any]], None],
    ) -> None:
        self.pending: dict[str, Pending] = {}
        self._state = state
        self._set_state = set_state
        self._answer_input = answer_input

    def register(self, msg_id: str, sink: ExecutionSink | None, frame: str = "", *, comm: bool = False) -> Pending:
        """Before the request can be answered (no await between its send and this)."""
        pending = Pending(sink, asyncio.get_running_loop().create_future(), frame, comm=comm)
        self.pending[msg_id] = pending
        return pending

    def forget_when_done(self, msg_id: str) -> None:
        self.pending[msg_id].done.add_done_callback(lambda _f: self.pending.pop(msg_id, None))

    def fail_all(self, status: str, detail: dict[str, Any]) -> None:
        """The kernel (or the way to it) went: everything in flight ends with `status`."""
        for pending in list(self.pending.values()):
            if not pending.done.done():
                pending.done.set_result(ExecuteReply(status, dict(detail)))
            pending.replied.set()  # a start waiting for a kernel_info reply looks again at once
        self.pending.clear()

    def route(self, channel: str, msg_type: str, content: dict[str, Any], parent: dict[str, Any],
              header: dict[str, Any]) -> bool:
        """Route a message to the execution it answers; False when it answers none of ours."""
        pending = self.pending.get(parent.get("msg_id", ""))
        if pending is None:
            return False
        if channel == "iopub":
            pending.saw_iopub = True
            if msg_type == "status":
                state = content.get("execution_state")
                if state in ("busy", "idle") and self._state() in ("busy", "idle") and pending.sink is not None:
                    self._set_state(state)
                if state == "busy" and pending.sink is not None:
                    pending.sink.on_busy()
                elif state == "idle":
                    pending.idle = True
                    if pending.comm and pending.reply is None:  # iopub is in order: no answer will come
                        pending.reply = {"status": "error", "reason": NO_COMM_ANSWER}
                    self._ended(pending)
                    self._finish(pending)
                    if pending.reply is None and not pending.done.done():
                        pending.no_reply = asyncio.get_running_loop().call_later(NO_REPLY_WAIT, self._no_reply, pending)
            elif pending.comm and msg_type == "comm_msg":
                if pending.reply is None:
                    pending.reply = {"status": "ok", "data": content.get("data") or {}}
            elif pending.sink is not None:
                pending.sink.on_iopub(msg_type, content)
        elif channel == "shell" and not pending.comm:
            pending.reply = content
            pending.replied.set()
            self._ended(pending)
            self._finish(pending)
        elif channel == "stdin" and msg_type == "input_request" and pending.sink is not None:
            self._answer_input(pending.sink, content, header)
        return True

    @staticmethod
    def _ended(pending: Pending) -> None:
        if not pending.ended and pending.sink is not None:
            pending.ended = True
            pending.sink.on_ended()

    @staticmethod
    def _no_reply(pending: Pending) -> None:
        """Idle, and still no reply: the kernel ended the request without answering it. ipykernel does that
        when a KeyboardInterrupt lands in its handler before the code starts (it logs "KeyboardInterrupt
        caught in kernel"): without this the run would wait for ever, and an interrupt's fallback restart
        would take the kernel's state for nothing."""
        if pending.reply is None and not pending.done.done():
            pending.done.set_result(ExecuteReply("aborted", {
                "status": "aborted", "reason": "the kernel ended this request without answering it",
            }))

    @staticmethod
    def _finish(pending: Pending) -> None:
        # The reply can precede trailing iopub output: finish on idle *and* reply.
        if pending.idle and pending.reply is not None and not pending.done.done():
            if pending.no_reply is not None:
                pending.no_reply.cancel()
            pending.done.set_result(ExecuteReply(str(pending.reply.get("status", "ok")), pending.reply))
