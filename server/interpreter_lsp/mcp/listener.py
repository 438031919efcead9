"""The language server's side of the agents' socket: one unix socket per workspace (kernels/runtime.py:
`agent_socket`, 0600 in a 0700 directory of this user), on which `interpreter-lsp mcp` processes ask for
the workspace's kernel. Like commands.py, it only translates: each request is validated (wire.py) and
becomes one call of the Workspace facade; code reaches a kernel only through the gate.

Who may connect: the socket's permissions, and on Linux the peer's credentials (SO_PEERCRED: the same
uid as this server), checked before anything is read. Everything that arrives is untrusted input.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from ..kernels import runtime
from . import wire

if TYPE_CHECKING:
    from ..workspace import Workspace

log = logging.getLogger(__name__)


def peer_uid(sock: socket.socket | None) -> int | None:
    """The connecting process's uid (Linux SO_PEERCRED), or None where it cannot be read."""
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", raw)
    return uid


class AgentListener:
    """Serves one workspace's socket until `close`."""

    def __init__(self, ws: Workspace, redact: Any) -> None:
        self.ws = ws
        self._redact = redact
        self.path: Path | None = None
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> Path | None:
        """Listen on the workspace's socket. None (logged) when another live server already serves it."""
        try:
            runtime.agents_dir(create=True)
        except OSError as exc:
            log.warning("other agents cannot reach this workspace: %s", exc)
            return None
        path = runtime.agent_socket(self.ws.root)
        if path.exists() or path.is_symlink():
            if await _answers(path):
                log.info("another language server serves %s to agents already (%s)", self.ws.root, path)
                return None
            path.unlink(missing_ok=True)  # a server that is gone left it
        old = os.umask(0o177)  # created 0600: no window in which another user could connect
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=str(path), limit=wire.MAX_LINE)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        self.path = path
        log.info("agents reach %s through %s", self.ws.root, path)
        return path

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self.path is not None:
            with contextlib.suppress(OSError):
                if self.path.exists():
                    self.path.unlink()
            self.path = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        uid = peer_uid(writer.get_extra_info("socket"))
        if uid is not None and uid != os.getuid():
            log.warning("refused an agent connection from uid %d", uid)
            writer.close()
            self._connections.discard(task)
            return
        calls: list[str] = []  # this connection's calls: withdrawn when it goes away
        pending: set[asyncio.Task[None]] = set()
        lock = asyncio.Lock()

        async def answer(message: dict[str, Any]) -> None:
            data = json.dumps(self._redact(message), ensure_ascii=False, separators=(",", ":")) + "\n"
            async with lock:
                writer.write(data.encode("utf-8", "surrogatepass"))
                await writer.drain()

        async def handle(line: bytes) -> None:
            request_id: Any = None
            try:
                request_id, method, params = wire.parse_request(line)
                result = await self._call(method, params, calls)
                await answer({"id": request_id, "result": result})
            except (wire.BadRequest, UserError) as exc:
                await answer({"id": request_id, "error": str(exc)})
            except (ConnectionError, asyncio.CancelledError):
                raise
            except Exception as exc:
                log.exception("agent request failed")
                await answer(
                    {"id": request_id, "error": f"The language server failed ({type(exc).__name__}); see its log."}
                )

        try:
            while True:
                try:
                    line = await reader.readline()
                except ValueError:  # a line over the limit: say so, and stop reading this connection
                    await answer({"id": None, "error": f"A request is limited to {wire.MAX_LINE} bytes."})
                    break
                if not line:
                    break
                job = asyncio.create_task(handle(line))
                pending.add(job)
                job.add_done_callback(pending.discard)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            for job in list(pending):
                job.cancel()
            self.ws.agent_withdraw(calls)
            with contextlib.suppress(Exception):
                writer.close()
            self._connections.discard(task)

    async def _call(self, method: str, params: dict[str, Any], calls: list[str]) -> Any:
        ws = self.ws
        if method == "run":
            code, language, agent = wire.run_params(params)
            started = await ws.agent_run(code, language, agent)
            calls.append(started["callId"])
            return started
        if method == "wait":
            call_id, timeout = wire.wait_params(params)
            if call_id not in calls:  # another connection's call (another agent's output): not this one's to read
                return {"callId": call_id, "state": "unknown"}
            return await ws.agent_wait(call_id, timeout)
        if method == "variables":
            return {"variables": await ws.variables(wire.language_param(params))}
        if method == "interrupt":
            return {"stopped": await ws.agent_interrupt(wire.agent_param(params))}
        if method == "restart":
            language = ws.check_language(wire.language_param(params))
            agent = wire.agent_param(params)
            await ws.restart_kernel(language)
            ws.ctx.show_message("info", f"{agent} restarted the {language} kernel (over MCP).")
            return {"restarted": language}
        if method == "status":
            return ws.agent_status()
        raise wire.BadRequest(f"unknown method {method!r}")  # parse_request allows only the known ones


async def _answers(path: Path) -> bool:
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(path)), 2)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True
