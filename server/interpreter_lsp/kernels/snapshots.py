"""Variables undo, the server's side: installs snapshot_kernel.py in a python kernel and calls it silently.

Everything happens inside the kernel (a silent execute with a user expression: no history entry, no output,
no name in the user's namespace); the server never unpickles anything of the kernel's, it reads JSON. It is
the same for a local kernel and a gateway's (the fork happens on the kernel's machine). Each call is bounded;
a kernel that does not answer is named, never waited on for ever.

The calls after each run (the snapshot and the variables) go over a comm of the module's (`open_calls`, once per
kernel) when the kernel has one: ipykernel answers a comm message in ~1.5 ms of its time, a silent execute
request in ~3.8 (it takes a cell's path), and back to back the next run waits for it. A local kernel on unix
sockets answers them on a socket of its own instead (`open_socket`, `Calls`: read by the kernel's event loop
between requests, as a comm message is, without ipykernel's ~2-3 ms of dispatch). The answer has the shape of
user expressions' every way (`answer` reads them all). A kernel without ipykernel's comm manager keeps the
execute requests; a gateway's kernel, and every kernel when the portable paths are forced, keeps the comm.
"""

from __future__ import annotations

import ast
import asyncio
import collections
import contextlib
import json
import logging
import os
import uuid
from pathlib import Path
from typing import Any

from .backend import ExecuteReply, KernelBackend, KernelDied
from .introspect import VARIABLES

log = logging.getLogger(__name__)

MODULE = "_interpreter_lsp_snapshots"
TARGET = "interpreter_lsp_snapshots"  # snapshot_kernel.TARGET
PAGES_MODULE = "_interpreter_lsp_snapshot_pages"
_SOURCE = Path(__file__).with_name("snapshot_kernel.py").read_text(encoding="utf-8")
_PAGES_SOURCE = Path(__file__).with_name("snapshot_pages.py").read_text(encoding="utf-8")
# The packing module first, on Linux only (memfd, /proc/<pid>/mem: elsewhere snapshots stay forks), then the
# module, and introspect.py's variables expression compiled once in it: asked after every run, the
# expression's text compiled anew each time cost ~0.2 ms of the kernel's time (of ~0.35).
INSTALL = (
    f"(lambda m, p, sys: (sys.platform.startswith('linux') and (exec(compile({_PAGES_SOURCE!r}, "
    f"'<interpreter-lsp snapshot pages>', 'exec'), p.__dict__), sys.modules.__setitem__(p.__name__, p)), "
    f"exec(compile({_SOURCE!r}, '<interpreter-lsp snapshots>', 'exec'), m.__dict__), "
    f"setattr(m, '_VARIABLES', compile({VARIABLES['vars']!r}, '<interpreter-lsp variables>', 'eval')), "
    f"sys.modules.__setitem__(m.__name__, m)))(__import__('types').ModuleType({MODULE!r}), "
    f"__import__('types').ModuleType({PAGES_MODULE!r}), __import__('sys'))"
)
# The same answer as introspect.VARIABLES, from a kernel where the module is installed: (function, argument).
VARIABLES_CALL = {"vars": ("variables", None)}
SERVE = f"__import__({MODULE!r}).serve()"
OPEN_TIMEOUT = 10.0
WARM = f"__import__({MODULE!r}).warm()"
SNAP_TIMEOUT = 10.0  # a fork of a large kernel: page tables, ~10-15 ms per resident GB
# The largest answer read from a kernel's socket: the variables' summaries are bounded (introspect.py), a
# snapshot's answer is a few numbers. A frame announcing more is kernel code's doing: the socket is closed.
MAX_ANSWER = 16 * 1024 * 1024
RESTORE_TIMEOUT = 120.0  # fingerprints and the copy back of what changed: ~1.5 s per GB


class SnapshotError(Exception):
    """Why the kernel's variables cannot be compared or restored (a sentence for `notRestorable`)."""



async def install(kernel: KernelBackend) -> None:
    reply = await asyncio.wait_for(kernel.execute(INSTALL, None, silent=True), 30)
    if reply.status != "ok":
        raise SnapshotError(f"variables undo could not be set up in the kernel: {reply.content.get('evalue')}")


async def open_calls(kernel: KernelBackend) -> str | None:
    """Open the module's comm in the kernel (after `install`): its id, or None when the kernel has no comm
    manager (the calls then go as execute requests)."""
    comm_id = uuid.uuid4().hex
    try:
        served = await asyncio.wait_for(kernel.execute(SERVE, None, silent=True), OPEN_TIMEOUT)
        if served.status != "ok":
            return None
        opened = await asyncio.wait_for(
            kernel.send_comm("comm_open", {"comm_id": comm_id, "target_name": TARGET, "data": {}}), OPEN_TIMEOUT
        )
    except (asyncio.TimeoutError, KernelDied):
        return None
    return comm_id if opened.status == "ok" and opened.content.get("data", {}).get("opened") is True else None


class Calls:
    """The calls over the kernel's socket (snapshot_kernel.listen): answered in the order sent, one connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self._waiting: collections.deque[asyncio.Future[ExecuteReply]] = collections.deque()
        self.closed = False
        self._why_closed = "the kernel closed its calls socket"
        self._task = asyncio.ensure_future(self._read())

    def submit(self, calls: dict[str, tuple[str, Any]]) -> asyncio.Future[ExecuteReply]:
        """Send now (no await): in the kernel's socket ahead of anything sent after it."""
        if self.closed:
            raise KernelDied("the kernel's calls socket is closed")
        body = json.dumps([[name, function, argument] for name, (function, argument) in calls.items()]).encode()
        answered: asyncio.Future[ExecuteReply] = asyncio.get_running_loop().create_future()
        self._writer.write(len(body).to_bytes(4, "big") + body)
        self._waiting.append(answered)
        return answered

    async def _read(self) -> None:
        why = self._why_closed
        try:
            while True:
                size = int.from_bytes(await self._reader.readexactly(4), "big")
                if size > MAX_ANSWER:
                    why = f"the kernel announced an answer of {size} bytes on its calls socket"
                    return
                answers = json.loads(await self._reader.readexactly(size))
                if not isinstance(answers, dict):
                    why = "the kernel sent something other than answers on its calls socket"
                    return
                if not self._waiting:
                    why = "the kernel sent an answer nothing asked for"
                    return
                answered = self._waiting.popleft()
                if not answered.done():
                    answered.set_result(ExecuteReply("ok", {"status": "ok", "user_expressions": answers}))
        except (asyncio.IncompleteReadError, OSError, ValueError) as exc:
            if not isinstance(exc, asyncio.IncompleteReadError):
                why = f"the kernel's calls socket failed ({exc})"
        finally:
            if self.closed:  # closed here (close): its reason
                why = self._why_closed
            self.closed = True
            self._writer.close()
            while self._waiting:
                answered = self._waiting.popleft()
                if not answered.done():
                    answered.set_result(ExecuteReply("error", {"status": "error", "reason": why}))

    def close(self, why: str = "the server closed the kernel's calls socket") -> None:
        """What waits fails with `why`; nothing more is sent."""
        if not self.closed:
            self._why_closed = why
        self.closed = True
        self._task.cancel()


async def open_socket(kernel: KernelBackend) -> Calls | None:
    """Have the kernel (after `install`) answer the calls on a unix socket in its runtime directory, and connect
    to it; None where it cannot (a gateway's kernel, TCP, a loop that watches no descriptor): the comm stays."""
    path = kernel.calls_path()
    if path is None:
        return None
    try:
        listening = await asyncio.wait_for(
            kernel.execute(f"__import__({MODULE!r}).listen({path!r})", None, silent=True), OPEN_TIMEOUT
        )
        if listening.status != "ok":
            log.info("the kernel's calls socket is not available: %s", listening.content.get("evalue"))
            return None
        reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(path), OPEN_TIMEOUT)
    except (asyncio.TimeoutError, KernelDied, OSError) as exc:
        log.info("the kernel's calls socket is not available: %s", exc)
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)  # connected or not: nobody else is to (the kernel removes it too)
    return Calls(reader, writer)


def _expression(function: str, argument: Any) -> str:
    return f"__import__({MODULE!r}).{function}({json.dumps(argument)})"


def submit(
    kernel: KernelBackend,
    function: str,
    argument: Any,
    also: dict[str, tuple[str, Any]] | None = None,
    comm: str | Calls | None = None,
) -> asyncio.Future[ExecuteReply]:
    """Send the call now (no await): it is in the kernel's queue ahead of anything sent after it. `also`: other
    calls ({name: (function, argument)}) answered in the same request, before this one (under `r`). `comm`:
    as submit_calls'."""
    return submit_calls(kernel, {**(also or {}), "r": (function, argument)}, comm)


def submit_calls(
    kernel: KernelBackend, calls: dict[str, tuple[str, Any]], comm: str | Calls | None = None
) -> asyncio.Future[ExecuteReply]:
    """Send the calls ({name: (function, argument)}, answered in this order, each under its name) now. `comm`:
    the kernel's socket (`open_socket`), its comm's id (`open_calls`), or None (an execute request)."""
    if isinstance(comm, Calls):
        return comm.submit(calls)
    if comm is not None:
        listed = [[name, function, argument] for name, (function, argument) in calls.items()]
        sent = kernel.send_comm("comm_msg", {"comm_id": comm, "data": {"calls": listed}})
        # The answer comes as the comm message's data; read as an execute reply's content.
        return asyncio.ensure_future(_as_reply(sent))
    return kernel.submit("", None, silent=True, user_expressions={n: _expression(*call) for n, call in calls.items()})


async def _as_reply(sent: asyncio.Future[ExecuteReply]) -> ExecuteReply:
    reply = await sent
    if reply.status != "ok":
        return reply
    return ExecuteReply("ok", {"status": "ok", **reply.content.get("data", {})})


def warm(kernel: KernelBackend) -> asyncio.Future[ExecuteReply]:
    """Send snapshot_kernel.warm as a silent run (see there): after a snapshot, ahead of the next run."""
    return kernel.submit(WARM, None, silent=True)


def answer(reply: ExecuteReply) -> dict[str, Any]:
    """The call's JSON answer, or SnapshotError with a sentence that says why not."""
    result = reply.content.get("user_expressions", {}).get("r", {})
    if result.get("status") != "ok":
        name = result.get("ename") or reply.status
        if name in ("ModuleNotFoundError", "ImportError"):
            raise SnapshotError("the kernel restarted since: its variables before the run are gone")
        raise SnapshotError(f"{name}: {result.get('evalue', '')}".strip(": "))
    answer = json.loads(ast.literal_eval(result.get("data", {}).get("text/plain", "'{}'")))
    if isinstance(answer, dict) and answer.get("error"):
        raise SnapshotError(str(answer["error"]))
    return answer if isinstance(answer, dict) else {"value": answer}


async def call(kernel: KernelBackend, function: str, argument: Any, timeout: float) -> dict[str, Any]:
    try:
        reply = await asyncio.wait_for(submit(kernel, function, argument), timeout)
    except asyncio.TimeoutError as exc:
        raise SnapshotError(f"the kernel did not answer within {timeout:g} s") from exc
    return answer(reply)
