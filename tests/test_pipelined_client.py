"""A client that does not wait for the `initialize` answer before it sends more (the workspace folders open
right after that answer: server.InterpreterServer.open_workspaces): what it sends in the same write finds
them open."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from harness import server_env


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


async def read_message(stdout: asyncio.StreamReader) -> dict[str, Any]:
    length = 0
    while (line := await stdout.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(await stdout.readexactly(length))


async def test_requests_sent_with_initialize_in_one_write_find_the_folders_open(tmp_path: Path) -> None:
    root = tmp_path / "work space"
    root.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "interpreter_lsp", cwd=str(tmp_path), env=server_env(home),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )
    assert server.stdin is not None and server.stdout is not None
    uri = root.as_uri()
    server.stdin.write(
        frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": None, "rootUri": uri, "capabilities": {},
            "workspaceFolders": [{"uri": uri, "name": "ws"}]}})
        + frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        + frame({"jsonrpc": "2.0", "id": 2, "method": "workspace/executeCommand",
                 "params": {"command": "interpreter.status", "arguments": [{"uri": uri}]}})
    )
    await server.stdin.drain()
    try:
        answers: dict[int, dict[str, Any]] = {}
        while 2 not in answers:
            message = await asyncio.wait_for(read_message(server.stdout), 60)
            if "id" in message and "method" not in message:
                answers[message["id"]] = message
        assert "capabilities" in answers[1]["result"]
        assert answers[2]["result"]["workspaces"] == [str(root)], answers[2]
    finally:
        server.stdin.write(frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}) + frame(
            {"jsonrpc": "2.0", "method": "exit"}))
        await server.stdin.drain()
        server.stdin.close()
        await asyncio.wait_for(server.wait(), 60)
