"""No kernel outlives the server: after shutdown/exit, and after the server is killed."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from harness import start_session, stop_session, wait_exited
from interpreter_lsp import protocol as p


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


async def _kernel_pids(session) -> list[int]:
    await session.run_and_wait("print(1)")
    await session.run_and_wait("echo 1", "shell")
    status = await session.command(p.STATUS, {})
    pids = [k["pid"] for k in status["kernels"]]
    assert len(pids) == 2 and all(_alive(pid) for pid in pids)
    return pids


async def _gone(pids: list[int], timeout: float = 15) -> None:
    def orphan(pid: int) -> str:
        return f"orphan kernel {pid} still running {timeout:g} s after the server died"

    await wait_exited(pids, timeout, orphan)


async def test_shutdown_stops_every_kernel(workspace_root: Path, home: Path) -> None:
    session = await start_session(workspace_root, home)
    pids = await _kernel_pids(session)
    await stop_session(session)
    assert not [pid for pid in pids if _alive(pid)], "kernels still running after shutdown/exit"


async def test_killed_server_leaves_no_orphans(workspace_root: Path, home: Path) -> None:
    session = await start_session(workspace_root, home)
    pids = await _kernel_pids(session)
    server = session.client._server
    assert server is not None
    server.send_signal(signal.SIGKILL)
    await server.wait()
    await _gone(pids)
    await session.client.stop()


def _in_workspace(root: Path) -> list[int]:
    """Processes whose working directory is the workspace: the kernels and whatever they started."""
    found, root = [], root.resolve()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if Path(os.readlink(proc / "cwd")) == root and _alive(int(proc.name)):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("after", [0.0, 0.4], ids=["at-once", "mid-start"])
async def test_an_editor_that_quits_while_the_kernel_starts_leaves_no_kernel(
    workspace_root: Path, home: Path, after: float
) -> None:
    """The editor quits (shutdown, exit) while the kernel is still starting: the start is cancelled, and
    the process it had launched goes with the server."""
    session = await start_session(workspace_root, home)
    await session.run("print(1)")
    await session.wait_for(
        lambda: any(n["state"] == "starting" for n in session.notes[p.KERNEL_STATUS]), what="the kernel starting"
    )
    await asyncio.sleep(after)  # a point inside the start, not a wait for an event
    await stop_session(session)
    left = await asyncio.to_thread(_in_workspace, workspace_root)
    await wait_exited(left, 30, lambda pid: f"process {pid} outlived the server")
    assert await asyncio.to_thread(_in_workspace, workspace_root) == []


async def test_closing_right_after_a_run_logs_no_warning_about_its_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The editor closes while the variables snapshot after a run is still being taken: the kernel the server
    ends itself fails that snapshot, which is expected and no news for the editor's log (a warning there at
    every close reads like a fault)."""
    from interpreter_lsp.workspace import ServerContext, Workspace

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root, runtime = tmp_path / "ws", tmp_path / "runtime"
    root.mkdir()
    runtime.mkdir(mode=0o700)
    ctx = ServerContext(
        send=lambda *_: None, show_message=lambda *_: None, runtime_dir=runtime, specs_root=tmp_path / "specs",
        trusted=True,
    )
    ws = Workspace(root, ctx)
    ws.configure([])
    result = await ws.gate.user_run("x = list(range(10))", "python").result
    assert result.state == "ok", result
    with caplog.at_level("INFO", logger="interpreter_lsp.variable_undo"):
        await ws.shutdown()  # at once: the snapshot sent after the run is in flight
    failed = [r for r in caplog.records if "snapshot of the variables failed" in r.getMessage()]
    assert all(r.levelname == "INFO" for r in failed), [(r.levelname, r.getMessage()) for r in failed]


async def test_the_editor_closes_while_a_request_is_in_flight(workspace_root: Path, home: Path) -> None:
    """The user closes the editor while an undo puts a large file back: the undo ends first (never half of
    one: the file, the variables and the conversation all put back), then `shutdown` is answered and the
    server ends. (pygls cancelled the request in flight while iterating its live table of requests:
    "dictionary changed size during iteration", no answer, and the editor waited to kill the server.)"""
    s = await start_session(workspace_root, home)
    await s.run_and_wait("open('big.bin', 'wb').write(b'a' * 150_000_000)")
    await s.run_and_wait("open('big.bin', 'wb').write(b'b' * 150_000_000)")
    undoing = asyncio.ensure_future(s.command(p.UNDO, {}))
    await asyncio.sleep(0)  # the undo's request is written before the shutdown's
    try:
        await asyncio.wait_for(s.client.shutdown_session(), 30)  # quiet, ~0.1 s; before, never answered
        result = await asyncio.wait_for(undoing, 30)
    finally:
        await s.client.stop()
    assert result["restored"] == ["big.bin"], result
    assert (workspace_root / "big.bin").read_bytes() == b"a" * 150_000_000
    # The next session finds the undo in the history: the second run is not in the conversation.
    s = await start_session(workspace_root, home)
    try:
        runs = [e for e in (await s.command(p.HISTORY, {}))["messages"] if e["type"] == "run"]
        assert [r["code"][:40] for r in runs] == ["open('big.bin', 'wb').write(b'a' * 150_0"], runs
    finally:
        await stop_session(s)
