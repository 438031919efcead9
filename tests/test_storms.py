"""Failures stay small (issue 18, point 6), end to end with a real server over stdio and real kernels.

- A kernel that cannot start (kernel.python is a Python without ipykernel: `python -m venv --without-pip`)
  is tried a few times with backoff, then stays dead with ONE message that says why; status, interrupt
  and restart answer during the tries.
- The editor quitting mid-storm (its stdin closed, or its process gone while the pipe stays open: LSP's
  processId) ends the server within seconds, and no kernel process is left.
- `interpreter-lsp < /dev/null` exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from harness import descendants, server_env, start_session, stop_session, wait_exited
from interpreter_lsp import protocol as p
from interpreter_lsp.kernels.restarts import MAX_STARTS

ANSWER_BOUND = 10.0  # seconds a command may take during the storm (generous: a busy 2-core machine)
EXIT_BOUND = 5.0  # seconds for the server to exit once its client is gone ("a second or two", generously)
QUIET_WINDOW = 5.0  # seconds watched after the kernel stays dead: no start may follow


@pytest.fixture(scope="module")
def no_ipykernel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python without ipykernel (nor pip), in a path with a space."""
    venv = tmp_path_factory.mktemp("storm") / "a venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin" / "python"


def starts(notes: list[dict[str, Any]]) -> int:
    return sum(1 for n in notes if n["state"] in ("starting", "restarting"))


async def test_a_kernel_that_cannot_start_is_tried_a_few_times_then_says_why_once(
    workspace_root: Path, home: Path, no_ipykernel: Path
) -> None:
    s = await start_session(workspace_root, home, configuration={"kernel": {"python": str(no_ipykernel)}})
    try:
        notes = s.notes[p.KERNEL_STATUS]

        def dead() -> list[dict[str, Any]]:
            return [n for n in notes if n["state"] == "dead" and n.get("message")]

        # During the tries, every command answers (an error is an answer), each within a bound. A restart
        # asked during the tries joins them; one asked after the give-up is a new series (the user asks
        # again), so it is asked once, at the start, not in every round: on a busy machine a round's restart
        # could land just after the give-up and start a second series.
        slowest = 0.0
        deadline = time.monotonic() + 120
        commands = [(p.STATUS, {}), (p.INTERRUPT, {}), (p.RESTART_KERNEL, {"language": "python"})]
        while not dead() and time.monotonic() < deadline:
            round_, commands = commands, commands[:2]
            for command, args in round_:
                started = time.monotonic()
                try:
                    await asyncio.wait_for(s.command(command, args), ANSWER_BOUND)
                except asyncio.TimeoutError:
                    late = f"{command} did not answer within {ANSWER_BOUND:g} s during the storm"
                    raise AssertionError(late) from None
                except Exception:
                    pass  # an error answer is an answer
                slowest = max(slowest, time.monotonic() - started)
            await asyncio.sleep(0.1)
        assert dead(), f"the kernel never stayed dead: {notes[-5:]}"
        await asyncio.sleep(QUIET_WINDOW)  # what follows, if anything: no further start, no further message
        print(f"starts: {starts(notes)}; slowest answer during the tries: {slowest:.3f} s")
        assert starts(notes) <= MAX_STARTS, notes
        [message] = [n["message"] for n in dead()]
        assert str(no_ipykernel) in message
        assert "ipykernel_launcher" in message and "No module named" in message and "exit code 1" in message
        assert "pip install ipykernel" in message
        shown = [m.message for m in s.client.messages if "could not start" in m.message]
        assert len(shown) == 1, shown
        # It stays dead: a run is told why at once, and nothing starts.
        _run_id, status = await s.run_and_wait("print(1)", timeout=ANSWER_BOUND)
        assert status["state"] == "error" and "ipykernel_launcher" in str(status), status
        assert starts(notes) <= MAX_STARTS
        status = await s.command(p.STATUS, {})
        assert [k["state"] for k in status["kernels"]] == ["dead"]
    finally:
        await stop_session(s)


async def test_a_kernel_that_dies_soon_after_each_start_stays_dead_after_a_few(
    workspace_root: Path, home: Path, tmp_path: Path
) -> None:
    """A crash loop: an IPython startup file ends the kernel a few seconds after it started, every time."""
    ipython = tmp_path / "ipython dir"
    startup = ipython / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-die.py").write_text("import os, threading\nthreading.Timer(3.0, os._exit, (3,)).start()\n")
    s = await start_session(workspace_root, home, env={"IPYTHONDIR": str(ipython)})
    try:
        notes = s.notes[p.KERNEL_STATUS]

        def gave_up() -> list[str]:
            return [m.message for m in s.client.messages if "stays" in m.message or "could not start" in m.message]

        await s.wait_for(gave_up, 120, "the kernel to stay dead")
        await asyncio.sleep(QUIET_WINDOW)  # no start, no message after that
        print(f"starts: {starts(notes)}; messages: {[m.message[:60] for m in s.client.messages]}")
        assert starts(notes) <= MAX_STARTS, notes
        [final] = gave_up()
        assert "exit code 3" in final, final
        assert len([m for m in s.client.messages if "died" in m.message]) <= 2  # the first death, the end
        dead_said = [n["message"] for n in notes if n["state"] == "dead" and n.get("message")]
        assert len(dead_said) == len(set(dead_said)) <= 2, dead_said  # one per cause
        status = await s.command(p.STATUS, {})
        assert [k["state"] for k in status["kernels"]] == ["dead"]
    finally:
        await stop_session(s)


# ---- the editor goes -------------------------------------------------------------------------------------


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class RawEditor:
    """An editor reduced to its pipe: the server started with stdin and stdout pipes, JSON-RPC by hand, so
    a test can close its end or hold it open as it likes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.notes: list[dict[str, Any]] = []
        self._changed = asyncio.Event()
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, root: Path, home: Path, settings: dict[str, Any], process_id: int | None) -> RawEditor:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "interpreter_lsp",
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=server_env(home), cwd=str(root),
        )
        editor = cls(process)
        editor.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": process_id, "rootUri": root.as_uri(), "capabilities": {},
            "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
            "initializationOptions": {"settings": settings, "trusted": True},
        }})
        editor.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        return editor

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(_frame(message))

    async def _read(self) -> None:
        out = self.process.stdout
        assert out is not None
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                length = 0
                while (line := await out.readline()).strip():
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                if not line:
                    return
                message = json.loads(await out.readexactly(length))
                self.notes.append(message)
                self._changed.set()
                if "id" in message and "method" in message:  # a request of the server's: answer it
                    self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})

    def kernel_notes(self) -> list[dict[str, Any]]:
        return [m["params"] for m in self.notes if m.get("method") == p.KERNEL_STATUS]

    async def wait_for_starts(self, n: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while starts(self.kernel_notes()) < n:
            self._changed.clear()
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"fewer than {n} kernel starts within {timeout:g} s: {self.kernel_notes()}"
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)


@pytest.fixture
async def editor_process() -> AsyncIterator[asyncio.subprocess.Process]:
    """A process standing for the editor (initialize's processId); the test ends it."""
    process = await asyncio.create_subprocess_exec("sleep", "600")
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


def working_in(root: Path) -> set[int]:
    """Processes whose working directory is `root` (kernels run there)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if Path(os.readlink(entry / "cwd")) == root:
                    found.add(int(entry.name))
    return found


async def _server_gone(editor: RawEditor, root: Path, kernels: set[int], since: float) -> float:
    """Wait (bounded) for the server to exit; the seconds it took; then no kernel process may be left."""
    try:
        await asyncio.wait_for(editor.process.wait(), EXIT_BOUND * 4)
    except asyncio.TimeoutError:
        editor.process.kill()
        raise AssertionError(f"the server still ran {EXIT_BOUND * 4:g} s after its editor went") from None
    took = time.monotonic() - since
    left = kernels | working_in(root)
    await wait_exited(sorted(left), EXIT_BOUND * 2, lambda pid: f"kernel process {pid} outlived the server")
    return took


@pytest.mark.parametrize("when", ["during the tries", "late"])
async def test_the_server_exits_when_its_editor_closes_the_pipe_mid_storm(
    workspace_root: Path, home: Path, no_ipykernel: Path, when: str
) -> None:
    editor = await RawEditor.start(workspace_root, home, {"kernel": {"python": str(no_ipykernel)}}, None)
    await editor.wait_for_starts(2)
    kernels = descendants(editor.process.pid)
    if when == "late":
        # Until the starts stop (QUIET_WINDOW without one), or for at most 40 s: the old endless restarts
        # had filled a zmq queue by then, and the loop was blocked in a send.
        deadline, seen, quiet_since = time.monotonic() + 40, 0, time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - quiet_since < QUIET_WINDOW:
            kernels |= descendants(editor.process.pid)
            if (now := starts(editor.kernel_notes())) != seen:
                seen, quiet_since = now, time.monotonic()
            await asyncio.sleep(0.2)
    since = time.monotonic()
    assert editor.process.stdin is not None
    editor.process.stdin.close()  # the editor quits: end of the server's stdin
    took = await _server_gone(editor, workspace_root, kernels, since)
    print(f"server exited {took:.2f} s after its stdin closed ({when}; {starts(editor.kernel_notes())} starts)")
    assert took < EXIT_BOUND


async def test_the_server_exits_when_its_editor_process_is_gone_though_the_pipe_stays_open(
    workspace_root: Path, home: Path, no_ipykernel: Path, editor_process: asyncio.subprocess.Process
) -> None:
    editor = await RawEditor.start(
        workspace_root, home, {"kernel": {"python": str(no_ipykernel)}}, editor_process.pid
    )
    await editor.wait_for_starts(2)
    kernels = descendants(editor.process.pid)
    since = time.monotonic()
    editor_process.send_signal(signal.SIGKILL)  # the editor is gone; the pipe (held by this test) is not closed
    try:
        took = await _server_gone(editor, workspace_root, kernels, since)
    finally:
        if editor.process.stdin is not None:
            editor.process.stdin.close()
    print(f"server exited {took:.2f} s after its editor's process was killed")
    assert took < EXIT_BOUND
    assert editor.process.returncode == 1  # it ended without `shutdown`


async def test_an_empty_stdin_ends_the_server(tmp_path: Path, home: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "interpreter_lsp", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        env=server_env(home), cwd=str(tmp_path),
    )
    try:
        await asyncio.wait_for(process.wait(), 30)
    except asyncio.TimeoutError:
        process.kill()
        raise AssertionError("`interpreter-lsp < /dev/null` did not exit") from None
    finally:
        await process.wait()
