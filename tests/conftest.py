from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import Session, start_session, stop_session


@pytest.fixture
def workspace_root(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
async def session(workspace_root: Path, home: Path) -> AsyncIterator[Session]:
    """An editor (VS Code's capabilities) with the server running on a fresh workspace."""
    s = await start_session(workspace_root, home)
    try:
        yield s
    finally:
        await stop_session(s)


@pytest.fixture(params=["visual-studio-code", "neovim"])
async def any_editor(request: pytest.FixtureRequest, workspace_root: Path, home: Path) -> AsyncIterator[Session]:
    """The same session with VS Code's and with Neovim's client capabilities."""
    s = await start_session(workspace_root, home, profile=request.param)
    try:
        yield s
    finally:
        await stop_session(s)


@pytest.fixture(autouse=True)
def _every_stepwise_view_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wherever the loop runs in the test's own process, each view built step by step (the requests' views:
    Conversation.model_view with `resume`) is compared with the same view built from every event."""
    from interpreter_lsp.agent.conversation import Conversation

    built = Conversation.model_view

    def checked(self: Conversation, system: str, events: Any = None, **options: Any) -> Any:
        view = built(self, system, events, **options)
        if options.get("resume"):
            whole = built(self, system, events, **{**options, "resume": False})
            assert view == whole, "the view built step by step differs from the view built at once"
        return view

    monkeypatch.setattr(Conversation, "model_view", checked)
