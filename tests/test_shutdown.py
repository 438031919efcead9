"""No kernel outlives the server: after shutdown/exit, and after the server is killed."""

from __future__ import annotations

import os
import signal
from pathlib import Path

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
