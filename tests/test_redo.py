"""Redo (interpreter.redo): the last undo taken back, as VS Code's redo does: the request (or the user's own
run) and its runs come back to the conversation, the workspace files the undo wrote or removed as it found
them, the python variables too; possible until something new happens in the conversation. End to end over
LSP with a real kernel; a unit check of the log's replay."""

from __future__ import annotations

import json

import pytest
from pygls.exceptions import JsonRpcException

from harness import Session, assert_shape, start_session, stop_session
from interpreter_lsp import protocol as p
from interpreter_lsp.history import replay


async def value(s: Session, expression: str) -> object:
    run_id, status = await s.run_and_wait(f"import json as _j; print(_j.dumps({expression}))")
    assert status["state"] == "ok", s.text(run_id)
    return json.loads(s.text(run_id, ("stdout",)).strip().splitlines()[-1])


STEP = """\
open('f.txt', 'w').write('after')
__import__('os').remove('gone.txt')
x = 2
y = [3]
"""


async def test_redo_brings_back_the_run_its_files_and_its_variables(session: Session) -> None:
    s = session
    (s.root / "f.txt").write_text("before")
    (s.root / "gone.txt").write_text("deleted by the step")
    await s.run_and_wait("x = 1")
    step, status = await s.run_and_wait(STEP)
    assert status["state"] == "ok", s.text(step)

    undone = await s.command(p.UNDO, {})
    assert undone["runs"] == [step]
    assert (s.root / "f.txt").read_text() == "before" and (s.root / "gone.txt").exists()

    # A run would end what can be redone: after the undo, the dry run says what redo would do.
    preview = await s.command(p.REDO, {"dryRun": True})
    assert_shape(p.UndoResult, preview)
    assert preview["restore"] == ["f.txt"] and preview["remove"] == ["gone.txt"], preview
    assert preview["variablesRestore"] == ["x", "y"] and preview["variablesRemove"] == [], preview
    assert (s.root / "f.txt").read_text() == "before"  # a dry run changes nothing

    redone = await s.command(p.REDO, {})
    assert_shape(p.UndoResult, redone)
    assert redone["request"] is None and redone["runs"] == [step], redone
    assert redone["restored"] == ["f.txt"] and redone["removed"] == ["gone.txt"], redone
    assert redone["variablesRestored"] == ["x", "y"] and redone["notRestorable"] == [], redone
    assert (s.root / "f.txt").read_text() == "after" and not (s.root / "gone.txt").exists()
    history = (await s.command(p.HISTORY, {}))["messages"]
    assert [e["runId"] for e in history if e["type"] == "run"][-1] == step  # the run is back
    note = [e for e in history if e["type"] == "note"][-1]
    assert note["text"].startswith("↷ Redone.") and "restored x, y" in note["text"], note
    assert "redid" in note["forModel"]

    # The redone step can be undone again, as if it had never been undone: no "changed since" for the
    # files the redo wrote, and the variables before it come back.
    again = await s.command(p.UNDO, {})
    assert again["runs"] == [step] and again["restored"] == ["f.txt", "gone.txt"], again
    assert again["variablesRestored"] == ["x"] and again["variablesRemoved"] == ["y"], again
    assert await value(s, "[x, 'y' in globals()]") == [1, False]


async def test_nothing_to_redo_before_an_undo_nor_after_something_new(session: Session) -> None:
    s = session
    with pytest.raises(JsonRpcException, match="Nothing to redo"):
        await s.command(p.REDO, {})
    await s.run_and_wait("a = 1")
    await s.command(p.UNDO, {})
    b, _ = await s.run_and_wait("b = 2")  # something new: the undone run is gone for good
    with pytest.raises(JsonRpcException, match="Nothing to redo"):
        await s.command(p.REDO, {})
    # Two undos, two redos: the last undone comes back first.
    c, _ = await s.run_and_wait("c = 3")
    await s.command(p.UNDO, {})  # c's run
    await s.command(p.UNDO, {})  # then b's
    assert (await s.command(p.REDO, {}))["runs"] == [b]
    assert (await s.command(p.REDO, {}))["runs"] == [c]
    with pytest.raises(JsonRpcException, match="Nothing to redo"):
        await s.command(p.REDO, {})
    assert await value(s, "[b, c, 'a' in globals()]") == [2, 3, False]


async def test_a_file_changed_after_the_undo_is_kept_and_named(session: Session) -> None:
    s = session
    (s.root / "notes.txt").write_text("v1")
    await s.run_and_wait("open('notes.txt', 'w').write('v2')")
    await s.command(p.UNDO, {})
    (s.root / "notes.txt").write_text("the user's own edit")
    result = await s.command(p.REDO, {})
    lost = {item["name"]: item["why"] for item in result["notRestorable"]}
    assert "changed after the undo" in lost.get("notes.txt", ""), result
    assert (s.root / "notes.txt").read_text() == "the user's own edit"


async def test_a_redo_outlives_a_server_restart_in_the_log(workspace_root, home) -> None:
    """The log replays undo and redo alike: after a restart the redone run is in the conversation."""
    s = await start_session(workspace_root, home)
    try:
        run_id, _ = await s.run_and_wait("print('kept')")
        await s.command(p.UNDO, {})
        await s.command(p.REDO, {})
    finally:
        await stop_session(s)
    s = await start_session(workspace_root, home)
    try:
        history = (await s.command(p.HISTORY, {}))["messages"]
        assert run_id in [e.get("runId") for e in history if e["type"] == "run"]
        with pytest.raises(JsonRpcException, match="Nothing to redo"):
            await s.command(p.REDO, {})  # what an earlier server kept for a redo went with it
    finally:
        await stop_session(s)


def test_replay_redo_rules() -> None:
    user = {"type": "user", "text": "q"}
    run = {"type": "run", "runId": "r1"}
    kernel = {"type": "kernel", "language": "python", "state": "restarted"}
    note = {"type": "note", "text": "↶ Undone."}
    # A redo brings back what the undo took, before the kernel news since; the undo's note goes.
    assert replay([user, run, {"type": "undo"}, note, kernel, {"type": "redo"}]) == [user, run, kernel]
    # Something new ends what can be redone: a later redo in the log does nothing.
    later = {"type": "user", "text": "again"}
    assert replay([user, run, {"type": "undo"}, later, {"type": "redo"}]) == [later]
    # A reset too.
    assert replay([user, run, {"type": "undo"}, {"type": "reset"}, {"type": "redo"}]) == []
