"""The workspace commands: variables, status, restart, export, reset, undo, redo; what the user sees."""

from __future__ import annotations

import json

from nvim_harness import Editor


def run_first_cell(ed: Editor) -> None:
    ed.open("demo.py")
    ed.nvim.command("call cursor(3, 1)")
    ed.nvim.command("InterpreterRun")
    ed.wait_panel("✓ **Run**")


def test_variables_show_in_a_float(start_editor) -> None:
    ed: Editor = start_editor()
    run_first_cell(ed)
    ed.nvim.command("InterpreterVariables")
    seen = ed.helper("wait_float", "int", 20_000)
    assert seen["ok"], seen
    row = next(line for line in seen["lines"] if line.startswith("x "))
    assert "int" in row and "42" in row, row


def test_status_names_the_model_and_the_kernels(start_editor) -> None:
    ed: Editor = start_editor()
    run_first_cell(ed)
    ed.nvim.command("InterpreterStatus")
    seen = ed.helper("wait_note", "kernels:", 20_000)
    assert seen["ok"], seen
    note = next(n["msg"] for n in seen["notes"] if "kernels:" in n["msg"])
    assert "python idle" in note
    assert "model: (none configured" in note
    assert f"workspace: {ed.workspace}" in note

    # A settings change shows at once in the status line, and the server takes it.
    ed.lua("require('interpreter_lsp').update_settings({ model = 'openai/other-model' })")
    assert "openai/other-model" in ed.lua("return require('interpreter_lsp').statusline()")
    seen = ed.helper("wait_status", "r.model == 'openai/other-model'", 20_000)
    assert seen["ok"], seen["status"]


def test_restart_asks_names_the_language_and_says_when_done(start_editor) -> None:
    ed: Editor = start_editor()
    run_first_cell(ed)
    ed.lua("_G.asked = {} vim.fn.confirm = function(msg) table.insert(_G.asked, msg) return 1 end")
    assert ed.lua("return vim.fn.getcompletion('InterpreterRestart ', 'cmdline')") == ["python", "shell"]
    ed.nvim.command("InterpreterRestart")  # no language: the buffer's (python)
    assert ed.lua("return _G.asked") == ["Restart the python kernel? Its variables are lost."]
    text = "\n".join(ed.wait_panel("Kernel restarted (python)"))
    assert "↻ restarting the python kernel…" in text
    ed.lua("require('interpreter_lsp').run_code('print(x)', 'python')")
    text = "\n".join(ed.wait_panel("✗ **Run**"))
    assert "NameError" in text

    ed.lua("vim.fn.confirm = function(msg) table.insert(_G.asked, msg) return 2 end")  # Cancel
    ed.nvim.command("InterpreterRestart python")
    assert len(ed.lua("return _G.asked")) == 2
    assert "\n".join(ed.panel()).count("restarting the python kernel") == 1, "a cancelled restart does nothing"


def test_export_writes_a_notebook_of_the_runs(start_editor) -> None:
    ed: Editor = start_editor()
    run_first_cell(ed)
    ed.nvim.command("InterpreterExport out/session.ipynb")
    seen = ed.helper("wait_note", "exported the conversation to", 20_000)
    assert seen["ok"], seen
    notebook = json.loads((ed.workspace / "out" / "session.ipynb").read_text())
    sources = ["".join(cell["source"]) for cell in notebook["cells"]]
    assert any("x = 6 * 7" in source for source in sources), sources


def test_verify_re_runs_the_notebook_and_says_whether_it_reproduces(start_editor) -> None:
    """:InterpreterVerify: the export re-run in a fresh kernel; its verdict in the panel and a notification."""
    ed: Editor = start_editor()
    run_first_cell(ed)
    ed.nvim.command("InterpreterVerify out/verified.ipynb")
    seen = ed.helper("wait_note", "reproduces", 120_000)
    assert seen["ok"], seen
    text = "\n".join(ed.panel())
    assert "✓ Notebook verified.ipynb reproduces: its one cell gave the session's output again" in text, text
    notebook = json.loads((ed.workspace / "out" / "verified.ipynb").read_text())
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    stamps = [c["metadata"]["interpreter_lsp"]["verify"]["verdict"] for c in code]
    assert stamps == ["identical"], stamps


def test_reset_and_undo_say_what_happened(start_editor) -> None:
    ed: Editor = start_editor({"confirmDestructive": False})  # the setting skips the question
    run_first_cell(ed)  # x = 42
    ed.nvim.command("InterpreterUndo")
    seen = ed.helper("wait_note", "your last run is gone from the conversation; variables removed x.", 20_000)
    assert seen["ok"], seen
    ed.nvim.command("InterpreterUndo")
    seen = ed.helper("wait_note", "Nothing to undo", 20_000)
    assert seen["ok"], seen
    note = next(n for n in seen["notes"] if "Nothing to undo" in n["msg"])
    assert note["level"] == 2, note  # vim.log.levels.INFO: an answer, not an error
    assert any(line.startswith("Nothing to undo") for line in ed.panel())
    assert not any("⚠ Nothing to undo" in line for line in ed.panel())
    ed.nvim.command("InterpreterReset")
    ed.wait_panel("── new conversation")


def test_redo_brings_back_what_undo_took_and_says_so(start_editor) -> None:
    """:InterpreterRedo takes the undos back, the newest first: the runs' variables and files come back and
    the panel says so; with nothing more to redo, a plain note (no error, no hit-enter prompt)."""
    ed: Editor = start_editor({"confirmDestructive": False})
    run_first_cell(ed)  # x = 42
    ed.lua("require('interpreter_lsp').run_code(\"open('made.txt', 'w').write('made')\", 'python')")
    ed.wait_panel("✓ **Run**", count=2)
    ed.nvim.command("InterpreterUndo")  # the file's run
    seen = ed.helper("wait_note", "your last run is gone from the conversation; files removed made.txt.", 20_000)
    assert seen["ok"], seen
    assert not (ed.workspace / "made.txt").exists()
    ed.nvim.command("InterpreterUndo")  # the cell's run
    seen = ed.helper("wait_note", "your last run is gone from the conversation; variables removed x.", 20_000)
    assert seen["ok"], seen

    # The whole text in the panel; the message area has one line of it.
    ed.nvim.command("InterpreterRedo")
    ed.wait_panel("↷ Redone: your run is back in the conversation; variables restored x.")
    ed.nvim.command("InterpreterRedo")
    lines = ed.wait_panel("↷ Redone: your run is back in the conversation", count=2)
    assert any("↷ Redone" in line and "made.txt" in line for line in lines), lines
    assert (ed.workspace / "made.txt").read_text() == "made", "the redo writes the file back"

    ed.nvim.command("InterpreterRedo")
    seen = ed.helper("wait_note", "Nothing to redo", 20_000)
    assert seen["ok"], seen
    note = next(n for n in seen["notes"] if "Nothing to redo" in n["msg"])
    assert note["level"] == 2, note  # vim.log.levels.INFO: an answer, not an error
    assert any(line.startswith("Nothing to redo") for line in ed.panel())
    assert not any("⚠ Nothing to redo" in line for line in ed.panel())
    assert ed.nvim.api.get_mode()["blocking"] is False, "no hit-enter prompt"

    # The kernel has x again.
    ed.lua("require('interpreter_lsp').run_code('print(x * 2)', 'python')")
    ed.wait_panel("84")
