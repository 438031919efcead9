"""The one interface every kernel backend offers to the pool, runs and introspection: a local process
(`kernel.Kernel`) or a kernel on a Jupyter gateway (`gateway.GatewayKernel`). Nothing above `kernels/`
knows where a kernel lives; what differs (a pid, the sandbox, files-touched reporting) the pool says in
the status."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from .kernel import ExecuteReply, ExecutionSink, KernelDied, KernelStartError, StateCallback
from .specs import KernelChoice

__all__ = [
    "ExecuteReply",
    "ExecutionSink",
    "KernelBackend",
    "KernelDied",
    "KernelStartError",
    "StateCallback",
]


@runtime_checkable
class KernelBackend(Protocol):
    """One kernel of one language.

    - `state` is "stopped" | "starting" | "idle" | "busy" | "restarting" | "dead"; every change goes to the
      state callback given at construction, with a sentence when there is something to say.
    - `submit` sends an execute request at once (no await in between) and returns a future that resolves
      with the reply once the kernel is idle again, or with status "died" / "interrupted" (a "reason" in
      the content says why, when known). Input requests go to the sink's `on_input`; None interrupts.
    - `send_comm` sends a comm_open or comm_msg of the server's own the same way; its future resolves at the
      kernel's idle status for it with status "ok" and content {"data": the data of the first comm message
      the kernel sent in answer}, or status "error" when it sent none.
    - A kernel that dies unexpectedly fails its pending executions with "died" and awaits its death
      callback (the pool restarts it there).
    """

    choice: KernelChoice
    language: str
    state: str
    started_at: float | None

    async def start(self) -> None: ...

    async def restart(self, reason: str = "interrupted") -> None: ...

    async def shutdown(self) -> None: ...

    async def interrupt(self) -> None: ...

    def pid(self) -> int | None: ...

    def calls_path(self) -> str | None:
        """Where a unix socket of the kernel's own may be (variables undo's calls: snapshots.open_socket), or
        None: a kernel on another machine, or on TCP."""
        ...

    def submit(
        self,
        code: str,
        sink: ExecutionSink | None,
        *,
        allow_stdin: bool = False,
        silent: bool = False,
        user_expressions: dict[str, str] | None = None,
    ) -> asyncio.Future[ExecuteReply]: ...

    def send_comm(self, msg_type: str, content: dict[str, Any]) -> asyncio.Future[ExecuteReply]: ...

    async def execute(
        self,
        code: str,
        sink: ExecutionSink | None,
        *,
        allow_stdin: bool = False,
        silent: bool = False,
        user_expressions: dict[str, str] | None = None,
    ) -> ExecuteReply: ...


DeathCallback = Callable[[KernelBackend], Awaitable[None]]
