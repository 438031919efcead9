"""Running code over LSP in the workspace kernel: what the editor is told."""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from harness import Session, needs_bwrap, start_session, stop_session
from interpreter_lsp import protocol as p
from interpreter_lsp.kernels.specs import NO_SEND_PAUSE
from interpreter_lsp.output import error_text


async def test_python_run_streams_output_and_ends_ok(any_editor: Session) -> None:
    s = any_editor
    run_id, status = await s.run_and_wait("print('hello from the kernel')")
    assert status["state"] == "ok"
    assert isinstance(status["durationMs"], int)
    assert [st["state"] for st in s.statuses(run_id)] == ["queued", "running", "ok"]
    assert s.text(run_id) == "hello from the kernel\n"


async def test_text_beyond_ascii_reaches_the_editor_as_printed(session: Session) -> None:
    """The server frames its notifications itself (transport.CoalescingWriter.write_message): a frame's
    length is its bytes', whatever the characters of the output and of the model's reply."""
    text = "naïve café — 東京 🎉 \u2028 end"
    run_id, status = await session.run_and_wait(f"print({text!r})")
    assert status["state"] == "ok"
    assert session.text(run_id) == text + "\n"


async def test_state_persists_and_cwd_is_workspace(session: Session) -> None:
    await session.run_and_wait("x = 41")
    run_id, _ = await session.run_and_wait("import os; print(x + 1, os.getcwd())")
    assert session.text(run_id).split() == ["42", str(session.root)]


async def test_the_python_kernel_starts_without_debugpy_and_code_can_still_import_it(session: Session) -> None:
    """specs.NO_DEBUGGER: ipykernel took its own no-debugpy fallback while it built the kernel (no debugpy or
    pydevd loaded: the server never speaks the debug protocol), and the user's `import debugpy` (to attach an
    editor's debugger to the kernel) gets the real package."""
    run_id, status = await session.run_and_wait(
        "import sys, ipykernel.debugger\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('debugpy', '_pydevd_bundle', 'pydevd')))\n"
        "print(ipykernel.debugger._is_debugpy_available)\n"
        "import debugpy\n"
        "print(type(debugpy.listen).__name__, debugpy.__file__.endswith('__init__.py'))"
    )
    assert status["state"] == "ok", session.text(run_id)
    assert session.text(run_id).splitlines() == ["[]", "False", "function True"]


async def test_the_python_kernel_reads_requests_on_its_main_thread_and_runs_them_in_order(session: Session) -> None:
    """specs.NO_SUBSHELL_THREAD: ipykernel 7's shell-channel thread (for subshells, which the server never opens) is
    not started, so a request wakes one thread fewer; runs sent while one runs still wait their turn, in order
    (interrupts: test_runs.py)."""
    run_id, status = await session.run_and_wait(
        "import threading\nprint([t.name for t in threading.enumerate() if t.name == 'Shell channel'])"
    )
    assert status["state"] == "ok", session.text(run_id)
    assert session.text(run_id).strip() == "[]"
    runs = [await session.run("import time\ntime.sleep(1)\nprint('slept')")]
    runs += [await session.run(f"print({i})") for i in range(3)]
    ended = [await session.finished(r, timeout=60) for r in runs]
    assert [e["state"] for e in ended] == ["ok"] * 4, ended
    assert [session.text(r).strip() for r in runs] == ["slept", "0", "1", "2"]


async def test_shell_runs_in_bash_kernel_with_state(session: Session) -> None:
    await session.run_and_wait("export GREETING=hi; cd sub 2>/dev/null || mkdir sub", "bash")
    run_id, status = await session.run_and_wait('echo "$GREETING $(basename "$PWD")"', "shell")
    assert status["state"] == "ok"
    assert session.text(run_id).strip() == "hi ws"


async def test_shell_runs_back_to_back_show_their_output_and_nothing_of_the_input(session: Session) -> None:
    """The shell kernel sends each line without pexpect's pause (specs.NO_SEND_PAUSE): bash was started with
    terminal echo off, so lines sent the moment a prompt is read are never echoed into the output, and a cell
    of several lines (a loop's continuation prompts included) still gives exactly its own output. With the
    pause, every run would take at least 100 ms (two lines, 50 ms of sleep before each): a lower bound no
    machine can beat, so the median below fails if the pause is back, however fast or slow the machine."""
    code = 'for j in 1 2; do\n  printf "%s-%s\\n" "$i" "$j"\ndone\n(exit "$i")'
    took = []
    for i in range(12):
        run_id, status = await session.run_and_wait(f"i={i}\n{code}", "shell")
        # A non-zero exit status is bash_kernel's error (no name, no traceback): the panel reads "exit status N".
        assert session.text(run_id) == f"{i}-1\n{i}-2\n" + (f"exit status {i}" if i else ""), session.text(run_id)
        assert status["state"] == ("ok" if i == 0 else "error"), status
        took.append(status["durationMs"])
    # The cell above sends five lines: with the pause, >= 250 ms each. On the portable paths too: a run's
    # time includes the polling observer's settle, which starts a poll at once (file_observers.py).
    assert statistics.median(took) < 250, took


def test_an_error_without_a_traceback_reads_as_a_person_would_say_it() -> None:
    """The same rule as the clients' restore paths (conversation.ts errorText, format.lua, interpreter-lsp.el)."""
    assert error_text("", "2", []) == "exit status 2"
    assert error_text("", "Cell has trailing backslash", []) == "Cell has trailing backslash"
    assert error_text("KeyboardInterrupt", "", []) == "KeyboardInterrupt"
    assert error_text("E", "v", []) == "E: v"
    assert error_text("E", "v", ["\x1b[31mTraceback\x1b[0m", "E: v"]) == "Traceback\nE: v"


def test_the_shell_kernels_code_starts_pexpect_without_its_send_pause() -> None:
    """The mechanism itself, the very code the kernelspec runs first, in a process of its own."""
    probe = (
        "import pexpect\nbefore = pexpect.spawn('true').delaybeforesend\n"
        f"{NO_SEND_PAUSE}"
        "child = pexpect.spawn('true'); print(before, child.delaybeforesend); child.wait()"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["0.05", "None"], out


async def test_status_reports_kernel(session: Session) -> None:
    await session.run_and_wait("1")
    status = await session.command(p.STATUS, {})
    kernels = {k["language"]: k for k in status["kernels"]}
    assert kernels["python"]["state"] in ("idle", "busy")
    assert "server's interpreter" in kernels["python"]["source"]


@pytest.mark.parametrize("sandbox", [False, pytest.param(True, marks=needs_bwrap)], ids=["plain", "sandboxed"])
async def test_a_temporary_directory_too_deep_for_unix_sockets(
    workspace_root: Path, home: Path, tmp_path: Path, sandbox: bool
) -> None:
    """The kernel's sockets live in the server's runtime directory under TMPDIR; a unix socket's path has
    at most 103 bytes on macOS (107 on Linux). Too deep: a plain kernel talks TCP on loopback instead; a
    sandboxed one (no network) cannot, and the user reads what to change."""
    deep = tmp_path / "a temporary directory with spaces" / ("deeper" * 12)
    deep.mkdir(parents=True)
    s = await start_session(
        workspace_root, home, configuration={"sandbox": "bubblewrap"} if sandbox else {}, env={"TMPDIR": str(deep)}
    )
    try:
        run_id, status = await s.run_and_wait("import tempfile; print(6 * 7)")
        if not sandbox:
            assert (status["state"], s.text(run_id)) == ("ok", "42\n")
            return
        assert status["state"] == "error"
        said = status.get("message", "") + s.text(run_id)
        assert "over the 103 a unix socket allows" in said and "TMPDIR set to a shorter directory" in said, said
        # Nothing is left running or half made: a second run says the same, and the server answers.
        _, again = await s.run_and_wait("1")
        assert again["state"] == "error"
        assert (await s.command(p.STATUS, {}))["kernels"]
    finally:
        await stop_session(s)
