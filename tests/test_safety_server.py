"""Safety through the server: the sandbox around the kernel, secrets kept out of the kernel and off the
wire, untrusted workspaces, paths kept inside the workspace."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from harness import needs_bwrap, start_session, stop_session
from interpreter_lsp import protocol as p
from scripted_model import ScriptedModel

CANARY = "sk-canary-0123456789abcdefXYZ"



@needs_bwrap
async def test_sandboxed_kernel(workspace_root: Path, home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret_home = home / ".ssh"
    secret_home.mkdir()
    (secret_home / "id_canary").write_text("PRIVATE")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    s = await start_session(workspace_root, home, configuration={"sandbox": "bubblewrap"}, env={"HOME": str(home)})
    try:
        run_id, status = await s.run_and_wait(
            "open('inside.txt', 'w').write('ok')\nprint(open('inside.txt').read())", timeout=60
        )
        assert status["state"] == "ok", s.text(run_id)
        assert (workspace_root / "inside.txt").read_text() == "ok"
        run_id, status = await s.run_and_wait(f"open({str(outside / 'x.txt')!r}, 'w').write('no')")
        assert status["state"] == "error"
        assert not (outside / "x.txt").exists()
        run_id, status = await s.run_and_wait(f"print(open({str(secret_home / 'id_canary')!r}).read())")
        assert status["state"] == "error" and "PRIVATE" not in s.text(run_id)
        run_id, status = await s.run_and_wait(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), 2)")
        assert status["state"] == "error"
        assert "OSError" in s.text(run_id) or "Error" in s.text(run_id)
        state = await s.command(p.STATUS, {})
        [kernel] = state["kernels"]
        assert kernel["sandbox"] == "bubblewrap (no network)"
    finally:
        listener.close()
        await stop_session(s)


async def test_sandbox_missing_is_said_plainly(workspace_root: Path, home: Path, tmp_path: Path) -> None:
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    s = await start_session(
        workspace_root, home, configuration={"sandbox": "bubblewrap"}, env={"PATH": str(empty_bin)}
    )
    try:
        run_id, status = await s.run_and_wait("print('must not run unsandboxed')")
        assert status["state"] == "error"
        assert "bubblewrap" in status["message"] and "must not run" not in s.text(run_id, ("stdout",))
    finally:
        await stop_session(s)


async def test_canary_key_is_nowhere(workspace_root: Path, home: Path) -> None:
    log_file = home / "server.log"
    with ScriptedModel() as model:
        settings = {"model": "openai/scripted", "apiBase": model.base_url, "apiKey": CANARY, "maxRetries": 0}
        s = await start_session(
            workspace_root, home, configuration=settings, env={"OPENAI_API_KEY": CANARY, "MY_SERVICE_TOKEN": CANARY}
        )
        try:
            run_id, _ = await s.run_and_wait(
                "import os\nprint(sorted(k for k, v in os.environ.items() if 'sk-canary' in v))\n"
                "print(os.environ.get('OPENAI_API_KEY'))"
            )
            assert s.text(run_id) == "[]\nNone\n"
            model.fail(401, f"Incorrect API key provided: {CANARY}")
            turn = (await s.command(p.CHAT, {"text": f"my key is {CANARY}"}))["turnId"]
            await s.wait_for(
                lambda: any(n["turnId"] == turn and n["state"] == "error" for n in s.notes[p.TURN_STATUS]),
                what="the turn to fail",
            )
            history = await s.command(p.HISTORY, {})
        finally:
            await stop_session(s)
    wire = json.dumps(s.notes) + json.dumps(history) + json.dumps([m.message for m in s.client.messages])
    assert CANARY not in wire
    assert "***" in json.dumps(history)
    for path in (home / "state").rglob("*"):
        if path.is_file():
            assert CANARY not in path.read_text(errors="replace"), path
    if log_file.exists():
        assert CANARY not in log_file.read_text()


async def test_untrusted_workspace_runs_nothing(workspace_root: Path, home: Path) -> None:
    s = await start_session(workspace_root, home, init_options={"trusted": False})
    try:
        with pytest.raises(JsonRpcException, match="not trusted"):
            await s.command(p.RUN, {"code": "open('pwned', 'w')"})
        status = await s.command(p.STATUS, {})
        assert status["trusted"] is False and status["kernels"] == []
        assert not (workspace_root / "pwned").exists()
    finally:
        await stop_session(s)


async def test_export_refuses_symlink_escape(workspace_root: Path, home: Path, tmp_path: Path) -> None:
    (workspace_root / "link").symlink_to(tmp_path)
    s = await start_session(workspace_root, home)
    try:
        with pytest.raises(JsonRpcException, match="outside the workspace"):
            await s.command(p.EXPORT_NOTEBOOK, {"path": "link/escape.ipynb"})
        assert not (tmp_path / "escape.ipynb").exists()
    finally:
        await stop_session(s)


async def test_export_cannot_be_redirected_by_a_kernel_swapping_a_directory_for_a_link(
    workspace_root: Path, home: Path, tmp_path: Path
) -> None:
    """Kernel code switches out/ between a directory and a link to a host directory while the user exports
    into it again and again: every export lands inside the workspace or is refused; none outside."""
    host = tmp_path / "host"
    host.mkdir()
    s = await start_session(workspace_root, home)
    try:
        # out/ and a link to the host directory trade places atomically (renameat2 RENAME_EXCHANGE), each
        # staying ~2 ms: out/ is a directory half the time and a link the other half, never missing.
        swapper = await s.run(
            "import ctypes, os, time\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "os.makedirs('out', exist_ok=True)\n"
            f"os.symlink({str(host)!r}, 'link')\n"
            "print('swapping', flush=True)\n"
            "end = time.time() + 600\n"
            "while time.time() < end and not os.path.exists('stop'):\n"
            "    assert libc.renameat2(-100, b'out', -100, b'link', 2) == 0, ctypes.get_errno()\n"
            "    time.sleep(0.002)\n"
        )
        await s.wait_for(lambda: "swapping" in s.text(swapper), what="the swapping to start")
        written, refused = 0, 0
        for n in range(30):
            try:
                await s.command(p.EXPORT_NOTEBOOK, {"path": f"out/n{n}.ipynb"})
                written += 1
            except JsonRpcException as error:
                assert "Refusing to write" in str(error) or "Cannot write" in str(error), error
                refused += 1
        (workspace_root / "stop").touch()
        await s.finished(swapper)
    finally:
        await stop_session(s)
    assert list(host.iterdir()) == [], "an export was written outside the workspace"
    assert written + refused == 30
    inside = list(workspace_root.rglob("n*.ipynb"))  # noqa: ASYNC240
    assert len(inside) == written


EXPORT_REFUSALS = [
    ("https://example.com/notebooks/x.ipynb", "it is a URL (https://), not a path"),
    ("a" * 300 + ".ipynb", "the path is too long"),
    ("dir.ipynb", "it is a directory"),
]


async def test_export_refusals_are_sentences(workspace_root: Path, home: Path) -> None:
    (workspace_root / "dir.ipynb").mkdir()
    s = await start_session(workspace_root, home)
    try:
        for path, said in EXPORT_REFUSALS:
            for overwrite in (False, True):
                with pytest.raises(JsonRpcException) as caught:
                    await s.command(p.EXPORT_NOTEBOOK, {"path": path, "overwrite": overwrite})
                assert said in str(caught.value) and "internal error" not in str(caught.value).lower(), path
    finally:
        await stop_session(s)
    assert sorted(x.name for x in workspace_root.iterdir()) == ["dir.ipynb"]  # noqa: ASYNC240


async def test_exported_notebook_has_the_usual_mode(workspace_root: Path, home: Path) -> None:
    umask = os.umask(0o022)
    os.umask(umask)
    s = await start_session(workspace_root, home)
    try:
        await s.run_and_wait("print('hello')")
        path = Path((await s.command(p.EXPORT_NOTEBOOK, {"path": "notebooks/session.ipynb"}))["path"])
    finally:
        await stop_session(s)
    # 0644 under umask 022, as an editor would write it
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # noqa: ASYNC240
    assert '"hello\\n"' in path.read_text()  # noqa: ASYNC240
