"""Runs as the editor sees them: ordering, coalescing, rich output, errors, interrupts, kernel death,
input(), variables."""

from __future__ import annotations

import asyncio
import base64

from harness import Session
from interpreter_lsp import protocol as p


async def test_3000_lines_arrive_in_order_with_gapless_seq_and_coalesced(session: Session) -> None:
    run_id, status = await session.run_and_wait("for i in range(3000):\n    print(i)")
    assert status["state"] == "ok"
    outputs = session.outputs(run_id)
    assert [o["seq"] for o in outputs] == list(range(len(outputs)))
    assert session.text(run_id) == "".join(f"{i}\n" for i in range(3000))
    # Coalesced: a handful of notifications, not one per line.
    assert len(outputs) < 60, len(outputs)


async def test_concurrent_runs_never_mix_outputs(session: Session) -> None:
    code = "import time\nfor i in range(50):\n    print('{tag}', i)\n    time.sleep(0.001)"
    ids = await asyncio.gather(*(session.run(code.format(tag=tag)) for tag in "abc"))
    for run_id in ids:
        await session.finished(run_id)
    for tag, run_id in zip("abc", ids, strict=True):
        assert session.text(run_id) == "".join(f"{tag} {i}\n" for i in range(50))
    # Runs on one kernel take turns: each starts running after the previous one ended.
    order = [(n["runId"], n["state"]) for n in session.notes[p.RUN_STATUS] if n["state"] in ("running", "ok")]
    assert order == [(rid, state) for rid in ids for state in ("running", "ok")]


async def test_the_last_output_of_a_run_arrives_without_ipykernels_pause_before_the_reply(session: Session) -> None:
    """The server's python kernel runs without ipykernel's 0.5 ms sleep before each execute reply (a workaround
    for clients that end a run on the reply; ours ends on the reply and the idle status, which follows every
    output): a run's last writes, to stdout and stderr, flushed the instant before the reply, are all there,
    run after run, queued back to back."""
    check, _ = await session.run_and_wait("print(get_ipython().kernel._execute_sleep)")
    assert session.text(check) == "0.0\n"
    code = "import sys\nsys.stdout.write('o' * {n})\nsys.stderr.write('e')"
    ids = await asyncio.gather(*(session.run(code.format(n=n)) for n in range(1, 31)))
    for run_id in ids:
        await session.finished(run_id)
    assert [(session.text(r, ("stdout",)), session.text(r, ("stderr",))) for r in ids] == [
        ("o" * n, "e") for n in range(1, 31)
    ]


async def test_display_data_with_image_and_result(session: Session) -> None:
    code = (
        "import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n"
        "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\n6 * 7"
    )
    run_id, status = await session.run_and_wait(code, timeout=60)
    assert status["state"] == "ok"
    displays = [o for o in session.outputs(run_id) if o["kind"] == "display"]
    assert displays, session.outputs(run_id)
    png = base64.b64decode(displays[0]["data"]["image/png"])
    assert png.startswith(b"\x89PNG")
    results = [o for o in session.outputs(run_id) if o["kind"] == "result"]
    assert results[-1]["data"]["text/plain"] == "42"


async def test_figures_reach_the_panel_whatever_the_backend(session: Session) -> None:
    """Agg shows nothing by itself and the kernel keeps it: open figures are captured after each run."""
    code = "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()"
    run_id, status = await session.run_and_wait(code, timeout=60)
    assert status["state"] == "ok", session.text(run_id)
    [display] = [o for o in session.outputs(run_id) if o["kind"] == "display"]
    assert base64.b64decode(display["data"]["image/png"]).startswith(b"\x89PNG")
    assert display["text"].startswith("<Figure 1:")
    # The next plot, the backend still Agg, shows too; a run that draws nothing shows no image.
    run_id, _ = await session.run_and_wait("plt.figure(); plt.bar([1], [2]); print('drawn')", timeout=60)
    assert [o["kind"] for o in session.outputs(run_id)] == ["stdout", "display"]
    run_id, _ = await session.run_and_wait("print('no plot')", timeout=60)
    assert [o["kind"] for o in session.outputs(run_id)] == ["stdout"]
    # Restarted, the hook is there again.
    await session.command(p.RESTART_KERNEL, {})
    run_id, _ = await session.run_and_wait(code, timeout=90)
    assert any(o["kind"] == "display" for o in session.outputs(run_id))


async def test_error_has_plain_traceback(session: Session) -> None:
    run_id, status = await session.run_and_wait("def f():\n    return 1 / 0\nf()")
    assert status["state"] == "error"
    [error] = [o for o in session.outputs(run_id) if o["kind"] == "error"]
    assert error["ename"] == "ZeroDivisionError"
    assert error["evalue"] == "division by zero"
    assert "\x1b[" not in error["text"]
    assert "return 1 / 0" in error["text"]
    # The kernel's own lines too, colour codes included, for clients that colour them.
    assert any("\x1b[" in line for line in error["traceback"])
    assert "ZeroDivisionError" in "".join(error["traceback"])
    # The kernel is fine afterwards.
    run_id, status = await session.run_and_wait("print('still here')")
    assert session.text(run_id) == "still here\n"


async def _interrupt_while_running(session: Session, code: str) -> dict:
    await session.run_and_wait("kept = 'state survives'")
    run_id = await session.run(code)
    await session.wait_for(lambda: any(s["state"] == "running" for s in session.statuses(run_id)), what="running")
    await session.command(p.INTERRUPT, {})
    status = await session.finished(run_id, timeout=60)
    assert status["state"] == "interrupted"
    # The kernel was interrupted, not restarted (the fallback when SIGINT is ignored): its state is intact.
    check, _ = await session.run_and_wait("print(kept)")
    assert session.text(check) == "state survives\n"
    return status


async def test_interrupt_sleep(session: Session) -> None:
    await _interrupt_while_running(session, "import time\ntime.sleep(1e6)")


async def test_interrupt_busy_loop(session: Session) -> None:
    await _interrupt_while_running(session, "while True:\n    pass")


async def test_an_interrupt_the_kernel_answers_late_without_a_reply_keeps_the_state(session: Session) -> None:
    """The race behind a rare restart on a loaded machine: the first SIGINTs are lost (ipykernel ignores
    SIGINT between a request and its handler), a later one lands in the kernel's own handler and the kernel
    goes idle with no reply, late in the interrupt's grace; the reply it dropped is given up only
    NO_REPLY_WAIT (5 s) after the idle status, past the grace (10 s). A kernel that is idle runs no code:
    the run ends as interrupted and the kernel is not restarted. Modelled by a handler that ignores SIGINT
    for 6 s, then ends the request without a reply. It acts on the one run that names it, not on whatever
    request comes next: a first SIGINT may land before the handler ignores it (a loaded machine), and the
    handler must not then linger to swallow the check's run (it did, once, in CI)."""
    await session.run_and_wait(
        "kept = 'state survives'\n"
        "import signal, time\n"
        "_k = get_ipython().kernel\n_orig = _k.do_execute\n"
        "def _deaf(**kw):\n    if 'never runs' not in kw.get('code', ''):\n        return _orig(**kw)\n"
        "    signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "    time.sleep(6)\n    raise KeyboardInterrupt\n"
        "_k.do_execute = _deaf"
    )
    run_id = await session.run("print('never runs')")
    await session.wait_for(lambda: any(s["state"] == "running" for s in session.statuses(run_id)), what="running")
    await session.command(p.INTERRUPT, {})
    status = await session.finished(run_id, timeout=60)
    assert status["state"] == "interrupted", status
    check, _ = await session.run_and_wait("print(kept)")
    assert session.text(check) == "state survives\n"
    assert "restarting" not in [n["state"] for n in session.notes[p.KERNEL_STATUS]]


async def test_interrupt_cancels_queued_runs(session: Session) -> None:
    first = await session.run("import time\ntime.sleep(1e6)")
    second = await session.run("print('never')")
    await session.wait_for(lambda: any(s["state"] == "running" for s in session.statuses(first)), what="running")
    await session.command(p.INTERRUPT, {})
    assert (await session.finished(first))["state"] == "interrupted"
    assert (await session.finished(second))["state"] == "interrupted"
    assert session.text(second) == ""


async def test_kernel_death_is_reported_and_recovered(session: Session) -> None:
    await session.run_and_wait("lost = 1")
    run_id, status = await session.run_and_wait("import os\nos._exit(1)", timeout=60)
    assert status["state"] == "died"
    assert "state" in status["message"] and "lost" in status["message"]
    await session.wait_for(
        lambda: any("died" in m.message for m in session.client.messages), what="the user to be told"
    )
    # Told once, with why; then restarted (a restart, not a failed start tried again).
    [told] = [m.message for m in session.client.messages if "died" in m.message]
    assert "exit code 1" in told, told
    run_id, status = await session.run_and_wait("print('lost' in globals())", timeout=60)
    assert status["state"] == "ok"
    assert session.text(run_id) == "False\n"
    states = [n["state"] for n in session.notes[p.KERNEL_STATUS]]
    assert states[states.index("dead"):][:2] == ["dead", "restarting"], states


async def test_segfault_is_a_death_too(session: Session) -> None:
    run_id, status = await session.run_and_wait("import ctypes\nctypes.string_at(0)", timeout=60)
    assert status["state"] == "died"
    run_id, status = await session.run_and_wait("print('back')", timeout=60)
    assert session.text(run_id) == "back\n"


async def test_input_is_answered_by_the_editor(session: Session) -> None:
    session.input_answers.append("Ada")
    run_id, status = await session.run_and_wait("name = input('Your name? ')\nprint('hello', name)")
    assert status["state"] == "ok"
    assert session.input_prompts[0]["prompt"] == "Your name? "
    assert session.input_prompts[0]["password"] is False
    assert "hello Ada" in session.text(run_id)


async def test_cancelled_input_interrupts_instead_of_hanging(session: Session) -> None:
    run_id, status = await session.run_and_wait("input('never answered: ')\nprint('not reached')", timeout=60)
    assert (status["state"], status["message"]) == ("interrupted", "input cancelled")
    # One line, not the kernel's traceback of the interrupt.
    assert session.text(run_id) == "Input cancelled: the code was stopped at its input prompt."
    run_id, status = await session.run_and_wait("print('next run fine')", timeout=60)
    assert session.text(run_id) == "next run fine\n"


async def test_variables_are_listed_silently(session: Session) -> None:
    await session.run_and_wait("import math\nanswer = 42\nnames = ['a', 'b']\n_private = 1")
    before = await session.command(p.STATUS, {})
    result = await session.command(p.VARIABLES, {})
    by_name = {v["name"]: v for v in result["variables"]}
    assert by_name["answer"] == {"name": "answer", "type": "int", "summary": "42"}
    assert by_name["names"]["summary"] == "['a', 'b']"
    assert "math" not in by_name and "_private" not in by_name
    # Silent: no output, no history entry, no new names.
    run_id, _ = await session.run_and_wait("print(len(In), sorted(k for k in globals() if not k.startswith('_'))[:6])")
    assert session.text(run_id).startswith("3 ")
    assert before["kernels"]


async def test_files_a_run_touched_are_reported(session: Session) -> None:
    (session.root / "old.txt").write_text("old")
    (session.root / "gone.txt").write_text("bye")
    (session.root / ".git").mkdir()
    code = (
        "import os, pathlib\n"
        "pathlib.Path('out').mkdir()\n"
        "pathlib.Path('out/new.csv').write_text('a,b')\n"
        "pathlib.Path('old.txt').write_text('new')\n"
        "os.remove('gone.txt')\n"
        "pathlib.Path('.git/ignored').write_text('x')\n"
    )
    _, status = await session.run_and_wait(code)
    assert status["state"] == "ok"
    assert status["files"] == [
        {"path": "gone.txt", "change": "deleted"},
        {"path": "old.txt", "change": "modified"},
        {"path": "out/new.csv", "change": "created"},
    ]
    assert status["root"] == str(session.root)
    _, status = await session.run_and_wait("print('touches nothing')")
    assert "files" not in status
    # A safe save (a new file renamed over the old one) is a change of a file that was there, not a creation.
    _, status = await session.run_and_wait(
        "import os, pathlib\n"
        "pathlib.Path('old.txt.tmp').write_text('newer')\n"
        "os.replace('old.txt.tmp', 'old.txt')\n"
    )
    assert status["files"] == [{"path": "old.txt", "change": "modified"}]


async def test_run_timeout_stops_the_run_and_keeps_the_kernel(session: Session) -> None:
    await session.run_and_wait("kept = 7")
    run_id = await session.run("import time\ntime.sleep(1e6)", timeout=0.5)  # the run's own limit
    status = await session.finished(run_id, timeout=60)
    assert status["state"] == "timeout"
    assert "0.5 s" in status["message"]
    check, _ = await session.run_and_wait("print(kept)")
    assert session.text(check) == "7\n"


async def test_input_in_an_editor_that_cannot_answer_fails_at_once_in_one_line(workspace_root, home) -> None:
    from harness import start_session, stop_session

    s = await start_session(workspace_root, home, init_options={"capabilities": {}})
    try:
        run_id, status = await s.run_and_wait("name = input('Your name? ')", timeout=60)
        assert status["state"] == "error"
        assert s.text(run_id) == "input() is not available in this editor: put the value in the code instead."
    finally:
        await stop_session(s)


async def test_run_code_stays_out_of_ipythons_history_file(workspace_root, home) -> None:
    """The conversation is the record (masked). IPython's own history.sqlite in the user's home is shared by
    every kernel: code there would sit in plain text, and kernels racing for it print "Session/line number
    was not unique" into a run's output. In-session history (In, %history) still works."""
    from harness import start_session, stop_session

    marker = "history_marker_5e1f"
    s = await start_session(workspace_root, home, env={"HOME": str(home)})
    try:
        await s.run_and_wait(f"{marker} = 1")
        run_id, status = await s.run_and_wait("print(len(In) > 1, In[1])")
        assert status["state"] == "ok"
        assert s.text(run_id) == f"True {marker} = 1\n"
    finally:
        await stop_session(s)  # the kernel ends its IPython session, which writes out what it would keep
    kept = [path for path in home.rglob("*.sqlite") if marker.encode() in path.read_bytes()]
    assert kept == []


async def test_a_request_the_kernel_ends_without_a_reply_ends_the_run(session: Session) -> None:
    """ipykernel drops a request's reply when a KeyboardInterrupt lands in its handler before the code starts
    (an interrupt sent the moment a run shows busy, on a loaded machine): the run ends, says so, and the
    kernel's state is kept. Simulated here by a handler that raises it once, for the next run only."""
    await session.run_and_wait(
        "kept = 'state survives'\n"
        "_k = get_ipython().kernel\n_orig = _k.do_execute\n"
        "def _boom(**kw):\n    if kw.get('silent'):\n        return _orig(**kw)\n"
        "    _k.do_execute = _orig\n    raise KeyboardInterrupt\n"
        "_k.do_execute = _boom"
    )
    _run, status = await session.run_and_wait("print('never runs')", timeout=60)
    assert status["state"] == "error" and "without answering" in status["message"], status
    check, _ = await session.run_and_wait("print(kept)")
    assert session.text(check) == "state survives\n"
