"""stdio transport on the event loop. pygls reads stdin through a thread pool (three thread hand-offs
per message); reading the pipe with asyncio's own reader keeps each request on the loop.

The server never outlives its client: serving ends at stdin's end (EOF), at `exit`, or when the client's
process is gone (the server's `client_gone` event: initialize's processId, watched by server.py), and the
loop's own end is bounded (TEARDOWN_SECONDS): tasks still running are cancelled and waited for that long,
and threads still running (an image being prepared, litellm's import) are not waited for, as the process
exits right after (__main__._exit_now)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from typing import Any, BinaryIO

from pygls.io_ import StdinAsyncReader, run_async
from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)

TEARDOWN_SECONDS = 1.0


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
    """connect_read_pipe takes pipes, sockets and character devices, not regular files; and only what the
    loop's selector can watch: epoll refuses /dev/null (EPERM), whose reader then never woke, so
    `interpreter-lsp < /dev/null` never saw its EOF and never exited. Such input is read in a thread."""
    import os
    import selectors
    import stat

    try:
        fd = stdin.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError):
        return False
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
        return False
    selector = selectors.DefaultSelector()
    try:
        selector.register(fd, selectors.EVENT_READ)
    except (OSError, ValueError):
        return False
    finally:
        selector.close()
    return True


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

    gone: asyncio.Event | None = getattr(server, "client_gone", None)

    async def serve() -> bool:
        """Serve; True when the client's process went (not the wire)."""
        asyncio.get_running_loop().set_exception_handler(_quiet_cancellations)
        reading = asyncio.ensure_future(
            run_async(
                stop_event=server._stop_event,
                reader=reader,
                protocol=server.protocol,
                logger=log,
                error_handler=server.report_server_error,
            )
        )
        if gone is None:
            await reading
            return False
        waiting = asyncio.ensure_future(gone.wait())
        try:
            await asyncio.wait({reading, waiting}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
        if reading.done():
            reading.result()  # SystemExit (`exit`), BrokenPipeError: as before
            return False
        reading.cancel()
        return True

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # as asyncio.run does
    try:
        if loop.run_until_complete(serve()):
            log.warning("The client's process is gone; shutting down.")
            code = 1
        else:
            log.info("The client closed the connection; shutting down.")
    except BrokenPipeError:
        log.error("Connection to the client is lost; shutting down.")
    except KeyboardInterrupt:
        pass
    except SystemExit as exc:  # pygls' `exit` handler: its code says whether `shutdown` came first
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        _end_loop(loop)
        server.shutdown()
    return code


def _end_loop(loop: asyncio.AbstractEventLoop) -> None:
    """asyncio.run's ending, bounded: cancel what still runs and give it TEARDOWN_SECONDS to end; do not
    wait for the default executor's threads (the process exits next)."""
    try:
        tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            ending = asyncio.gather(*tasks, return_exceptions=True)
            with contextlib.suppress(BaseException):
                loop.run_until_complete(asyncio.wait_for(ending, TEARDOWN_SECONDS))
        with contextlib.suppress(BaseException):
            loop.run_until_complete(asyncio.wait_for(loop.shutdown_asyncgens(), TEARDOWN_SECONDS))
    finally:
        asyncio.set_event_loop(None)
        loop.close()  # the default executor is shut down without waiting for its threads


_CONTENT_TYPE = b"application/vscode-jsonrpc; charset=utf-8"  # as pygls writes it


class CoalescingWriter:
    """pygls' writer interface over the wire, one write per two event-loop iterations: messages produced
    together (an output chunk and the run's final status, a response and a notification) leave in
    one system call instead of one each. Order is kept; nothing waits past the next iteration, and
    `flush` sends at once what must not wait (a run's final status)."""

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
            # Two iterations: a command's response is sent one iteration after what the command itself sent
            # (pygls answers from the handler task's done callback), and a run's final status one after the
            # kernel's idle status (the run's task resumes on the next iteration): each pair leaves in one write.
            loop.call_soon(loop.call_soon, self.flush)
            self._scheduled = True
        except RuntimeError:  # no loop (shutting down): write now
            self.flush()

    def write_message(self, message: dict[str, Any]) -> None:
        """A JSON-RPC message whose values are plain JSON (the server's notifications: protocol.to_wire),
        framed as pygls frames what it sends, without pygls' generic path: it builds a message object and
        hands every value to cattrs' unstructure on the way to JSON, ~2x the cost (18 against 8 us a
        runStatus; ~20 notifications a loop turn). Raises TypeError for a value JSON cannot hold, before
        anything is written."""
        body = json.dumps(message, separators=(",", ":")).encode()  # ASCII: its length is the bytes'
        self.write(b"Content-Length: %d\r\nContent-Type: %s\r\n\r\n%s" % (len(body), _CONTENT_TYPE, body))

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
