"""The agents' socket (mcp/listener.py, mcp/wire.py): everything on it is untrusted input, answered with
a sentence and never acted on unless valid; the socket is the user's alone."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness import Session, start_session, stop_session
from interpreter_lsp import protocol as p
from interpreter_lsp.kernels import runtime
from interpreter_lsp.mcp import wire
from interpreter_lsp.mcp.listener import AgentListener
from test_mcp import socket_ready


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (b"not json\n", "one JSON object per line"),
        (b"[1, 2]\n", "a JSON object"),
        (b'{"id": true, "method": "run"}\n', "'id'"),
        (b'{"id": 1, "method": "exec"}\n', "'method' must be one of"),
        (b'{"id": 1, "method": "run", "params": []}\n', "'params'"),
    ],
)
def test_malformed_requests_are_refused_in_words(line: bytes, says: str) -> None:
    with pytest.raises(wire.BadRequest, match=says):
        wire.parse_request(line)


def test_arguments_are_validated() -> None:
    with pytest.raises(wire.BadRequest, match="'code'"):
        wire.run_params({"code": "   "})
    with pytest.raises(wire.BadRequest, match="limited"):
        wire.run_params({"code": "x" * (wire.MAX_CODE + 1)})
    with pytest.raises(wire.BadRequest, match="'language'"):
        wire.run_params({"code": "1", "language": "../../bin/sh"})
    with pytest.raises(wire.BadRequest, match="'callId'"):
        wire.wait_params({"callId": "p-123", "timeout": 1})
    with pytest.raises(wire.BadRequest, match="'timeout'"):
        wire.wait_params({"callId": "a-0123456789ab", "timeout": 1e9})
    # The agent's name is shown to the user: one plain line, no control or bidi characters, bounded.
    name = wire.agent_param({"agent": "evil\x1b[2J\nagent\u202e" + "x" * 500})
    assert "\x1b" not in name and "\n" not in name and "\u202e" not in name and len(name) <= 80
    # The same set as code's (safety/visible.py): blank fillers and tags too; emoji stay.
    assert wire.agent_param({"agent": "deploy\u3164bot\U000e0041 \u00ad1"}) == "deploy bot 1"
    assert wire.agent_param({"agent": "claude 👩‍💻"}) == "claude 👩‍💻"
    assert wire.agent_param({"agent": 42}) == "an agent"


@pytest.fixture
async def editor(workspace_root: Path, home: Path) -> AsyncIterator[Session]:
    s = await start_session(workspace_root, home)
    await socket_ready(workspace_root)
    try:
        yield s
    finally:
        await stop_session(s)


async def test_the_socket_is_private_and_bad_input_runs_nothing(editor: Session) -> None:
    path = runtime.agent_socket(editor.root)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700 and path.parent.stat().st_uid == os.getuid()
    reader, writer = await asyncio.open_unix_connection(str(path), limit=wire.MAX_LINE)

    async def ask(raw: bytes) -> dict[str, Any]:
        writer.write(raw)
        await writer.drain()
        return json.loads(await asyncio.wait_for(reader.readline(), 30))

    assert "one JSON object" in (await ask(b"\xff\xfe garbage\n"))["error"]
    assert "'code'" in (await ask(b'{"id": 1, "method": "run", "params": {"code": 5}}\n'))["error"]
    answer = await ask(b'{"id": 2, "method": "wait", "params": {"callId": "a-000000000000", "timeout": 0}}\n')
    assert answer == {"id": 2, "result": {"callId": "a-000000000000", "state": "unknown"}}
    # A valid run is a proposal that waits; closing the connection withdraws it (it expires in the editor).
    answer = await ask(b'{"id": 3, "method": "run", "params": {"code": "print(1)", "agent": "raw"}}\n')
    assert answer["result"]["state"] == "awaiting-approval"
    writer.close()
    expired = await editor.wait_for(
        lambda: [n for n in editor.notes[p.PROPOSAL_STATUS] if n["state"] == "expired"], what="expired"
    )
    assert expired[0]["proposalId"] == answer["result"]["proposalId"]
    assert not editor.notes[p.RUN_STATUS]


async def test_another_users_process_is_refused_even_past_the_file_permissions(tmp_path: Path) -> None:
    """The socket's 0600 and its directory's 0700 keep other users out; past them (here: a process of
    another uid with CAP_DAC_OVERRIDE), the peer's credentials (SO_PEERCRED) still refuse it."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None or not hasattr(socket, "SO_PEERCRED"):
        pytest.skip("needs root and setpriv to act as another user, and Linux's SO_PEERCRED")
    ws = SimpleNamespace(root=tmp_path, agent_withdraw=lambda _calls: None, agent_status=lambda: {"root": "here"})
    listener = AgentListener(ws, lambda value: value)  # type: ignore[arg-type]
    path = await listener.start()
    assert path is not None
    # A refused peer sees its connection closed: an empty read, or a reset/broken pipe (printed as b'').
    code = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(30)
try:
    s.sendall(b'{"id": 1, "method": "status"}\\n')
    data = s.recv(200)
except (BrokenPipeError, ConnectionResetError):
    data = b''
print(repr(data))
"""
    try:
        answers = []
        for prefix in ([], [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                            "--inh-caps=+dac_override", "--ambient-caps=+dac_override"]):  # fmt: skip
            proc = await asyncio.create_subprocess_exec(
                *prefix, sys.executable, "-c", code, str(path), stdout=asyncio.subprocess.PIPE
            )
            out, _ = await asyncio.wait_for(proc.communicate(), 60)
            answers.append(out.decode().strip())
        same_user, other_user = answers
        assert '"result":{"root":"here"}' in same_user
        assert other_user == "b''", "another user's process was answered"
    finally:
        await listener.close()
    assert not path.exists()
