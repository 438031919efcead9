"""stdio transport on the event loop. pygls reads stdin through a thread pool (three thread hand-offs
per message); reading the pipe with asyncio's own reader keeps each request on the loop."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import BinaryIO

from pygls.io_ import StdinAsyncReader, run_async
from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)


class PipeReader:
    """pygls' reader interface (readline, readexactly) over an asyncio StreamReader on the pipe."""

    def __init__(self, stdin: BinaryIO) -> None:
        self._stdin = stdin
        self._reader: asyncio.StreamReader | None = None

    async def _stream(self) -> asyncio.StreamReader:
        if self._reader is None:
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader(limit=1 << 26)
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), self._stdin)
            self._reader = reader
        return self._reader

    async def readline(self) -> bytes:
        return await (await self._stream()).readline()

    async def readexactly(self, n: int) -> bytes:
        try:
            return await (await self._stream()).readexactly(n)
        except asyncio.IncompleteReadError as exc:
            return exc.partial


def _readable_by_loop(stdin: BinaryIO) -> bool:
    """connect_read_pipe takes pipes, sockets and character devices, not regular files."""
    import os
    import stat

    try:
        mode = os.fstat(stdin.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


def _quiet_cancellations(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
    """A handler still running when the client says `exit` (say `initialized` and `exit` in one read) is
    cancelled as the loop closes; pygls' callback then re-raises the CancelledError. That is the end the
    client asked for, not an error with a traceback on stderr."""
    if isinstance(context.get("exception"), asyncio.CancelledError):
        log.debug("cancelled at exit: %s", context.get("message"))
        return
    loop.default_exception_handler(context)


def serve_stdio(server: LanguageServer, stdin: BinaryIO, stdout: BinaryIO) -> int:
    """Serve until the client sends `exit` or the wire closes; the process's exit code: 1 for an `exit`
    without `shutdown` first (the LSP specification), else 0."""
    reader = PipeReader(stdin) if _readable_by_loop(stdin) else StdinAsyncReader(stdin, server.thread_pool)
    server._stop_event = threading.Event()
    server.protocol.set_writer(CoalescingWriter(stdout))
    code = 0

    async def serve() -> None:
        asyncio.get_running_loop().set_exception_handler(_quiet_cancellations)
        await run_async(
            stop_event=server._stop_event,
            reader=reader,
            protocol=server.protocol,
            logger=log,
            error_handler=server.report_server_error,
        )

    try:
        asyncio.run(serve())
    except BrokenPipeError:
        log.error("Connection to the client is lost; shutting down.")
    except KeyboardInterrupt:
        pass
    except SystemExit as exc:  # pygls' `exit` handler: its code says whether `shutdown` came first
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        server.shutdown()
    return code


class CoalescingWriter:
    """pygls' writer interface over the wire, one write per event-loop iteration: messages produced
    together (an output chunk and the run's final status, a response and a notification) leave in
    one system call instead of one each. Order is kept; nothing waits longer than the current iteration."""

    def __init__(self, stdout: BinaryIO) -> None:
        self._stdout = stdout
        self._pending: list[bytes] = []
        self._scheduled = False

    def write(self, data: bytes) -> None:
        self._pending.append(data)
        if self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
            # Two hops: a command's response is sent one iteration after what the command itself sent
            # (pygls answers from the handler task's done callback); both leave in one write.
            loop.call_soon(self.flush)
            self._scheduled = True
        except RuntimeError:  # no loop (shutting down): write now
            self.flush()

    def flush(self) -> None:
        self._scheduled = False
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        self._stdout.write(data)
        self._stdout.flush()

    def close(self) -> None:
        self.flush()
        self._stdout.close()
