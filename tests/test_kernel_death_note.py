"""A kernel that dies while running code: the run says one true thing about what follows (issue 22.15). The
server restarts it at once, and says so as happening ("is being restarted"), never as done before it is."""

from __future__ import annotations

from harness import Session
from interpreter_lsp import protocol as p


async def test_a_dead_kernels_run_says_it_is_being_restarted_and_the_next_run_works(session: Session) -> None:
    run_id, status = await session.run_and_wait("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    assert status["state"] == "died"
    message = status["message"]
    assert "has been restarted" not in message and "InterpreterRestart" not in message, message
    assert message.endswith("was lost; the kernel is being restarted."), message
    await session.wait_for(
        lambda: [n["state"] for n in session.notes[p.KERNEL_STATUS]][-1:] == ["idle"], what="the kernel to be back"
    )
    run_id, status = await session.run_and_wait("print('back')")
    assert (status["state"], session.text(run_id)) == ("ok", "back\n")
