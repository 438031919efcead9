"""Neovim in a real terminal (tmux), as a user runs it: keys typed into the terminal and the screen read
back from it (tmux capture-pane). What only a terminal shows is checked here: no message stops the
editor at "Press ENTER", and a missing server is a hint, not an autocommand's error trace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from nvim_harness import NVIM, SERVER, TESTS

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


class Terminal:
    def __init__(self, socket: str) -> None:
        self.socket = socket

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True).stdout

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "main", *keys)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "main")

    def wait(self, check: Callable[[str], bool], what: str, timeout: float = 180) -> str:
        deadline = time.monotonic() + timeout
        shown = ""
        while time.monotonic() < deadline:
            shown = self.screen()
            if check(shown):
                return shown
            time.sleep(0.2)
        raise AssertionError(f"{what} never showed; the screen:\n{shown}")


@pytest.fixture
def terminal(workspace: Path, editor_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    socket = f"ilsp-test-{uuid.uuid4().hex[:8]}"
    started: list[Terminal] = []

    def start(*, cmd: list[str] | None, trust: bool, path: str | None = None, settings: dict | None = None) -> Terminal:
        if trust:
            store = editor_env / "state" / "nvim" / "interpreter_lsp" / "trusted.json"
            store.parent.mkdir(parents=True, exist_ok=True)
            store.write_text(json.dumps({"folders": [str(workspace)]}))
        options = {"settings": settings or {}}
        if cmd:
            options["cmd"] = cmd
        env = {**os.environ, "INTERPRETER_LSP_SETUP": json.dumps(options), "TERM": "xterm-256color"}
        if path:
            env["PATH"] = path
        argv = [str(NVIM), "--clean", "-u", str(TESTS / "init.lua"), str(workspace / "demo.py")]
        subprocess.run(
            ["tmux", "-L", socket, "-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", "100", "-y", "30",
             "-c", str(workspace), *argv],
            check=True, env=env,
        )  # fmt: skip
        t = Terminal(socket)
        started.append(t)
        return t

    yield start
    if started:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


def test_a_missing_server_is_a_hint_not_an_error_trace(terminal) -> None:
    t = terminal(cmd=None, trust=True, path=SYSTEM_PATH)
    shown = t.wait(lambda s: "InterpreterInstall" in s, "the hint")
    assert "interpreter-lsp not found: run :InterpreterInstall" in shown, shown
    assert "Error detected while processing" not in shown, shown
    assert "Press ENTER" not in shown, shown
    assert "first cell" in shown, "the file is on screen"


def test_refusals_never_stop_the_editor_at_press_enter(terminal) -> None:
    t = terminal(cmd=[str(SERVER)], trust=False)
    t.wait(lambda s: "first cell" in s, "the file")
    for _ in range(3):
        t.keys(":InterpreterRun", "Enter")
        shown = t.wait(lambda s: ":InterpreterTrust, then try again" in s, "the refusal")
        assert "Press ENTER" not in shown, shown
        assert "VS Code" not in shown and "-32602" not in shown, shown
    t.keys("j")  # the editor takes keys at once: no prompt swallowed it
    shown = t.screen()
    assert "Press ENTER" not in shown


def test_the_install_shows_its_progress_and_never_waits_on_press_enter(
    terminal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """:InterpreterInstall from a plugin folder alone, with an index that has no interpreter-lsp (as the
    real one today): the screen shows it working and then what to do, never "Press ENTER"."""
    plugin = tmp_path / "interpreter_lsp.nvim"
    shutil.copytree(TESTS.parents[1] / "clients" / "neovim", plugin)
    monkeypatch.setenv("INTERPRETER_LSP_PLUGIN", str(plugin))
    index = tmp_path / "empty-index"
    index.mkdir()
    monkeypatch.setenv("PIP_INDEX_URL", index.as_uri())
    t = terminal(cmd=None, trust=True, path=SYSTEM_PATH)
    t.wait(lambda s: "InterpreterInstall" in s, "the hint")
    t.keys(":InterpreterInstall", "Enter")
    shown = t.wait(lambda s: "installing interpreter-lsp" in s, "the install's progress", timeout=120)
    assert "Press ENTER" not in shown, shown
    shown = t.wait(lambda s: "not on the package index yet" in s, "what to do", timeout=300)
    assert "Press ENTER" not in shown, shown
    assert "/path/to/a/clone" in shown and "failed · what to do is below" in shown, shown


def test_a_long_server_message_goes_to_the_panel_and_one_line(terminal) -> None:
    """window/showMessage (here: settings the server ignores) is long: whole in the panel, one line below,
    and the editor never waits on "Press ENTER"."""
    t = terminal(cmd=[str(SERVER)], trust=True, settings={f"notASetting{i}": i for i in range(6)})
    shown = t.wait(lambda s: "unknown setting" in s, "the server's warning", timeout=180)
    assert "Press ENTER" not in shown, shown
    t.keys(":InterpreterPanel", "Enter")
    shown = t.wait(lambda s: "notASetting5" in s, "all of it in the panel", timeout=120)
    assert "Press ENTER" not in shown, shown
