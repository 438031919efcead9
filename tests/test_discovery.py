"""Finding a local model server on loopback: Ollama-shaped and LM Studio-shaped endpoints on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from interpreter_lsp.llm import discovery
from interpreter_lsp.llm.client import ModelConfig, stream_completion
from interpreter_lsp.llm.discovery import NO_MODEL_HELP, discover_local_model, no_model_help
from interpreter_lsp.llm.endpoints import PLACEHOLDER_KEY
from interpreter_lsp.llm.errors import ModelError
from interpreter_lsp.safety.secrets import is_secret_name
from scripted_model import ScriptedModel

# The probe's own bound (0.3 s) is for a server that is there and quick; a test whose server must be found
# gives it the time a busy machine needs to answer from a thread.
ANSWERS_WITHIN = 10.0


class FakeServer:
    """Answers GET `path` with `payload` (JSON, or raw bytes), 404 elsewhere."""

    def __init__(self, path: str, payload: Any, status: int = 200) -> None:
        outer = self
        self.hits: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.hits.append(self.path)
                body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                found = self.path == path
                self.send_response(status if found else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body) if found else 0))
                self.end_headers()
                if found:
                    self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def lm_studio() -> Iterator[ScriptedModel]:
    with ScriptedModel() as model:  # it lists "scripted" at GET /v1/models, as LM Studio lists its models
        yield model


OLLAMA_TAGS = {
    "models": [
        {"name": "qwen2.5-coder:7b", "model": "qwen2.5-coder:7b", "size": 4683087332},
        {"name": "llama3.2:latest", "model": "llama3.2:latest", "size": 2019393189},
    ]
}


async def test_ollama_first_model() -> None:
    with FakeServer("/api/tags", OLLAMA_TAGS) as ollama:
        found = await discover_local_model(ANSWERS_WITHIN, ollama_port=ollama.port, lm_studio_port=free_port())

    assert found == ("ollama_chat/qwen2.5-coder:7b", f"http://127.0.0.1:{ollama.port}")
    assert ollama.hits == ["/api/tags"]


async def test_ollama_embedding_models_are_skipped() -> None:
    tags = {"models": [{"name": "nomic-embed-text:latest"}, {"name": "mistral:7b"}]}
    with FakeServer("/api/tags", tags) as ollama:
        found = await discover_local_model(ANSWERS_WITHIN, ollama_port=ollama.port, lm_studio_port=free_port())

    assert found == ("ollama_chat/mistral:7b", f"http://127.0.0.1:{ollama.port}")


async def test_lm_studio_when_there_is_no_ollama(lm_studio: ScriptedModel) -> None:
    found = await discover_local_model(ANSWERS_WITHIN, ollama_port=free_port(), lm_studio_port=lm_studio.port)

    assert found == ("openai/scripted", lm_studio.base_url)
    assert lm_studio.requests == []  # only listed, no chat request


async def test_lm_studio_when_ollama_has_no_models(lm_studio: ScriptedModel) -> None:
    with FakeServer("/api/tags", {"models": []}) as ollama:
        found = await discover_local_model(ANSWERS_WITHIN, ollama_port=ollama.port, lm_studio_port=lm_studio.port)

    assert found == ("openai/scripted", lm_studio.base_url)


async def test_ollama_wins_when_both_answer(lm_studio: ScriptedModel) -> None:
    with FakeServer("/api/tags", OLLAMA_TAGS) as ollama:
        found = await discover_local_model(ANSWERS_WITHIN, ollama_port=ollama.port, lm_studio_port=lm_studio.port)

    assert found is not None and found[0] == "ollama_chat/qwen2.5-coder:7b"


async def test_nothing_listening_is_none_quickly() -> None:
    started = time.monotonic()
    found = await discover_local_model(ollama_port=free_port(), lm_studio_port=free_port())

    assert found is None
    assert time.monotonic() - started < 1.0


async def test_a_server_that_never_answers_is_bounded_by_the_timeout() -> None:
    with socket.socket() as silent:  # accepts connections (kernel backlog) and never replies
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = int(silent.getsockname()[1])
        started = time.monotonic()
        found = await discover_local_model(timeout=0.3, ollama_port=port, lm_studio_port=port)
        elapsed = time.monotonic() - started

    assert found is None
    assert 0.25 <= elapsed < 5.0  # quiet, ~0.3 s; bounded, not a wait for ever


@pytest.mark.parametrize(
    ("status", "payload"),
    [(200, b"<html>not ollama</html>"), (500, {"error": "boom"}), (200, {"models": "nope"}), (200, [1, 2])],
    ids=["not-json", "server-error", "wrong-shape", "a-list"],
)
async def test_other_servers_on_the_port_are_not_mistaken_for_ollama(status: int, payload: Any) -> None:
    with FakeServer("/api/tags", payload, status) as other:
        found = await discover_local_model(ANSWERS_WITHIN, ollama_port=other.port, lm_studio_port=free_port())

    assert found is None


def test_no_model_help_says_how_to_set_one() -> None:
    assert "interpreter.model" in NO_MODEL_HELP
    for example in (
        "gpt-4o-mini",
        "OPENAI_API_KEY",
        "anthropic/claude-sonnet-4-5",
        "ANTHROPIC_API_KEY",
        "ollama_chat/qwen2.5-coder",
        "openai/<model>",
        "apiBase",
    ):
        assert example in NO_MODEL_HELP


def test_no_model_help_names_the_ports_looked_at(clean_env: pytest.MonkeyPatch) -> None:
    assert "Ollama on 127.0.0.1:11434, LM Studio on 127.0.0.1:1234" in no_model_help()

    clean_env.setenv("OLLAMA_HOST", "127.0.0.1:11500")
    clean_env.setenv("LM_STUDIO_API_BASE", "http://localhost:4321/v1")
    text = no_model_help()
    assert "Ollama on 127.0.0.1:11500, LM Studio on localhost:4321" in text, text
    assert "11434" not in text.split("\n")[0]


def test_no_model_help_says_a_remote_ollama_host_was_not_looked_at(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OLLAMA_HOST", "10.1.2.3:11434")
    text = no_model_help()
    assert "OLLAMA_HOST=10.1.2.3:11434 (not a loopback address: not looked at)" in text


async def test_the_no_model_error_names_the_real_port(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    port = free_port()
    clean_env.setenv("OLLAMA_HOST", f"127.0.0.1:{port}")
    clean_env.setenv("LM_STUDIO_API_BASE", f"http://127.0.0.1:{free_port()}/v1")
    ws = _workspace(tmp_path)
    try:
        with pytest.raises(ModelError) as caught:
            await ws.model_config()
    finally:
        ws.file_changes.close()
    assert f"Ollama on 127.0.0.1:{port}" in caught.value.message and "11434" not in caught.value.message


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No key and no pointer to a model server in the environment, as on a fresh machine."""
    for name in list(os.environ):
        if is_secret_name(name) or name.startswith(("OLLAMA_", "LM_STUDIO_")):
            monkeypatch.delenv(name)
    return monkeypatch


async def test_ollama_host_from_the_environment_is_probed(clean_env: pytest.MonkeyPatch) -> None:
    with FakeServer("/api/tags", OLLAMA_TAGS) as ollama:
        clean_env.setenv("OLLAMA_HOST", f"127.0.0.1:{ollama.port}")
        clean_env.setenv("LM_STUDIO_API_BASE", f"http://127.0.0.1:{free_port()}/v1")
        found = await discover_local_model(ANSWERS_WITHIN)

    assert found == ("ollama_chat/qwen2.5-coder:7b", f"http://127.0.0.1:{ollama.port}")


@pytest.mark.parametrize("form", ["http://localhost:{port}", "0.0.0.0:{port}", "localhost:{port}"])
async def test_ollama_host_forms_that_name_loopback(clean_env: pytest.MonkeyPatch, form: str) -> None:
    with FakeServer("/api/tags", OLLAMA_TAGS) as ollama:
        clean_env.setenv("OLLAMA_HOST", form.format(port=ollama.port))
        found = await discover_local_model(ANSWERS_WITHIN, lm_studio_port=free_port())

    assert found is not None and found[1] == f"http://127.0.0.1:{ollama.port}"


async def test_lm_studio_api_base_from_the_environment_is_probed(
    clean_env: pytest.MonkeyPatch, lm_studio: ScriptedModel
) -> None:
    clean_env.setenv("OLLAMA_HOST", f"127.0.0.1:{free_port()}")
    clean_env.setenv("LM_STUDIO_API_BASE", lm_studio.base_url)

    found = await discover_local_model(ANSWERS_WITHIN)

    assert found == ("openai/scripted", lm_studio.base_url)


@pytest.mark.parametrize(
    ("variable", "value"),
    [("OLLAMA_HOST", "10.1.2.3:11434"), ("LM_STUDIO_API_BASE", "http://192.0.2.7:1234/v1"), ("OLLAMA_HOST", "h:x")],
)
async def test_only_loopback_is_ever_probed(clean_env: pytest.MonkeyPatch, variable: str, value: str) -> None:
    clean_env.setenv(variable, value)
    probed: list[str] = []

    async def recording_get(client: object, url: str) -> None:
        probed.append(url)

    clean_env.setattr(discovery, "_get_json", recording_get)
    assert await discover_local_model() is None

    assert sorted(probed) == ["http://127.0.0.1:11434/api/tags", "http://127.0.0.1:1234/v1/models"]


async def test_a_discovered_lm_studio_model_answers_without_any_key(
    clean_env: pytest.MonkeyPatch, lm_studio: ScriptedModel
) -> None:
    lm_studio.reply("hello without a key")
    found = await discover_local_model(ANSWERS_WITHIN, ollama_port=free_port(), lm_studio_port=lm_studio.port)
    assert found is not None
    model, api_base = found

    completion = await stream_completion(
        [{"role": "user", "content": "hi"}], ModelConfig(model, api_base), lambda _: None
    )

    assert completion.text == "hello without a key"
    assert lm_studio.request_headers[0]["authorization"] == f"Bearer {PLACEHOLDER_KEY}"


# ---- loading the model library ahead of the first chat -----------------------------------------------------


@pytest.fixture
def warm_ups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Calls to the two warm-ups (recorded instead of importing anything in this process)."""
    calls: list[str] = []
    monkeypatch.setattr("interpreter_lsp.workspace.start_warm_up", lambda: calls.append("litellm"))
    monkeypatch.setattr("interpreter_lsp.workspace.start_direct_warm_up", lambda: calls.append("direct"))
    return calls


def _workspace(tmp_path: Path) -> Any:
    from interpreter_lsp.workspace import ServerContext, Workspace

    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    ctx = ServerContext(
        send=lambda *_: None, show_message=lambda *_: None, runtime_dir=runtime, specs_root=tmp_path / "specs"
    )
    return Workspace(tmp_path, ctx)


@pytest.mark.parametrize(
    ("model", "local_server", "loaded"),
    [
        ("gpt-4o-mini", False, ["direct"]),
        ("gemini/gemini-2.0-flash", False, ["litellm"]),
        (None, True, ["direct"]),
        (None, False, []),
    ],
    ids=["an OpenAI model is configured", "a litellm-only model is", "a local model server answers", "no model"],
)
async def test_the_model_library_loads_early_only_when_a_chat_can_happen(
    clean_env: pytest.MonkeyPatch,
    tmp_path: Path,
    warm_ups: list[str],
    model: str | None,
    local_server: bool,
    loaded: list[str],
    lm_studio: ScriptedModel,
) -> None:
    """Only the client the model needs is loaded ahead of the first chat: httpx for the wire formats the
    server speaks itself (llm/routes.py), litellm for the rest; nothing when no chat can happen."""
    clean_env.setenv("OLLAMA_HOST", f"127.0.0.1:{free_port()}")
    clean_env.setenv("LM_STUDIO_API_BASE", lm_studio.base_url if local_server else f"http://127.0.0.1:{free_port()}/v1")
    ws = _workspace(tmp_path)
    try:
        if model:
            ws.configure([("initializationOptions", {"model": model})])
        await ws.warm_up_model()
    finally:
        ws.file_changes.close()
    assert warm_ups == loaded
