"""Local models as a user runs them, end to end: a real LSP client, the real server, real litellm over real
HTTP to the scripted model standing in for LM Studio, llama.cpp's server, vLLM or Ollama. No API key is
anywhere in the server's environment (the harness drops them); each case asserts the turn's error message
the user reads, and how often the model server was asked.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness import Session, server_env, start_session, stop_session
from interpreter_lsp import protocol as p
from interpreter_lsp.llm.endpoints import PLACEHOLDER_KEY
from interpreter_lsp.safety.secrets import is_secret_name
from scripted_model import ScriptedModel


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def turn_end(s: Session, turn_id: str, timeout: float = 60) -> dict[str, Any]:
    def final() -> dict[str, Any] | None:
        for n in s.notes[p.TURN_STATUS]:
            if n["turnId"] == turn_id and n["state"] in p.FINAL_TURN_STATES:
                return n
        return None

    return await s.wait_for(final, timeout, f"turn {turn_id} to end")


def streamed_text(s: Session, turn_id: str) -> str:
    return "".join(n["delta"] for n in s.notes[p.MESSAGE] if n["turnId"] == turn_id)


async def chat(
    root: Path, home: Path, settings: dict[str, Any], env: dict[str, str] | None = None, *, turns: int = 1
) -> tuple[dict[str, Any], str, dict[str, Any], float]:
    """`turns` chat turns in a fresh session: (the last one's final turnStatus, the text it streamed,
    interpreter.status, seconds from its chat command to its end). A turn before the timed one takes
    litellm's first import (seconds) out of the time."""
    s = await start_session(root, home, configuration=settings, env=env)
    try:
        for _ in range(turns):
            started = time.monotonic()
            turn = (await s.command(p.CHAT, {"text": "hello"}))["turnId"]
            end = await turn_end(s, turn)
            elapsed = time.monotonic() - started
        status = await s.command(p.STATUS, {})
        return end, streamed_text(s, turn), status, elapsed
    finally:
        await stop_session(s)


def test_the_servers_environment_has_no_key(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-developers-shell")
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:11434")

    env = server_env(home)

    assert not [name for name in env if is_secret_name(name)]
    assert "OLLAMA_HOST" not in env
    assert server_env(home, {"OPENAI_API_KEY": "sk-asked-for"})["OPENAI_API_KEY"] == "sk-asked-for"


async def test_keyless_openai_compatible_api_base_works(workspace_root: Path, home: Path) -> None:
    with ScriptedModel() as model:
        model.reply("Hello from a local model.")
        end, text, _, _ = await chat(workspace_root, home, {"model": "openai/scripted", "apiBase": model.base_url})

    assert end["state"] == "done", end
    assert text == "Hello from a local model."
    assert model.request_headers[0]["authorization"] == f"Bearer {PLACEHOLDER_KEY}"


async def test_lm_studio_found_by_discovery_works_keyless(workspace_root: Path, home: Path) -> None:
    with ScriptedModel(models=["qwen2.5-coder-7b-instruct"]) as lm_studio:
        lm_studio.reply("LM Studio here.")
        # The user's cloud key is in the environment: a server found on loopback must not receive it.
        env = {"OLLAMA_HOST": f"127.0.0.1:{closed_port()}", "LM_STUDIO_API_BASE": lm_studio.base_url,
               "OPENAI_API_KEY": "sk-the-users-cloud-key-123456"}
        end, text, status, _ = await chat(workspace_root, home, {}, env)

    assert end["state"] == "done", end
    assert text == "LM Studio here."
    assert status["model"] == "openai/qwen2.5-coder-7b-instruct"
    assert lm_studio.requests[0]["model"] == "qwen2.5-coder-7b-instruct"
    assert lm_studio.request_headers[0]["authorization"] == f"Bearer {PLACEHOLDER_KEY}"


async def test_ollama_found_by_discovery_works_keyless(workspace_root: Path, home: Path) -> None:
    with ScriptedModel(models=["qwen2.5-coder:7b"], strict_models=True) as ollama:
        ollama.reply("Ollama here.")
        env = {"OLLAMA_HOST": f"127.0.0.1:{ollama.port}", "LM_STUDIO_API_BASE": f"http://127.0.0.1:{closed_port()}/v1"}
        end, text, status, _ = await chat(workspace_root, home, {}, env)

    assert end["state"] == "done", end
    assert text == "Ollama here."
    assert status["model"] == "ollama_chat/qwen2.5-coder:7b"
    assert "authorization" not in ollama.request_headers[0]


@dataclass
class Case:
    """A failure as a user meets it: the settings, what the scripted server does, what the message says."""

    settings: Callable[[ScriptedModel], dict[str, Any]]
    script: Callable[[ScriptedModel], Any] = lambda model: None
    says: Callable[[ScriptedModel], list[str]] = lambda model: []
    never_says: list[str] = field(default_factory=list)
    requests: int = 1  # chat requests the model server received
    within: float | None = None  # when set, a second turn ends in the same error within this many seconds
    server: dict[str, Any] = field(default_factory=dict)  # ScriptedModel's arguments


NOT_A_SERVER_FAILURE = ["server failed", "try again later", "check the network"]
# maxRetries is 5 in every case: retrying with backoff (0.5 s doubling, halved at most by jitter) would
# take at least 7.75 s, so an error that comes sooner was not retried.
MAX_RETRIES = 5
WITHOUT_RETRIES = 5.0
_closed: dict[str, int] = {}


def _port(name: str) -> int:
    return _closed.setdefault(name, closed_port())


CASES = {
    "nothing listening on the api base": Case(
        settings=lambda m: {"model": "openai/qwen", "apiBase": f"http://127.0.0.1:{_port('openai')}/v1"},
        says=lambda m: [
            f"Nothing is listening on 127.0.0.1:{_port('openai')}",
            f"llama-server -m <model>.gguf --port {_port('openai')}",
            "vllm serve",
        ],
        never_says=[*NOT_A_SERVER_FAILURE, "retried"],
        requests=0,
        within=WITHOUT_RETRIES,
    ),
    "ollama not running": Case(
        settings=lambda m: {"model": "ollama_chat/qwen2.5-coder", "apiBase": f"http://127.0.0.1:{_port('ollama')}"},
        says=lambda m: [f"Nothing is listening on 127.0.0.1:{_port('ollama')}", "`ollama serve`"],
        never_says=[*NOT_A_SERVER_FAILURE, "retried"],
        requests=0,
        within=WITHOUT_RETRIES,
    ),
    "refused credentials": Case(
        server={"api_key": "sk-the-server-was-started-with-this"},
        settings=lambda m: {"model": "openai/scripted", "apiBase": m.base_url},
        says=lambda m: [f"{m.base_url} requires an API key", "interpreter.apiKey", "--api-key"],
        never_says=NOT_A_SERVER_FAILURE,
    ),
    "unknown model": Case(
        server={"models": ["qwen2.5-coder-7b-instruct", "llama-3.2-3b-instruct"], "strict_models": True},
        settings=lambda m: {"model": "openai/qwen-coder", "apiBase": m.base_url},
        says=lambda m: [
            'has no model "qwen-coder"',
            "It offers: qwen2.5-coder-7b-instruct, llama-3.2-3b-instruct.",
            '"openai/qwen2.5-coder-7b-instruct"',
        ],
        never_says=NOT_A_SERVER_FAILURE,
    ),
    "no provider in the model name": Case(
        settings=lambda m: {"model": "qwen2.5-coder", "apiBase": m.base_url},
        says=lambda m: [
            "nothing was sent",
            f'"openai/qwen2.5-coder" with interpreter.apiBase set to {m.base_url}',
            '"ollama_chat/qwen2.5-coder"',
            '"anthropic/claude-sonnet-4-5"',
        ],
        never_says=[*NOT_A_SERVER_FAILURE, "rejected"],
        requests=0,
    ),
    "a cloud model without a key": Case(
        settings=lambda m: {"model": "gpt-4o-mini"},
        says=lambda m: [
            "No API key is set for gpt-4o-mini, so nothing was sent",
            "OPENAI_API_KEY",
            "interpreter.apiKey",
        ],
        never_says=[*NOT_A_SERVER_FAILURE, "retried"],
        requests=0,
        within=WITHOUT_RETRIES,
    ),
    "context too long": Case(
        settings=lambda m: {"model": "openai/scripted", "apiBase": m.base_url},
        script=lambda m: m.context_exceeded(limit=4096, requested=5120),
        says=lambda m: ["no longer fits", "maximum context length is 4096 tokens", "interpreter.reset"],
        never_says=NOT_A_SERVER_FAILURE,
    ),
    "rate limit": Case(
        settings=lambda m: {"model": "openai/scripted", "apiBase": m.base_url, "maxRetries": 2},
        script=lambda m: m.fail(429, "Rate limit reached for requests", retry_after=0.3, times=3),
        says=lambda m: [
            f"{m.base_url} is rate limiting requests for openai/scripted (HTTP 429, asking to wait 0.3 s)",
            "retried 2 times",
            "wait a minute",
        ],
        never_says=["server failed"],
        requests=3,
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
async def test_what_the_user_reads_when_a_local_model_fails(workspace_root: Path, home: Path, case: Case) -> None:
    with ScriptedModel(**case.server) as model:
        case.script(model)
        settings = {"maxRetries": MAX_RETRIES, **case.settings(model)}
        end, _, _, elapsed = await chat(workspace_root, home, settings, turns=2 if case.within else 1)
        received = len(model.requests) // (2 if case.within else 1)

    message = end["message"]
    assert end["state"] == "error", end
    for words in case.says(model):
        assert words in message, message
    for words in case.never_says:
        assert words not in message, message
    assert received == case.requests, message
    if case.within is not None:
        assert elapsed < case.within, f"{elapsed:.1f} s: {message}"


async def test_what_the_first_chat_needs_is_ready_before_it(workspace_root: Path, home: Path) -> None:
    """With a model configured, the server makes ready what the first chat's request needs while the user
    types: Ollama is asked to describe the model (/api/show) before any chat, once; the python kernel's
    variables are listed with the kernel's first snapshot. The chat then asks for neither again."""
    with ScriptedModel() as model:
        model.ollama_show = {"model_info": {"qwen2.context_length": 8192}, "capabilities": ["completion"]}
        s = await start_session(workspace_root, home,
                                configuration={"model": "ollama_chat/scripted", "apiBase": model.root_url})
        try:
            # Asked by the model's warm-up, from the scripted model's thread: waited for there, bounded.
            assert await asyncio.to_thread(model.shown_once.wait, 60), "Ollama was not asked about its model"
            await s.wait_for(lambda: any(n["state"] == "idle" for n in s.notes[p.KERNEL_STATUS]) or None, 60,
                             "the python kernel")
            model.reply("Hello.")
            turn = (await s.command(p.CHAT, {"text": "hello"}))["turnId"]
            assert (await turn_end(s, turn))["state"] == "done"
            assert streamed_text(s, turn) == "Hello."
            assert model.shown == 1  # described once, before the chat
            context = next(n for n in s.notes[p.TURN_STATUS] if n["turnId"] == turn and "context" in n)["context"]
            assert (context["window"], context["windowSource"]) == (8192, "model"), context
        finally:
            await stop_session(s)
