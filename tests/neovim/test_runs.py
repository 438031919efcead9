"""Running code from Neovim: what the user sees in the panel."""

from __future__ import annotations

from conftest import Editor


def test_run_cell_shows_its_output(start_editor) -> None:
    ed: Editor = start_editor()
    ed.open("demo.py")
    ed.nvim.command("call cursor(3, 1)")
    ed.nvim.command("InterpreterRun")
    lines = ed.wait_panel("✓ **Run**")
    text = "\n".join(lines)
    assert "x is 42" in text
    assert "second cell ran" not in text
    assert "demo.py:2-4" in text
