"""The whole loop from Neovim with the real server, real litellm over HTTP and a scripted model:
ask, watch the answer stream, then approve, edit, reject or apply its code; what the user sees."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from nvim_harness import SLOW_MS, Editor

from scripted_model import ScriptedModel


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


def open_ready(ed: Editor, relative: str) -> None:
    """Open a file and wait until the server has started (its python kernel warmed up: the window bar
    shows "python idle"), as a user sees before typing. (A command sent before the server has read its settings may see
    none: a server race reported to the lead.)"""
    ed.open(relative)
    seen = ed.helper("wait_kernel", "python", "idle", SLOW_MS)
    assert seen["ok"], seen


def accept_diff(ed: Editor) -> None:
    """The apply's diff opened (apply.lua): accept it with `a`, as a user does after reading it."""
    ok = ed.lua("return vim.wait(10000, function() return vim.bo.filetype == 'diff' end, 20)")
    assert ok, "the diff of the apply never opened"
    ed.nvim.input("a")


def settings_for(model: ScriptedModel, **extra: Any) -> dict[str, Any]:
    return {"model": "openai/scripted", "apiBase": model.base_url, "apiKey": "sk-test", **extra}


def test_chat_streams_then_approve_runs_and_the_model_answers(start_editor, model) -> None:
    story = "Let me work that out step by step, with a little Python to be sure of the arithmetic. "
    model.reply(story * 4 + "\n```python\nprint('product:', 6 * 7)\n```\n", chunk_size=6, delay=0.02)
    model.reply("The product is 42.")
    ed: Editor = start_editor(settings_for(model))
    open_ready(ed, "demo.py")
    ed.nvim.command("Interpreter what is six times seven?")

    # The answer streams: its beginning is on screen while the rest is still coming.
    first = "\n".join(ed.wait_panel("Let me work that out"))
    assert "## You" in first and "what is six times seven?" in first
    assert "pending: a approve" not in first, "the proposal came before the text finished streaming"

    lines = ed.wait_panel("pending: a approve")
    text = "\n".join(lines)
    assert "**Proposal 1** · python · risk: low" in text
    assert "print('product:', 6 * 7)" in text

    # Approve with the panel's key, from inside the panel, as a user would.
    ed.nvim.command("wincmd l")
    assert ed.nvim.current.buffer.name.startswith("interpreter://")
    ed.nvim.input("a")
    text = "\n".join(ed.wait_panel("The product is 42."))
    assert "product: 42" in text
    assert "✓ **Run** · python · by the model · proposal 1 · ok" in text
    assert "approved" in text
    # The model saw the run's output before it answered.
    second = model.wait_requests(2)[1]
    assert "product: 42" in str(second["messages"])


def test_reject_tells_the_model_and_ends_the_turn(start_editor, model) -> None:
    model.reply("```python\nimport shutil\nshutil.rmtree('/home')\n```\n")
    ed: Editor = start_editor(settings_for(model))
    open_ready(ed, "demo.py")
    ed.nvim.command("Interpreter clean up my home folder")
    text = "\n".join(ed.wait_panel("pending: a approve"))
    assert "risk: high" in text
    ed.nvim.command("InterpreterReject")  # without a reason: the turn ends (with one, the model is asked again)
    text = "\n".join(ed.wait_panel("· rejected"))
    assert "**Run**" not in text, "rejected code must not run"
    ed.wait_panel("Declined: the code did not run.")
    assert ed.lua("return require('interpreter_lsp').session().turn_state") is None, "the turn ended"
    assert len(model.requests) == 1


def test_edit_then_write_approves_the_edited_code(start_editor, model) -> None:
    model.reply("```python\nprint('original')\n```\n")
    model.reply("Done.")
    ed: Editor = start_editor(settings_for(model))
    open_ready(ed, "demo.py")
    ed.nvim.command("Interpreter say something")
    ed.wait_panel("pending: a approve")
    ed.nvim.command("wincmd l")  # `e` in the panel
    panel_win = ed.nvim.current.window
    ed.nvim.input("c")  # `c` edits (`e` stays the motion it is)
    assert ed.lua("return vim.wait(10000, function() return vim.bo.buftype == 'acwrite' end, 20)")
    assert ed.nvim.current.buffer[:] == ["print('original')"]
    ed.nvim.current.buffer[:] = ["print('edited ' + 'by hand')"]
    ed.nvim.command("write")
    text = "\n".join(ed.wait_panel("✓ **Run**"))
    assert "edited by hand" in text
    assert "original\n" not in text.split("✓ **Run**")[1]
    assert "edited, approved" in text
    ed.wait_panel("Done.")
    assert ed.nvim.current.window == panel_win, "after :w the cursor is back where `e` was pressed"


def test_apply_writes_the_proposal_over_the_selection(start_editor, model) -> None:
    model.reply("Here is a clearer version:\n```python\nanswer = 6 * 7\nprint('answer is', answer)\n```\n")
    ed: Editor = start_editor(settings_for(model))
    open_ready(ed, "demo.py")
    ed.nvim.command("2,3Interpreter make this clearer")
    text = "\n".join(ed.wait_panel("pending: a approve"))
    assert "(about demo.py:2-3)" in text
    ed.nvim.command("InterpreterApply")
    accept_diff(ed)
    ed.wait_panel("applied to demo.py")
    source = ed.buffer_text()
    assert "answer = 6 * 7\nprint('answer is', answer)" in source
    assert "x = 6 * 7" not in source, "the selected lines were replaced"
    assert source.startswith("# %% first cell\n")
    assert source.rstrip().endswith("y = x + 1"), "lines outside the selection are untouched"


def test_interrupt_stops_the_model_mid_answer(start_editor, model) -> None:
    held = model.hold("this text arrives too late")
    ed: Editor = start_editor(settings_for(model))
    open_ready(ed, "demo.py")
    ed.nvim.command("Interpreter think for a long time")
    assert held.received.wait(SLOW_MS / 1000), "the model never got the request"
    ed.nvim.command("InterpreterInterrupt")
    text = "\n".join(ed.wait_panel("■ stopped"))
    assert "this text arrives too late" not in text
    assert held.disconnected.wait(10), "the model's stream was not closed on interrupt"


def test_model_error_is_shown_in_the_panel(start_editor, model) -> None:
    model.fail(401, "invalid api key", times=3)
    ed: Editor = start_editor(settings_for(model))
    open_ready(ed, "demo.py")
    ed.nvim.command("Interpreter hello")
    text = "\n".join(ed.wait_panel("⚠ "))
    assert "InterpreterError" in ed.helper("highlights_of", "⚠ ")
    assert "401" in text or "api key" in text.lower(), text


def test_apply_at_the_cursor_writes_whole_lines_and_the_turn_goes_on(start_editor, model) -> None:
    """`i` in the panel writes the proposal at the source window's cursor as whole lines (on a blank line:
    in its place, the blank line kept after it), the turn ends with the server's message, the panel
    shows the end, and the next request works; :InterpreterApply in the source puts code below the line."""
    model.reply("```python\nz = 1\nprint(z)\n```\n")
    model.reply("Another:\n```python\nw = 2\n```\n")
    model.reply("```python\nv = 3\n```\n")
    ed: Editor = start_editor(settings_for(model))
    open_ready(ed, "demo.py")
    source_win = ed.nvim.current.window
    ed.nvim.command("call cursor(4, 1)")  # the blank line between the two cells
    ed.nvim.command("Interpreter add z")
    ed.wait_panel("pending: a approve")
    ed.nvim.command("wincmd l")
    ed.nvim.command("normal! gg")  # the user scrolled up to read
    ed.nvim.input("i")
    accept_diff(ed)
    lines = ed.wait_panel("it did not run.")
    assert "Written into demo.py; it did not run." in "\n".join(lines)
    assert "· applied to demo.py" in "\n".join(lines)
    source = "\n".join(source_win.buffer[:])
    expected = '# %% first cell\nx = 6 * 7\nprint("x is", x)\nz = 1\nprint(z)\n\n# %% second cell\n'
    assert source.startswith(expected), source
    assert "z = 1" not in "\n".join(ed.panel()).split("it did not run.")[1], "applied code does not run"
    # The panel shows its end: the cursor on the last line, and that line on screen.
    view = ed.lua(
        "local w = require('interpreter_lsp').session().panel:window() "
        "return { cursor = vim.api.nvim_win_get_cursor(w)[1], bottom = vim.fn.line('w$', w), "
        "count = vim.api.nvim_buf_line_count(vim.api.nvim_win_get_buf(w)), bar = vim.wo[w].winbar }"
    )
    assert view["cursor"] == view["count"] == view["bottom"], view
    assert "awaiting" not in view["bar"], view
    assert ed.lua("return require('interpreter_lsp').session().turn_state") is None

    # The turn ended: a new request works; :InterpreterApply in the source writes below the cursor line.
    ed.nvim.current.window = source_win
    ed.nvim.command("Interpreter another")
    ed.wait_panel("pending: a approve")
    ed.nvim.command("call cursor(2, 3)")
    ed.nvim.command("InterpreterApply")
    accept_diff(ed)
    ed.wait_panel("it did not run.", count=2)
    assert source_win.buffer[1:4] == ["x = 6 * 7", "w = 2", 'print("x is", x)'], source_win.buffer[:]

    # Over a range of lines (a visual selection): those lines are replaced.
    ed.nvim.command("Interpreter a third")
    ed.wait_panel("pending: a approve")
    assert source_win.buffer[8:10] == ['print("second cell ran")', "y = x + 1"], source_win.buffer[:]
    ed.nvim.command("9,10InterpreterApply")
    accept_diff(ed)
    ed.wait_panel("it did not run.", count=3)
    assert source_win.buffer[7:] == ["# %% second cell", "v = 3"], source_win.buffer[:]


def test_reject_with_a_reason_asks_the_model_again(start_editor, model) -> None:
    model.reply("```python\nimport shutil\nshutil.rmtree('build')\n```\n")
    model.reply("Understood, nothing will be deleted.")
    ed: Editor = start_editor(settings_for(model))
    ed.lua("vim.ui.input = function(opts, on_confirm) on_confirm('keep the build folder') end")
    open_ready(ed, "demo.py")
    ed.nvim.command("Interpreter clean up")
    ed.wait_panel("R reject, say why")
    ed.nvim.command("wincmd l")
    ed.nvim.input("R")
    text = "\n".join(ed.wait_panel("Understood, nothing will be deleted."))
    assert "rejected (keep the build folder)" in text
    assert "keep the build folder" in str(model.wait_requests(2)[1]["messages"])
    notes = [n["msg"] for n in ed.lua("return require('interpreter_lsp_test').notes")]
    assert not any("interpreter." in n for n in notes), notes
