"""`interpreter-lsp mcp`: an MCP server over stdio (the official `mcp` SDK) that gives another agent the
workspace's kernel, through the language server the editor runs for that workspace. Every `run_code`
becomes a proposal in the editor (the gate, gate.py): it runs only once the user approves it there, or
when the auto-run policy would run our own model's code by itself. stdout is the MCP wire (the SDK's
stdio server keeps fd 1 pointed at stderr while it serves); nothing here prints.

A call that waits longer than `--max-wait` returns its run id; `run_status(run_id, wait)` picks it up.
While it waits, a progress notification goes out every PROGRESS_EVERY seconds (for clients that sent a
progress token), so a client's idle timeout does not end it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ImageContent, TextContent, ToolAnnotations

from .. import __version__
from ..kernels import runtime
from . import wire

log = logging.getLogger(__name__)

PROGRESS_EVERY = 2.0  # seconds between progress notifications while a call waits or runs (the goal: <= 10)
DEFAULT_MAX_WAIT = 50.0  # seconds a call holds before it returns its run id (clients time out at ~60 s)

RUN_CODE_HELP = (
    "Run code in the user's own Jupyter kernel of this workspace (python, shell, or another installed "
    "kernel), where the user's variables live. Every call is shown to the user in their editor and WAITS for "
    "them to approve, edit or reject it (unless they let such code run by itself); it may take minutes. If "
    "the user edits the code, what ran is returned with the result. If it has not finished within the wait, "
    "the result gives a run id: call run_status with it. A rejection is an error with the user's reason."
)


class NotAttached(Exception):
    """No language server serves the workspace: what to do, in words."""


def find_socket(start: Path) -> tuple[Path, Path] | None:
    """(workspace root, socket) of the nearest directory, from `start` up, that an editor serves."""
    here = Path(os.path.realpath(start))
    for directory in (here, *here.parents):
        path = runtime.agent_socket(directory)
        if path.exists():
            return directory, path
    return None


class Connection:
    """One connection to the language server's socket: requests with ids, answers in any order."""

    def __init__(self, workspace: Path, explicit: bool) -> None:
        self.workspace = workspace
        self.explicit = explicit
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._reading: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    def _target(self) -> tuple[Path, Path]:
        if self.explicit:
            path = runtime.agent_socket(self.workspace)
            if path.exists():
                return self.workspace, path
        elif (found := find_socket(self.workspace)) is not None:
            return found
        raise NotAttached(
            f"No editor has {self.workspace} open with interpreter-lsp, so there is no kernel to run code in. "
            "Open that folder in VS Code, Neovim or Emacs with interpreter-lsp (the language server serves "
            "agents the workspace it has open), then call this tool again."
        )

    async def _connect(self) -> None:
        async with self._lock:
            if self._writer is not None and not self._writer.is_closing():
                return
            root, path = self._target()
            try:
                self._reader, self._writer = await asyncio.open_unix_connection(str(path), limit=wire.MAX_LINE)
            except OSError as exc:
                raise NotAttached(
                    f"The language server for {root} does not answer on {path} ({exc.strerror or exc}): the editor "
                    "may have closed. Open the folder in your editor again, then call this tool again."
                ) from None
            self._reading = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self._reader is not None
        try:
            while line := await self._reader.readline():
                try:
                    message = json.loads(line)
                    future = self._pending.pop(message.get("id"), None)
                except (ValueError, AttributeError, TypeError):
                    continue
                if future is not None and not future.done():
                    future.set_result(message)
        except (OSError, ValueError):
            pass
        finally:
            self._writer = None
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(NotAttached("The language server closed the connection (the editor closed?)."))
            self._pending.clear()

    async def request(self, method: str, **params: Any) -> Any:
        await self._connect()
        assert self._writer is not None
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        data = json.dumps({"id": request_id, "method": method, "params": params}, ensure_ascii=False) + "\n"
        self._writer.write(data.encode("utf-8", "surrogatepass"))
        await self._writer.drain()
        answer = await future
        if "error" in answer:
            raise ToolFailure(str(answer["error"]))
        return answer.get("result")


class ToolFailure(Exception):
    pass


def build(workspace: Path, explicit: bool, max_wait: float = DEFAULT_MAX_WAIT) -> Any:
    """The MCP server: its tools call the language server through one Connection."""
    conn = Connection(workspace, explicit)
    app = MCPServer(
        "interpreter-lsp",
        version=__version__,
        instructions=(
            "The user's own Jupyter kernel of their workspace, shared with their editor. Code you run is "
            "shown to the user and waits for their approval in the editor."
        ),
    )

    def agent_of(ctx: Context) -> str:
        params = ctx.session.client_params
        info = params.client_info if params is not None else None
        if info is None:
            return "an agent"
        version = f" {info.version}" if getattr(info, "version", None) else ""
        return f"{info.title or info.name}{version}"

    async def call(method: str, **params: Any) -> Any:
        try:
            return await conn.request(method, **params)
        except (NotAttached, ToolFailure) as exc:
            raise ToolError(str(exc)) from None

    async def follow(ctx: Context, call_id: str, hold: float) -> CallToolResult:
        """Wait for the call up to `hold` seconds, with progress; its result, or where it is."""
        deadline = time.monotonic() + hold
        step = 0
        while True:
            left = max(0.0, deadline - time.monotonic())
            answer = await call("wait", callId=call_id, timeout=min(PROGRESS_EVERY, left))
            state = answer.get("state")
            if state not in ("awaiting-approval", "running"):
                return result_of(answer)
            if time.monotonic() >= deadline:
                return still(answer)
            step += 1
            said = "waiting for the user's approval in the editor" if state == "awaiting-approval" else "running"
            with contextlib.suppress(Exception):  # a client that did not ask for progress
                await ctx.report_progress(step, None, f"{call_id}: {said}")

    def still(answer: dict[str, Any]) -> CallToolResult:
        state, call_id = answer.get("state"), answer.get("callId")
        doing = "still waits for the user's approval" if state == "awaiting-approval" else "is still running"
        text = (
            f"Run {call_id} {doing}. Call run_status with run_id {call_id!r} (and wait, in seconds) for its "
            "result; interrupt stops it."
        )
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structured_content={"runId": call_id, "state": state},
        )

    def result_of(answer: dict[str, Any]) -> CallToolResult:
        state = answer.get("state")
        call_id = answer.get("callId")
        if state == "rejected":
            reason = answer.get("reason")
            text = f"The user rejected this code{': ' + reason if reason else ' (no reason given)'}. It did not run."
            return CallToolResult(
                content=[TextContent(type="text", text=text)],
                structured_content={"runId": call_id, "state": "rejected", "reason": reason},
                is_error=True,
            )
        if state in ("expired", "applied", "unknown"):
            text = {
                "expired": "The proposal expired before the user decided (the editor closed, or you interrupted it); "
                "it did not run.",
                "applied": f"The user wrote this code into {answer.get('where')} instead of running it; "
                "it did not run.",
                "unknown": f"No run {call_id!r} is known to this workspace's language server (it may have restarted).",
            }[state]
            return CallToolResult(
                content=[TextContent(type="text", text=text)],
                structured_content={"runId": call_id, "state": state},
                is_error=True,
            )
        parts = []
        if answer.get("edited"):
            parts.append(
                f"The user edited your code before approving it. What ran:\n```\n{answer.get('code', '')}\n```"
            )
        output = answer.get("output") or "(no output)"
        head = f"Run {call_id}: {state} in {answer.get('durationMs', 0)} ms."
        if answer.get("message"):
            head += f" {answer['message']}"
        parts.append(f"{head}\n{output}")
        content: list[Any] = [TextContent(type="text", text="\n\n".join(parts))]
        content += [ImageContent(type="image", data=png, mime_type="image/png") for png in answer.get("images") or []]
        return CallToolResult(
            content=content,
            structured_content={
                "runId": call_id,
                "state": state,
                "edited": bool(answer.get("edited")),
                "durationMs": answer.get("durationMs"),
            },
            is_error=state != "ok",
        )

    code_running = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=True)

    @app.tool(description=RUN_CODE_HELP, annotations=code_running)
    async def run_code(code: str, ctx: Context, language: str = "python") -> CallToolResult:
        started = await call("run", code=code, language=language, agent=agent_of(ctx))
        return await follow(ctx, started["callId"], max_wait)

    @app.tool(
        description=(
            "The result of a run_code call that had not finished (its run id), waiting up to `wait` seconds "
            "(with progress) for the user's decision and the run."
        ),
        annotations=ToolAnnotations(readOnlyHint=True),
    )
    async def run_status(run_id: str, ctx: Context, wait: float = 30.0) -> CallToolResult:
        return await follow(ctx, run_id, max(0.0, min(float(wait), max_wait)))

    @app.tool(
        description="The variables of the user's python kernel (name, type, a short value).",
        annotations=ToolAnnotations(readOnlyHint=True),
    )
    async def variables() -> str:
        found = await call("variables", language="python")
        return json.dumps(found.get("variables", []), ensure_ascii=False)

    @app.tool(
        description="Stop your own runs and withdraw your proposals that still wait for the user.",
        annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False),
    )
    async def interrupt(ctx: Context) -> str:
        stopped = await call("interrupt", agent=agent_of(ctx))
        return f"Stopped {stopped.get('stopped', 0)} of your runs or proposals."

    @app.tool(
        description="Restart a kernel of the workspace (its variables and imports are lost; the user is told).",
        annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True),
    )
    async def restart(ctx: Context, language: str = "python") -> str:
        done = await call("restart", language=language, agent=agent_of(ctx))
        return f"The {done.get('restarted')} kernel restarted."

    @app.tool(
        description="The workspace, its kernels and languages, and what waits for the user's decision.",
        annotations=ToolAnnotations(readOnlyHint=True),
    )
    async def status() -> str:
        return json.dumps(await call("status"), ensure_ascii=False)

    return app


def main(workspace: str | None, max_wait: float) -> int:
    import sys

    explicit = workspace is not None
    root = Path(os.path.realpath(os.path.expanduser(workspace))) if workspace else Path.cwd()
    if explicit and not root.is_dir():
        print(f"interpreter-lsp mcp: --workspace {workspace}: no such directory", file=sys.stderr)
        return 2
    found = runtime.agent_socket(root).exists() if explicit else find_socket(root) is not None
    if not found:
        # Not fatal: the editor may open the folder later; each tool call says what to do meanwhile.
        print(
            f"interpreter-lsp mcp: no editor has {root} open with interpreter-lsp yet; open it in your editor "
            "(the tools answer with this until then)",
            file=sys.stderr,
        )
    app = build(root, explicit, max_wait)
    app.run("stdio")
    return 0
