"""Workspace trust in Neovim: a folder the user never trusted runs nothing, not even the interpreter its
own .interpreter-lsp.toml names; :InterpreterTrust (remembered in Neovim's state directory) lets it run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from nvim_harness import SLOW_MS, Editor


def hostile_repository(root: Path) -> Path:
    """The repository names a "python" that leaves a marker when anything starts it."""
    marker = root / "MARKER"
    script = root / "tools" / "python"
    script.parent.mkdir()
    script.write_text(f'#!/bin/sh\ntouch "{marker}"\nexec "{sys.executable}" "$@"\n')
    script.chmod(0o755)
    (root / ".interpreter-lsp.toml").write_text('[kernel]\npython = "tools/python"\n')
    return marker


def test_an_untrusted_folder_runs_nothing_until_the_user_trusts_it(start_editor, editor_env) -> None:
    ed: Editor = start_editor(trust=False)
    marker = hostile_repository(ed.workspace)
    # Once trusted, the server asks before it uses the file's kernel.python (a sensitive setting): here
    # the user declines. (Allowing it races with the kernel the server warms up on trust: reported.)
    ed.lua(
        "_G.asked = {} vim.ui.select = function(items, opts, cb) table.insert(_G.asked, opts.prompt) cb(items[2]) end"
    )
    ed.open("demo.py")
    text = "\n".join(ed.wait_panel("This folder is not trusted"))
    assert ":InterpreterTrust trusts " + str(ed.workspace) in text
    bar = ed.lua("local s = require('interpreter_lsp').session() return table.concat(s:status_parts(), ' | ')")
    assert "not trusted" in bar, bar

    ed.nvim.command("call cursor(3, 1)")
    ed.nvim.command("InterpreterRun")
    text = "\n".join(ed.wait_panel("✗ **Run**"))
    assert "not trusted" in text.split("✗ **Run**")[1], text
    assert not marker.exists(), "an untrusted folder started its own interpreter"
    assert ed.lua("return _G.asked") == [], "an untrusted folder's settings file was read"

    ed.nvim.command("InterpreterTrust")
    ed.wait_panel("✓ trusted")
    store = json.loads((editor_env / "state" / "nvim" / "interpreter_lsp" / "trusted.json").read_text())
    assert store["folders"] == [str(ed.workspace)]
    seen = ed.helper("wait_status", "r.trusted == true", SLOW_MS)
    assert seen["ok"], seen["status"]
    ed.nvim.command("InterpreterRun")
    text = "\n".join(ed.wait_panel("✓ **Run**"))
    assert "x is 42" in text
    assert any("kernel.python" in str(q) for q in ed.lua("return _G.asked")), "trusted: the file is read"
    assert not marker.exists(), "the file's interpreter runs only when the user allows it"
    assert "not trusted" not in ed.lua(
        "local s = require('interpreter_lsp').session() return table.concat(s:status_parts(), ' | ')"
    )
