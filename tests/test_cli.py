"""The command line as an editor (or a person) starts it: exit codes over stdio, one-line errors, --version."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import interpreter_lsp
from harness import server_env

WAIT = 60.0  # generous: a loaded machine starts Python slowly


async def _start(home: Path, cwd: Path, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "interpreter_lsp", *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=server_env(home), cwd=str(cwd),
    )  # fmt: skip


def _send(proc: asyncio.subprocess.Process, message: dict[str, Any]) -> None:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    assert proc.stdin is not None
    proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)


async def _response(proc: asyncio.subprocess.Process, request_id: int) -> dict[str, Any]:
    """The response to one request, skipping the server's notifications and requests on the way."""
    assert proc.stdout is not None
    while True:
        length = 0
        while (line := await proc.stdout.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        assert length, "the server closed its stdout before answering"
        message = json.loads(await proc.stdout.readexactly(length))
        if message.get("id") == request_id and "method" not in message:
            return message


async def _initialized(proc: asyncio.subprocess.Process, root: Path) -> None:
    _send(proc, {"id": 1, "method": "initialize", "params": {
        "processId": None, "rootUri": root.as_uri(), "capabilities": {},
        "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
    }})  # fmt: skip
    answer = await asyncio.wait_for(_response(proc, 1), WAIT)
    assert "capabilities" in answer["result"]
    _send(proc, {"method": "initialized", "params": {}})


async def _exit_code(proc: asyncio.subprocess.Process) -> tuple[int, str]:
    _, stderr = await asyncio.wait_for(proc.communicate(), WAIT)
    assert proc.returncode is not None
    return proc.returncode, stderr.decode(errors="replace")


async def test_exit_without_shutdown_exits_1(workspace_root: Path, home: Path) -> None:
    proc = await _start(home, workspace_root)
    await _initialized(proc, workspace_root)
    _send(proc, {"method": "exit"})
    code, stderr = await _exit_code(proc)
    assert code == 1, stderr  # the LSP specification: exit before shutdown is an error exit
    assert "Traceback" not in stderr


async def test_shutdown_then_exit_exits_0(workspace_root: Path, home: Path) -> None:
    proc = await _start(home, workspace_root)
    await _initialized(proc, workspace_root)
    _send(proc, {"id": 2, "method": "shutdown"})
    assert (await asyncio.wait_for(_response(proc, 2), WAIT)).get("result") is None
    _send(proc, {"method": "exit"})
    code, stderr = await _exit_code(proc)
    assert code == 0, stderr


@pytest.mark.parametrize("where", ["missing directory", "a directory", "with spaces/missing"])
async def test_bad_log_file_is_one_line_and_exit_2(tmp_path: Path, home: Path, where: str) -> None:
    path = {
        "missing directory": tmp_path / "no such dir" / "server.log",
        "a directory": tmp_path,
        "with spaces/missing": tmp_path / "my logs" / "sub dir" / "s.log",
    }[where]
    proc = await _start(home, tmp_path, "--log-file", str(path))
    code, stderr = await _exit_code(proc)
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr  # one line the editor can show, not a traceback
    assert str(path) in lines[0] and "--log-file" in lines[0]


async def test_log_file_receives_the_log(workspace_root: Path, home: Path, tmp_path: Path) -> None:
    log = tmp_path / "logs with spaces.log"
    proc = await _start(home, workspace_root, "--log-file", str(log), "--log-level", "DEBUG")
    await _initialized(proc, workspace_root)
    _send(proc, {"id": 2, "method": "shutdown"})
    await asyncio.wait_for(_response(proc, 2), WAIT)
    _send(proc, {"method": "exit"})
    code, stderr = await _exit_code(proc)
    assert code == 0, stderr
    assert log.read_text().strip(), "the log file stayed empty"


async def test_version_is_the_package_version(tmp_path: Path, home: Path) -> None:
    proc = await _start(home, tmp_path, "--version")
    stdout, _ = await asyncio.wait_for(proc.communicate(), WAIT)
    assert proc.returncode == 0
    assert stdout.decode() == f"interpreter-lsp {interpreter_lsp.__version__}\n"
    # The version is written once (interpreter_lsp.__version__); the installed metadata reads it.
    assert importlib.metadata.version("interpreter-lsp") == interpreter_lsp.__version__
