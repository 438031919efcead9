"""Reopening Neovim shows the workspace's conversation as the server kept it (interpreter.history):
requests, answers, runs with their output, and kernel events."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from nvim_harness import SLOW_MS, Editor

from scripted_model import ScriptedModel


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


def quit_editor(ed: Editor) -> None:
    ed.lua(
        "for _, c in ipairs(vim.lsp.get_clients()) do c:stop() end "
        "vim.wait(10000, function() return #vim.lsp.get_clients() == 0 end, 20)"
    )


def test_history_is_shown_after_reopening(start_editor, model) -> None:
    model.reply("Hello from the first session.")
    settings = {"model": "openai/scripted", "apiBase": model.base_url, "apiKey": "sk-test", "confirmDestructive": False}
    ed: Editor = start_editor(settings)
    ed.open("demo.py")
    ed.nvim.command("call cursor(3, 1)")
    ed.nvim.command("InterpreterRun")
    ed.wait_panel("✓ **Run**")
    # A shell command that fails: bash_kernel's error has no name and no traceback, only the exit status.
    (ed.workspace / "fail.sh").write_text("echo before\n(exit 3)\n")
    ed.open("fail.sh")
    ed.nvim.command("1,2InterpreterRun")
    live = "\n".join(ed.wait_panel("exit status 3"))
    assert ": 3" not in live, live
    ed.open("demo.py")
    ed.nvim.command("Interpreter hello there")
    ed.wait_panel("Hello from the first session.")
    ed.nvim.command("InterpreterRestart")
    ed.wait_panel("Kernel restarted (python)")
    # The panel says so when the kernel is up again; the server records the restart when its command
    # ends, a moment later: quitting in between would lose it.
    seen = ed.helper("wait_history", "kernel", SLOW_MS)
    assert seen["ok"], seen["types"]
    quit_editor(ed)

    again: Editor = start_editor(settings)
    again.open("demo.py")
    ok = again.lua(
        f"return vim.wait({SLOW_MS}, function() local s = require('interpreter_lsp').session() "
        "return s and #s.panel.sections > 3 end, 20)"
    )
    assert ok, again.panel()
    text = "\n".join(again.wait_panel("── now ──"))
    assert "── earlier in this workspace ──" in text
    earlier = text.split("── now ──")[0]
    assert 'print("x is", x)' in earlier and "x is 42" in earlier, earlier
    assert "✓ **Run** · python" in earlier
    assert "## You\nhello there" in earlier
    assert "Hello from the first session." in earlier
    assert "Kernel restarted (python)" in earlier
    assert "before\nexit status 3" in earlier, earlier
