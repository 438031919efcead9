"""Side doors a repository could use (issue 18, points 7 and 8), through the server: a client that says
nothing about trust gets an untrusted workspace; the workspace's `.env*` files are read only once trusted,
never through a link, never waiting on a FIFO, bounded, and only secret-looking values of secret names
mask output (never code); and no secret setting's value reaches the log at any level."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from harness import DEFAULT_WAIT, Session, start_session, stop_session
from interpreter_lsp import protocol as p
from interpreter_lsp.safety.envfiles import env_file_secrets, looks_like_secret
from scripted_model import ScriptedModel

ENV_KEY = "pay1ment2key3value4X"  # in the workspace's .env as PAYMENTS_API_KEY


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


def settings(model: ScriptedModel, **extra: Any) -> dict[str, Any]:
    return {"model": "openai/scripted", "apiBase": model.base_url, "maxRetries": 0, **extra}


async def chat_and_wait(s: Session, text: str) -> None:
    turn = (await s.command(p.CHAT, {"text": text}))["turnId"]
    await s.wait_for(
        lambda: any(n["turnId"] == turn and n["state"] in p.FINAL_TURN_STATES for n in s.notes[p.TURN_STATUS]),
        DEFAULT_WAIT,
        "the turn to end",
    )


def hostile_interpreter(root: Path) -> Path:
    """The repository's own .venv "python" (with what looks like ipykernel) leaves a marker when started."""
    marker = root / "MARKER"
    venv = root / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "lib" / "python3.11" / "site-packages" / "ipykernel").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    script = venv / "bin" / "python"
    script.write_text(f'#!/bin/sh\ntouch "{marker}"\nexec "{sys.executable}" "$@"\n')
    script.chmod(0o755)
    return marker


async def test_a_client_that_says_nothing_about_trust_gets_an_untrusted_workspace(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    marker = hostile_interpreter(workspace_root)
    (workspace_root / ".env").write_text(f"PAYMENTS_API_KEY={ENV_KEY}\n")
    model.reply("Noted.")
    model.reply("Noted again.")
    # A generic LSP editor (Helix, Zed, Kate, Sublime, eglot before its trust list): no `trusted` at all.
    s = await start_session(workspace_root, home, configuration=settings(model), trusted=None)
    try:
        with pytest.raises(JsonRpcException, match="not trusted"):
            await s.command(p.RUN, {"code": "open('pwned', 'w')"})
        status = await s.command(p.STATUS, {})
        assert status["trusted"] is False and status["kernels"] == []
        # The .env file is not read while untrusted: the value the user types reaches the model as typed.
        await chat_and_wait(s, f"is {ENV_KEY} my key?")
        assert ENV_KEY in json.dumps(model.requests[-1])
        assert not marker.exists(), "an untrusted workspace started its own interpreter"
        # Trusting the workspace (the one setting docs/editors.md shows, or interpreter.setTrusted) reads it.
        await s.command(p.SET_TRUSTED, {"trusted": True})
        await chat_and_wait(s, f"and {ENV_KEY} now?")
        assert ENV_KEY not in json.dumps(model.requests[-1])
    finally:
        await stop_session(s)
    assert not (workspace_root / "pwned").exists()


def test_env_files_are_read_without_links_fifos_or_floods_and_only_secret_looking_values(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    outside = tmp_path / "elsewhere.env"
    outside.write_text("LINKED_API_KEY=linked0key0value0123\n")
    (root / ".env").write_text(
        f"PAYMENTS_API_KEY={ENV_KEY}\n"
        "DATABASE_URL=postgres://app:Pg-Passw0rd-4242@db/app\n"
        # A repository choosing what to hide from output: ordinary words, numbers, short values.
        "API_TOKEN=Traceback\nMY_SECRET='the answer is 42'\nDB_PASSWORD=8080\nGITHUB_TOKEN=abc123\n"
        "BUILD_NUMBER=ordinary0value0123456\n"
    )
    (root / ".env.linked").symlink_to(outside)
    os.mkfifo(root / ".env.fifo")  # opening it for reading would wait for a writer forever
    (root / ".env.big").write_text("BIG_API_KEY=big0key0value0123456\n" + "#" * (70 * 1024))
    (root / ".env.dir").mkdir()
    values, skipped = env_file_secrets(root)
    assert sorted(values) == sorted([ENV_KEY, "postgres://app:Pg-Passw0rd-4242@db/app", "Pg-Passw0rd-4242"])
    assert skipped == [".env.big is over 64 KiB: not read for secrets to mask"]
    assert not looks_like_secret("Traceback") and not looks_like_secret("the answer is 42")


async def test_env_values_mask_output_but_never_code(workspace_root: Path, home: Path) -> None:
    (workspace_root / ".env").write_text(f"PAYMENTS_API_KEY={ENV_KEY}\n")
    s = await start_session(workspace_root, home)
    try:
        code = f"key = '{ENV_KEY}'\nprint('the key:', key)"
        run_id, status = await s.run_and_wait(code)
        assert status["state"] == "ok", s.text(run_id)
        assert s.statuses(run_id)[0]["code"] == code  # the echo shows the code as it runs
        assert s.text(run_id) == "the key: ***\n"  # its output is masked
        history = (await s.command(p.HISTORY, {}))["messages"]
        assert [e["code"] for e in history if e["type"] == "run"] == [code]
    finally:
        await stop_session(s)


async def test_no_secret_setting_value_reaches_the_log_at_debug(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    """Values that look nothing like keys, from initializationOptions and workspace/configuration, in a
    DEBUG log of a session that talks to the model (litellm logs at DEBUG too)."""
    api_key, token, init_key = "correct horse battery staple", "plain words", "hunter2"
    log_file = home / "server.log"
    model.reply("Hello.")
    s = await start_session(
        workspace_root,
        home,
        configuration=settings(model, apiKey=api_key, kernel={"gatewayToken": token}),
        init_options={"settings": {"apiKey": init_key, "kernel": {"gatewayToken": f"{token} too"}}},
        server_args=("--log-level", "DEBUG", "--log-file", str(log_file)),
    )
    try:
        await chat_and_wait(s, "hello")
        status = await s.command(p.STATUS, {})
        assert status["model"] == "openai/scripted"
    finally:
        await stop_session(s)
    text = log_file.read_text()
    assert " DEBUG " in text and "apiKey" in text  # the settings were logged, at DEBUG
    for value in (api_key, token, init_key, f"{token} too"):
        assert value not in text, f"{value!r} is in the log"
