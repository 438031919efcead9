"""How the server talks to a local kernel over zmq: jupyter_client's manager with a command that can be
wrapped (the sandbox), encryption over TCP, the zmq context whose sockets never wait in a send, and the
watch on the stdin channel's handshake. jupyter_client and zmq are imported on the first kernel start,
not while the server answers `initialize`, and in a thread (`load`), not on the event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hmac
import logging
import threading
from collections.abc import Callable
from functools import cache
from typing import Any

from ..imports import retrying_deadlocks

log = logging.getLogger(__name__)

_lock = threading.Lock()
_plumbing: concurrent.futures.Future[None] | None = None


async def load() -> None:
    """Import jupyter_client and zmq (~65 ms here) in a thread, once; every kernel start awaits it first. On
    the loop's thread the first start, as the editor starts, stalled everything else meanwhile (the answers
    to the editor, a chat's first model request). A broken install raises its ImportError here."""
    future = _loading()
    if not future.done():
        await asyncio.wait([asyncio.wrap_future(future)])
    future.result()


def wait_loaded() -> None:
    """The same, blocking: for code that needs jupyter_client where it cannot await (a kernelspec listing).
    It is never imported beside the thread's import: two threads importing modules of one package can
    deadlock (each holds one module's lock and waits for the other's: seen with the kernelspec listing of a
    first chat against the first kernel start)."""
    _loading().result(timeout=LOAD_TIMEOUT)


LOAD_TIMEOUT = 120.0  # an import on a very busy machine; past it the caller fails, saying so


def _loading() -> concurrent.futures.Future[None]:
    global _plumbing
    with _lock:
        if _plumbing is None:
            _plumbing = concurrent.futures.Future()
            # RUNNING: an awaiter cancelled meanwhile (a start cancelled) cannot cancel it for everyone else.
            _plumbing.set_running_or_notify_cancel()
            threading.Thread(target=_import_into, args=(_plumbing,), name="kernel-plumbing", daemon=True).start()
        return _plumbing


def _import_into(future: concurrent.futures.Future[None]) -> None:
    try:
        retrying_deadlocks(_import_plumbing)
    except BaseException as exc:
        future.set_exception(exc)
    else:
        future.set_result(None)


def _import_plumbing() -> None:
    manager_class()
    import jupyter_client.asynchronous.client  # noqa: F401  (kernel.py's client)
    import zmq.asyncio  # noqa: F401


@cache
def manager_class() -> type:
    """AsyncKernelManager whose launch command can be wrapped (the bubblewrap sandbox). jupyter_client
    and zmq are imported here, on the first kernel start, not while the server answers `initialize`."""
    from jupyter_client.manager import AsyncKernelManager

    class Manager(AsyncKernelManager):
        command_wrapper: Callable[[list[str]], list[str]] | None = None

        def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
            cmd = super().format_kernel_cmd(extra_arguments)
            return self.command_wrapper(cmd) if self.command_wrapper else cmd

    return Manager


def encrypt(km: Any) -> None:
    """Over TCP, any local user can connect to the ports: the connection file's key signs every message, and
    where jupyter_client, pyzmq and the kernelspec allow it the sockets are also encrypted with CurveZMQ
    ("auto": only kernels whose spec declares it, so an older ipykernel in a workspace venv still starts)."""
    import zmq

    if km.has_trait("transport_encryption") and zmq.has("curve"):
        km.transport_encryption = "auto"


def new_context() -> Any:
    """A zmq context for one kernel's sockets (its client's channels and jupyter_client's control socket),
    every socket made with SNDTIMEO 0: a send that would block (the kernel reads nothing: it is stopped,
    stuck or gone, and a queue reached its high-water mark) raises zmq.Again at once. jupyter_client sends
    synchronously on the event loop (Session.send on the socket underneath the asyncio one), so this is
    what keeps the loop from ever waiting in a send; each send site handles Again (zmq_again)."""
    import zmq
    import zmq.asyncio

    context = zmq.asyncio.Context()
    context.setsockopt(zmq.SNDTIMEO, 0)  # pyzmq applies a context's options to every socket it makes
    return context


def deserialize(session: Any, parts: list[bytes]) -> dict[str, Any]:
    """A kernel's message as jupyter_client's `Session.deserialize` reads it (the signature checked against
    the connection key, a replayed one refused), without what it adds that nothing here reads and that made it
    75-110 us a message: the header dates parsed by dateutil (~25 us each of two), the adapter for protocol 4
    (called only for a kernel that speaks an older protocol). 25-31 us; 5-9 messages a run."""
    if session.auth is not None:
        signature = parts[0]
        if not signature:
            raise ValueError("Unsigned message")
        if signature in session.digest_history:
            raise ValueError(f"Duplicate signature: {signature!r}")
        session._add_digest(signature)  # the replay history, bounded as jupyter_client bounds it
        if not hmac.compare_digest(signature, session.sign(parts[1:5])):
            raise ValueError(f"Invalid signature: {signature!r}")
    if len(parts) < 5:
        raise TypeError(f"malformed message: {len(parts)} parts, at least 5 expected")
    unpack = session.unpack
    header = unpack(parts[1])
    message = {
        "header": header,
        "msg_id": header["msg_id"],
        "msg_type": header["msg_type"],
        "parent_header": unpack(parts[2]),
        "metadata": unpack(parts[3]),
        "content": unpack(parts[4]),
        "buffers": [memoryview(b) for b in parts[5:]],
    }
    if isinstance(header.get("version"), str) and header["version"].startswith("5."):
        return message
    from jupyter_client.adapter import adapt

    return adapt(message)


def zmq_again() -> type[Exception]:
    import zmq

    return zmq.Again


class StdinWatch:
    """Follows the stdin channel's connection. The kernel sends an input() request through a ROUTER socket,
    which silently drops a message to a peer whose handshake is not done yet; the kernel then waits for an
    answer for ever. Shell and iopub answering says nothing of stdin (its own socket, its own reconnects),
    so a start waits for this handshake too (`wait`)."""

    def __init__(self, kc: Any, language: str) -> None:
        self._language = language
        self.up = asyncio.Event()  # the stdin channel's handshake with the kernel is done
        self._task: asyncio.Task[None] | None = None
        try:
            import zmq

            socket = kc.stdin_channel.socket
            monitor = socket.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
        except Exception as exc:  # no monitor here: start as before, without waiting for the handshake
            log.info("the stdin channel cannot be monitored (%s)", exc)
            self.up.set()
            return
        self._task = asyncio.create_task(self._follow(socket, monitor), name=f"kernel-stdin-{language}")

    async def _follow(self, socket: Any, monitor: Any) -> None:
        import zmq
        from zmq.utils.monitor import parse_monitor_message

        try:
            while True:
                event = parse_monitor_message(await monitor.recv_multipart())
                if event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    self.up.set()
                elif event["event"] == zmq.EVENT_DISCONNECTED:
                    self.up.clear()  # the kernel went (a restart): its next start waits for the new handshake
        except Exception as exc:  # the monitor failed: nothing waits on it any more
            log.info("watching the stdin channel stopped: %s", exc)
            self.up.set()
        finally:
            with contextlib.suppress(Exception):
                socket.disable_monitor()
            with contextlib.suppress(Exception):
                monitor.close(linger=0)

    async def wait(self, timeout: float) -> None:
        """Until the handshake is done, at most `timeout` seconds (a start whose handshake event was missed
        goes on after that)."""
        if self.up.is_set():
            return
        try:
            await asyncio.wait_for(self.up.wait(), timeout)
        except asyncio.TimeoutError:
            log.info("the %s kernel's stdin handshake was not seen within %.0f s; going on", self._language, timeout)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
