"""Running code over LSP in the workspace kernel: what the editor is told."""

from __future__ import annotations

from harness import Session
from interpreter_lsp import protocol as p


async def test_python_run_streams_output_and_ends_ok(any_editor: Session) -> None:
    s = any_editor
    run_id, status = await s.run_and_wait("print('hello from the kernel')")
    assert status["state"] == "ok"
    assert isinstance(status["durationMs"], int)
    assert [st["state"] for st in s.statuses(run_id)] == ["queued", "running", "ok"]
    assert s.text(run_id) == "hello from the kernel\n"


async def test_state_persists_and_cwd_is_workspace(session: Session) -> None:
    await session.run_and_wait("x = 41")
    run_id, _ = await session.run_and_wait("import os; print(x + 1, os.getcwd())")
    assert session.text(run_id).split() == ["42", str(session.root)]


async def test_shell_runs_in_bash_kernel_with_state(session: Session) -> None:
    await session.run_and_wait("export GREETING=hi; cd sub 2>/dev/null || mkdir sub", "bash")
    run_id, status = await session.run_and_wait('echo "$GREETING $(basename "$PWD")"', "shell")
    assert status["state"] == "ok"
    assert session.text(run_id).strip() == "hi ws"


async def test_status_reports_kernel(session: Session) -> None:
    await session.run_and_wait("1")
    status = await session.command(p.STATUS, {})
    kernels = {k["language"]: k for k in status["kernels"]}
    assert kernels["python"]["state"] in ("idle", "busy")
    assert "server's interpreter" in kernels["python"]["source"]
