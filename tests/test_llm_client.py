"""stream_completion through real litellm over real HTTP to the scripted model: what a user would see."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from interpreter_lsp.llm import errors
from interpreter_lsp.llm.client import ModelConfig, stream_completion
from interpreter_lsp.llm.endpoints import PLACEHOLDER_KEY
from interpreter_lsp.llm.errors import ModelError
from interpreter_lsp.llm.loader import get_litellm
from interpreter_lsp.safety.secrets import is_secret_name
from scripted_model import ScriptedModel

MESSAGES = [{"role": "system", "content": "You run code."}, {"role": "user", "content": "say hello"}]
SECRET_KEY = "sk-test-4f9d2c7a1b8e6f30"
SERVER_DIR = Path(__file__).resolve().parent.parent / "server"


@pytest.fixture(autouse=True)
async def litellm_loaded() -> None:
    """Import litellm before a test starts its clock (the first import takes seconds)."""
    await asyncio.wait_for(get_litellm(), 60)


@pytest.fixture(autouse=True)
def no_keys_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """As a user of a local model: no API key anywhere. A test that needs one sets it itself."""
    for name in list(os.environ):
        if is_secret_name(name) or name.startswith(("OLLAMA_", "LM_STUDIO_")):
            monkeypatch.delenv(name)


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as scripted:
        yield scripted


def config_for(scripted: ScriptedModel, **overrides: object) -> ModelConfig:
    settings: dict[str, object] = {"model": "openai/scripted", "api_base": scripted.base_url, "backoff_base": 0.05}
    settings.update(overrides)
    return ModelConfig(**settings)  # type: ignore[arg-type]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_deltas_arrive_in_order_and_make_up_the_text(model: ScriptedModel) -> None:
    reply = "Let me look.\n```python\nprint('hello')\n```\nDone."
    model.reply(reply, chunk_size=5, usage=(42, 17))
    deltas: list[str] = []

    completion = await stream_completion(MESSAGES, config_for(model), deltas.append)

    assert len(deltas) >= len(reply) // 5
    assert "".join(deltas) == reply == completion.text
    assert (completion.prompt_tokens, completion.completion_tokens) == (42, 17)
    assert completion.cost == 0.0  # a local model: not in the cost map
    sent = model.requests[0]
    assert sent["messages"] == MESSAGES
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


async def test_calls_one_after_another_share_one_connection(model: ScriptedModel) -> None:
    """An OpenAI-compatible stream ends with [DONE] before its body ends: the body is read to its end, so that
    the connection is kept for the next call (against a provider, each new one is a TLS handshake)."""
    for text in ("one", "two", "three"):
        model.reply(text, chunk_size=2)
        assert (await stream_completion(MESSAGES, config_for(model), lambda _d: None)).text == text
    assert model.connections_accepted == 1


async def test_a_server_that_holds_the_stream_open_after_done_does_not_hold_the_reply(model: ScriptedModel) -> None:
    """[DONE] ends the reply, whether or not the body ends: the connection is then closed, not waited on."""
    first = model.reply("held", open_after_done=True)
    model.reply("next")
    started = time.monotonic()
    assert (await stream_completion(MESSAGES, config_for(model), lambda _d: None)).text == "held"
    assert time.monotonic() - started < 30  # the read to the end is bounded (0.1 s), not the stall timeout
    assert await asyncio.to_thread(first.disconnected.wait, 60)
    assert (await stream_completion(MESSAGES, config_for(model), lambda _d: None)).text == "next"
    assert model.connections_accepted == 2


async def test_usage_is_counted_when_the_server_sends_none(model: ScriptedModel) -> None:
    model.reply("one two three four five six seven eight")

    completion = await stream_completion(MESSAGES, config_for(model), lambda _: None)

    assert completion.prompt_tokens > 0
    assert completion.completion_tokens > 0


async def test_the_callers_count_stands_in_for_usage_the_server_does_not_send(model: ScriptedModel) -> None:
    """The loop passes the request's tokens as the context budget counted them: without usage from the server,
    that figure is recorded (nothing is counted again at the end of the call); the server's usage wins."""
    model.reply("one two three")
    completion = await stream_completion(MESSAGES, config_for(model), lambda _: None, prompt_tokens=4321)
    assert completion.prompt_tokens == 4321 and completion.completion_tokens > 0
    model.reply("one two three", usage=(42, 17))
    completion = await stream_completion(MESSAGES, config_for(model), lambda _: None, prompt_tokens=4321)
    assert (completion.prompt_tokens, completion.completion_tokens) == (42, 17)


async def test_temperature_and_max_tokens_reach_the_server(model: ScriptedModel) -> None:
    model.reply("ok")

    await stream_completion(MESSAGES, config_for(model, temperature=0.2, max_tokens=99), lambda _: None)

    assert model.requests[0]["temperature"] == 0.2
    assert model.requests[0]["max_tokens"] == 99


async def test_429_with_retry_after_waits_then_the_text_arrives_once(model: ScriptedModel) -> None:
    model.fail(429, "Rate limit reached", retry_after=0.6)
    model.reply("finally here")
    deltas: list[str] = []

    started = time.monotonic()
    completion = await stream_completion(MESSAGES, config_for(model), deltas.append)
    waited = time.monotonic() - started

    assert "".join(deltas) == "finally here" == completion.text
    assert 0.55 <= waited < 3.0
    assert len(model.requests) == 2


async def test_retry_after_is_capped(model: ScriptedModel) -> None:
    model.fail(429, "Rate limit reached", retry_after=3600)
    model.reply("ok")

    started = time.monotonic()
    completion = await stream_completion(MESSAGES, config_for(model, retry_after_cap=0.2), lambda _: None)

    assert completion.text == "ok"
    assert time.monotonic() - started < 3.0


async def test_429_until_retries_end_says_so(model: ScriptedModel) -> None:
    model.fail(429, "Rate limit reached", retry_after=0, times=3)

    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model, max_retries=2), lambda _: None)

    assert caught.value.kind == errors.RATE_LIMITED
    assert "429" in caught.value.message and "retried 2 times" in caught.value.message
    assert "another model" in caught.value.message
    assert len(model.requests) == 3


async def test_500s_until_retries_end_give_a_helpful_error(model: ScriptedModel) -> None:
    model.fail(500, "upstream exploded", times=4)

    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model, max_retries=3), lambda _: None)

    message = caught.value.message
    assert caught.value.kind == errors.SERVER
    assert "HTTP 500" in message and "upstream exploded" in message and "retried 3 times" in message
    assert "try again later" in message
    assert len(model.requests) == 4
    assert model.pending == 0


async def test_a_503_then_success_is_retried(model: ScriptedModel) -> None:
    model.fail(503, "loading model")
    model.reply("ready")

    completion = await stream_completion(MESSAGES, config_for(model), lambda _: None)

    assert completion.text == "ready"


async def test_a_refused_key_from_the_settings_is_not_retried_and_says_which_key(model: ScriptedModel) -> None:
    model.api_key = "sk-the-right-one"

    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model, api_key=SECRET_KEY), lambda _: None)

    message = caught.value.message
    assert caught.value.kind == errors.AUTH
    assert f"{model.base_url} refused the API key from interpreter.apiKey" in message
    assert "Incorrect API key provided" in message
    assert len(model.requests) == 1


async def test_a_refused_key_from_the_environment_names_the_variable(
    model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    model.api_key = "sk-the-right-one"

    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model), lambda _: None)

    assert caught.value.kind == errors.AUTH
    assert "refused the API key from OPENAI_API_KEY" in caught.value.message
    assert model.request_headers[0]["authorization"] == f"Bearer {SECRET_KEY}"  # litellm's own rule, unchanged
    assert SECRET_KEY not in caught.value.message


async def test_a_cloud_provider_refusing_the_key_names_the_variable_and_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    litellm = await get_litellm()
    from interpreter_lsp.llm.failures import classify, describe

    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET_KEY)
    refused = _http_error(litellm.AuthenticationError, 401, "invalid x-api-key", "anthropic")
    config = ModelConfig(model="anthropic/claude-sonnet-4-5")

    failure = classify(refused, litellm, opened=False)
    message = describe(failure, config, "anthropic", 0)

    assert failure.kind == errors.AUTH and not failure.retryable
    assert "rejected the API key from ANTHROPIC_API_KEY" in message and "interpreter.apiKey" in message


def _http_error(cls: type[Exception], status: int, text: str, provider: str) -> Exception:
    """A litellm error as litellm raises it for an HTTP answer: with the httpx status error as its cause."""
    import httpx

    request = httpx.Request("POST", "https://api.example.invalid/v1/messages")
    response = httpx.Response(status, request=request, text=text)
    error = cls(message=text, llm_provider=provider, model="m", response=response)  # type: ignore[call-arg]
    error.__cause__ = httpx.HTTPStatusError(text, request=request, response=response)
    return error


async def test_the_api_key_never_appears_in_an_error(model: ScriptedModel) -> None:
    model.fail(401, f"Incorrect API key provided: {SECRET_KEY}. You can find your key at ...")
    model.fail(500, f"backend saw key {SECRET_KEY}", times=2)

    for _ in range(2):
        with pytest.raises(ModelError) as caught:
            await stream_completion(MESSAGES, config_for(model, max_retries=1, api_key=SECRET_KEY), lambda _: None)
        assert SECRET_KEY not in caught.value.message
        assert SECRET_KEY not in str(caught.value)
        assert "***" in caught.value.message  # one mask everywhere (safety/secrets.py)


async def test_unknown_model_lists_the_models_the_server_offers() -> None:
    with ScriptedModel(
        models=["qwen2.5-coder-7b-instruct", "nomic-embed-text", "llama-3.2-3b"], strict_models=True
    ) as m:
        with pytest.raises(ModelError) as caught:
            await stream_completion(MESSAGES, config_for(m, model="openai/qwen-coder"), lambda _: None)
        listings = m.listings

    message = caught.value.message
    assert caught.value.kind == errors.NOT_FOUND
    assert f'{m.base_url} has no model "qwen-coder"' in message
    assert "does not exist" in message  # the server's own words
    assert "It offers: qwen2.5-coder-7b-instruct, nomic-embed-text, llama-3.2-3b." in message
    assert '"openai/qwen2.5-coder-7b-instruct"' in message and "interpreter.model" in message
    assert len(m.requests) == 1 and listings == 1  # not retried; listed once


async def test_a_long_model_list_is_cut_short() -> None:
    names = [f"model-{i:02d}" for i in range(35)]
    with ScriptedModel(models=names, strict_models=True) as m:
        with pytest.raises(ModelError) as caught:
            await stream_completion(MESSAGES, config_for(m, model="openai/missing"), lambda _: None)

    assert "model-19 (and 15 more)." in caught.value.message
    assert "model-20" not in caught.value.message


async def test_a_server_with_no_models_says_to_load_one() -> None:
    with ScriptedModel(models=[], strict_models=True) as m:
        with pytest.raises(ModelError) as caught:
            await stream_completion(MESSAGES, config_for(m, model="openai/anything"), lambda _: None)

    assert "It offers no models: load a model in the server" in caught.value.message


async def test_unknown_ollama_model_lists_its_tags_and_says_how_to_pull() -> None:
    with ScriptedModel(models=["llama3.2:latest", "qwen2.5-coder:7b"], strict_models=True) as m:
        config = ModelConfig(model="ollama_chat/mistral:7b", api_base=m.root_url, max_retries=2)
        with pytest.raises(ModelError) as caught:
            await stream_completion(MESSAGES, config, lambda _: None)
        listings = m.listings

    message = caught.value.message
    assert caught.value.kind == errors.NOT_FOUND
    assert 'has no model "mistral:7b"' in message and "try pulling it first" in message
    assert "It offers: llama3.2:latest, qwen2.5-coder:7b." in message
    assert '"ollama_chat/llama3.2:latest"' in message and "`ollama pull mistral:7b`" in message
    assert len(m.requests) == 1 and listings == 1


async def test_an_unanswered_listing_still_gives_a_message_in_time(model: ScriptedModel) -> None:
    model.fail(404, "Unexpected endpoint or method.")
    model.lists_models = False  # as a server whose base path is wrong: the listing 404s as well

    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model, api_base=model.root_url), lambda _: None)

    # Not blamed on the model: the URL answers, but not as an OpenAI-compatible server does (issue 22).
    message = caught.value.message
    assert caught.value.kind == errors.NOT_COMPATIBLE
    assert f"{model.root_url} is not an OpenAI-compatible endpoint" in message
    assert "HTTP 404 (Unexpected endpoint or method.)" in message and "ends in /v1" in message
    assert "has no model" not in message
    assert len(model.requests) == 1  # a client error is not retried
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("status", [501, 405, 415])
async def test_a_client_error_or_501_is_not_retried(model: ScriptedModel, status: int) -> None:
    model.fail(status, "Not Implemented", times=4)  # a wrong service behind apiBase: every path answers so

    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model, api_base=model.root_url), lambda _: None)

    assert len(model.requests) == 1, "the same request would get the same answer: never retried"
    message = caught.value.message
    assert "retried 3 times" not in message
    if status == 501:
        assert caught.value.kind == errors.NOT_COMPATIBLE
        assert f"{model.root_url} is not an OpenAI-compatible endpoint" in message and "interpreter.apiBase" in message


@pytest.mark.parametrize("status", [408, 409])
async def test_a_timeout_or_conflict_is_retried(model: ScriptedModel, status: int) -> None:
    model.fail(status, "try again")
    model.reply("after the retry")

    got = await stream_completion(MESSAGES, config_for(model, backoff_base=0.01), lambda _: None)

    assert got.text == "after the retry" and len(model.requests) == 2


async def test_context_window_exceeded_in_openais_words(model: ScriptedModel) -> None:
    model.context_exceeded(limit=8192, requested=9000)

    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model), lambda _: None)

    assert caught.value.kind == errors.CONTEXT_WINDOW
    assert "context window" in caught.value.message and "interpreter.reset" in caught.value.message
    assert "maximum context length is 8192 tokens" in caught.value.message
    assert len(model.requests) == 1


async def test_context_window_exceeded_in_llama_cpps_words(model: ScriptedModel) -> None:
    model.fail(
        400, "the request exceeds the available context size, try increasing it", code="exceed_context_size_error"
    )

    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model), lambda _: None)

    assert caught.value.kind == errors.CONTEXT_WINDOW
    assert len(model.requests) == 1


async def test_malformed_stream_is_an_error_after_the_text_so_far(model: ScriptedModel) -> None:
    model.malformed("Partial answer")
    deltas: list[str] = []

    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model), deltas.append)

    assert caught.value.kind == errors.MALFORMED
    assert "malformed stream" in caught.value.message and model.base_url in caught.value.message
    assert "".join(deltas) == "Partial answer"
    assert len(model.requests) == 1  # text was shown: never retried


async def test_a_failure_after_text_was_shown_is_not_retried(model: ScriptedModel) -> None:
    model.stall("Half of an ans")
    model.reply("a second, duplicated answer")
    deltas: list[str] = []

    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model, stall_timeout=0.3), deltas.append)

    assert caught.value.kind == errors.STALLED
    assert "".join(deltas) == "Half of an ans"
    assert len(model.requests) == 1 and model.pending == 1


async def test_stalled_stream_fails_within_the_stall_timeout(model: ScriptedModel) -> None:
    stalled = model.stall("Working on it")

    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model, stall_timeout=0.4), lambda _: None)
    elapsed = time.monotonic() - started

    assert caught.value.kind == errors.STALLED
    assert "0.4 s" in caught.value.message and "try again" in caught.value.message
    assert 0.35 <= elapsed < 2.5
    assert await stalled.wait_disconnected(30)  # and the connection was closed, not leaked


async def test_first_token_timeout(model: ScriptedModel) -> None:
    held = model.hold()

    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model, first_token_timeout=0.5), lambda _: None)
    elapsed = time.monotonic() - started

    assert caught.value.kind == errors.FIRST_TOKEN_TIMEOUT
    assert "sent nothing for 0.5 s" in caught.value.message
    assert 0.45 <= elapsed < 2.5
    assert await held.wait_disconnected(30)


async def test_nothing_listening_names_host_and_port_and_is_not_retried() -> None:
    port = closed_port()
    base = f"http://127.0.0.1:{port}/v1"
    config = ModelConfig(model="openai/scripted", api_base=base, max_retries=3, backoff_base=2.0)

    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config, lambda _: None)

    message = caught.value.message
    assert caught.value.kind == errors.NOT_LISTENING
    assert f"Nothing is listening on 127.0.0.1:{port} ({base})" in message
    assert f"llama-server -m <model>.gguf --port {port}" in message and "interpreter.apiBase" in message
    assert "retried" not in message
    assert time.monotonic() - started < 2.0  # a retry would have waited at least 1 s


async def test_a_dropped_connection_is_retried(model: ScriptedModel) -> None:
    model.drop()
    model.reply("back again")

    completion = await stream_completion(MESSAGES, config_for(model), lambda _: None)

    assert completion.text == "back again"
    assert len(model.requests) == 2


async def test_dropped_connections_until_retries_end_say_so(model: ScriptedModel) -> None:
    for _ in range(3):
        model.drop()

    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model, max_retries=2), lambda _: None)

    assert caught.value.kind == errors.CONNECTION
    assert f"Cannot reach {model.base_url}" in caught.value.message and "retried 2 times" in caught.value.message
    assert len(model.requests) == 3


async def test_cancelling_mid_stream_closes_the_connection(model: ScriptedModel) -> None:
    model.reply("first words ", chunk_size=50)
    held = model.hold("never shown")
    config = config_for(model)
    await stream_completion(MESSAGES, config, lambda _: None)  # a warm connection, as in a real chat
    deltas: list[str] = []

    task = asyncio.create_task(stream_completion(MESSAGES, config, deltas.append))
    assert await asyncio.to_thread(held.received.wait, 60)
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)
    assert await held.wait_disconnected(30)
    assert deltas == []


async def test_cancelling_while_text_streams_stops_the_text(model: ScriptedModel) -> None:
    streaming = model.reply("x" * 400, chunk_size=1, delay=0.01)
    deltas: list[str] = []
    first = asyncio.Event()

    def on_delta(text: str) -> None:
        deltas.append(text)
        first.set()

    task = asyncio.create_task(stream_completion(MESSAGES, config_for(model), on_delta))
    await asyncio.wait_for(first.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)
    shown = len(deltas)

    assert await streaming.wait_disconnected(30)
    assert shown < 400
    assert len(deltas) == shown  # nothing more after the cancel


async def test_a_held_stream_released_streams_normally(model: ScriptedModel) -> None:
    held = model.hold("after the wait")
    task = asyncio.create_task(stream_completion(MESSAGES, config_for(model), lambda _: None))
    assert await asyncio.to_thread(held.received.wait, 60)
    held.release()

    completion = await asyncio.wait_for(task, 60)

    assert completion.text == "after the wait"
    assert not held.disconnected.is_set()


WARM_UP_CHILD = r"""
import asyncio, json, logging, os, socket, sys, time
import interpreter_lsp.llm as llm

imported_early = "litellm" in sys.modules
started = time.perf_counter()
llm.start_warm_up()
llm.start_warm_up()  # idempotent
start_call = time.perf_counter() - started

async def main():
    gaps = []
    async def heartbeat():
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now
    beat = asyncio.create_task(heartbeat())
    t0 = time.perf_counter()
    waiter = asyncio.create_task(llm.get_litellm())
    await asyncio.sleep(0.05)
    waiter.cancel()  # one impatient caller must not spoil the import for the others
    litellm = await llm.get_litellm()
    import_wait = time.perf_counter() - t0
    beat.cancel()
    logger = logging.getLogger("LiteLLM")
    logger.setLevel(logging.DEBUG)
    for handler in logger.handlers:
        handler.setLevel(logging.DEBUG)
    logger.debug("debug record"); logger.info("info record"); logger.warning("warning record")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0)); port = sock.getsockname()[1]
    try:
        await litellm.acompletion(model="openai/x", api_base=f"http://127.0.0.1:{port}/v1", api_key="x",
                                  messages=[{"role": "user", "content": "hi"}], num_retries=0, max_retries=0)
    except Exception:
        pass
    print("RESULT " + json.dumps({
        "imported_early": imported_early, "start_call": start_call, "import_wait": import_wait,
        "max_gap": max(gaps), "cost_map_env": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"),
        "same_module": litellm is sys.modules["litellm"],
    }), file=sys.stderr)

asyncio.run(main())
"""


@pytest.mark.slow
def test_warm_up_imports_off_the_loop_and_nothing_reaches_stdout(tmp_path: Path) -> None:
    env = {**os.environ, "LITELLM_LOG": "DEBUG", "PYTHONPATH": str(SERVER_DIR)}
    env.pop("LITELLM_LOCAL_MODEL_COST_MAP", None)

    child = subprocess.run(
        [sys.executable, "-c", WARM_UP_CHILD], capture_output=True, env=env, cwd=tmp_path, timeout=120
    )

    assert child.returncode == 0, child.stderr.decode()[-3000:]
    assert child.stdout == b""  # stdout is the LSP wire: not one byte from litellm, at any log level
    result = json.loads(child.stderr.decode().rsplit("RESULT ", 1)[1].splitlines()[0])
    assert result["imported_early"] is False  # importing the package does not import litellm
    assert result["start_call"] < 0.5  # start_warm_up returns at once (a thread start, even on a busy machine)
    # The event loop kept running during the import: a blocked loop would show one gap as long as the whole
    # import; on a busy machine a gap of a second is scheduling, not blocking.
    assert result["max_gap"] < max(1.0, 0.5 * result["import_wait"]), result
    assert result["cost_map_env"] == "True"  # the offline cost map: no GET to GitHub at import
    assert result["same_module"] is True


async def test_an_error_in_on_delta_is_the_callers_and_passes_through(model: ScriptedModel) -> None:
    model.reply("some text")

    def broken(_: str) -> None:
        raise KeyError("caller bug")

    with pytest.raises(KeyError, match="caller bug"):
        await stream_completion(MESSAGES, config_for(model), broken)
    assert len(model.requests) == 1


async def test_ollama_not_running_says_how_to_start_it() -> None:
    port = closed_port()
    base = f"http://127.0.0.1:{port}"
    config = ModelConfig(model="ollama_chat/qwen2.5-coder", api_base=base, max_retries=3, backoff_base=2.0)

    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config, lambda _: None)

    message = caught.value.message
    assert caught.value.kind == errors.NOT_LISTENING
    assert f"Nothing is listening on 127.0.0.1:{port}" in message and "`ollama serve`" in message
    assert "network" not in message and "SSLContext" not in message
    assert time.monotonic() - started < 2.0


async def test_ollama_keyless_streams_through_its_own_api() -> None:
    with ScriptedModel(models=["qwen2.5-coder:7b"], strict_models=True) as m:
        m.reply("from ollama", usage=(11, 3))
        config = ModelConfig(model="ollama_chat/qwen2.5-coder:7b", api_base=m.root_url)

        completion = await stream_completion(MESSAGES, config, lambda _: None)

    assert completion.text == "from ollama"
    assert (completion.prompt_tokens, completion.completion_tokens) == (11, 3)
    assert "authorization" not in m.request_headers[0]


async def test_keyless_openai_compatible_endpoint_gets_the_placeholder(model: ScriptedModel) -> None:
    model.reply("no key needed")

    completion = await stream_completion(MESSAGES, config_for(model), lambda _: None)

    assert completion.text == "no key needed"
    assert model.request_headers[0]["authorization"] == f"Bearer {PLACEHOLDER_KEY}"


async def test_a_key_from_the_settings_is_sent_instead_of_the_placeholder(model: ScriptedModel) -> None:
    model.api_key = SECRET_KEY
    model.reply("keyed")

    completion = await stream_completion(MESSAGES, config_for(model, api_key=SECRET_KEY), lambda _: None)

    assert completion.text == "keyed"
    assert model.request_headers[0]["authorization"] == f"Bearer {SECRET_KEY}"


async def test_a_server_that_needs_a_key_says_to_set_one(model: ScriptedModel) -> None:
    model.api_key = "sk-vllm-started-with-this"
    model.reply("never sent")

    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model), lambda _: None)

    message = caught.value.message
    assert caught.value.kind == errors.AUTH
    assert f"{model.base_url} requires an API key for openai/scripted, and none is set" in message
    assert "interpreter.apiKey" in message and "--api-key" in message
    assert "server failed" not in message and "try again later" not in message
    assert len(model.requests) == 1 and model.pending == 1


@pytest.mark.parametrize("name", ["qwen2.5-coder", "qwen/qwen2.5-coder-7b"])
async def test_a_model_name_without_provider_is_not_sent_and_shows_the_forms(model: ScriptedModel, name: str) -> None:
    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model, model=name), lambda _: None)

    message = caught.value.message
    assert caught.value.kind == errors.NO_PROVIDER
    assert f'"openai/{name}" with interpreter.apiBase set to {model.base_url}' in message
    assert f'"ollama_chat/{name}"' in message and '"anthropic/claude-sonnet-4-5"' in message
    assert "nothing was sent" in message and "rejected" not in message
    if "/" in name:
        assert '("qwen" is not a provider litellm knows)' in message
    assert model.requests == []


@pytest.mark.parametrize(
    ("name", "variable"), [("gpt-4o-mini", "OPENAI_API_KEY"), ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY")]
)
async def test_a_cloud_model_without_a_key_is_not_sent_nor_retried(name: str, variable: str) -> None:
    config = ModelConfig(model=name, max_retries=3, backoff_base=2.0)

    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config, lambda _: None)

    message = caught.value.message
    assert caught.value.kind == errors.MISSING_KEY
    assert f"No API key is set for {name}, so nothing was sent: set {variable}" in message
    assert "interpreter.apiKey" in message and '"openai/<name>" with interpreter.apiBase' in message
    assert "server" not in message.split(":")[0] and "try again later" not in message
    assert time.monotonic() - started < 1.5


async def test_rate_limit_message_says_what_the_server_asked(model: ScriptedModel) -> None:
    model.fail(429, "Rate limit reached", retry_after=0.1, times=2)

    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model, max_retries=1), lambda _: None)

    message = caught.value.message
    assert caught.value.kind == errors.RATE_LIMITED
    assert f"{model.base_url} is rate limiting requests for openai/scripted (HTTP 429, asking to wait 0.1 s)" in message
    assert "retried 1 time:" in message


async def test_cost_comes_from_the_offline_cost_map_for_a_priced_model(model: ScriptedModel) -> None:
    litellm = await get_litellm()
    prices = litellm.model_cost["gpt-4o-mini"]
    model.reply("priced", usage=(1000, 500))

    completion = await stream_completion(MESSAGES, config_for(model, model="openai/gpt-4o-mini"), lambda _: None)

    expected = 1000 * prices["input_cost_per_token"] + 500 * prices["output_cost_per_token"]
    assert completion.cost == pytest.approx(expected)
    assert completion.cost > 0
    # The model's entry is read once; every later reply's cost is known at once (no thread hop).
    from interpreter_lsp.llm import prices as direct_prices
    from interpreter_lsp.llm import routes

    route = routes.route(config_for(model, model="openai/gpt-4o-mini"))
    assert route is not None and not route.local
    assert direct_prices.cost_known(route, 1000, 500) == pytest.approx(expected)
    model.reply("priced again", usage=(2000, 10))
    again = await stream_completion(MESSAGES, config_for(model, model="openai/gpt-4o-mini"), lambda _: None)
    assert again.cost == pytest.approx(2000 * prices["input_cost_per_token"] + 10 * prices["output_cost_per_token"])
    unread = dataclasses.replace(route, model="a-model-never-priced")
    assert direct_prices.cost_known(unread, 1, 1) is None  # not read yet: the caller reads it off the loop


async def test_a_host_that_does_not_resolve_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    base = "http://model-server.invalid/v1"  # .invalid never resolves (RFC 6761)
    config = ModelConfig(model="openai/qwen", api_base=base, max_retries=5, backoff_base=2.0, connect_timeout=5)

    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config, lambda _: None)

    assert caught.value.kind == errors.CONNECTION
    assert f"Cannot reach {base} (the host name could not be resolved)" in caught.value.message
    assert "retried" not in caught.value.message
    assert time.monotonic() - started < 15  # five retries would wait over 30 s


async def test_tool_calls_stream_through_litellm_each_delivered_when_complete(model: ScriptedModel) -> None:
    from interpreter_lsp.agent.runtool import tools
    from interpreter_lsp.llm.toolstream import ToolCall
    from scripted_model import run_code

    code = "for i in range(3):\n    print(f\"{i}: {'x' * i}\")"
    model.tool_calls([run_code(code, call_id="c1"), run_code("ls -l", "shell", call_id="c2")], "Looking.", chunk_size=4)
    deltas: list[str] = []
    calls: list[tuple[ToolCall, str]] = []
    offered = tools(["python", "shell"])
    history = [
        *MESSAGES,
        {"role": "assistant", "content": None, "tool_calls": [ToolCall("c0", "run_code", '{"code": "1"}').wire()]},
        {"role": "tool", "tool_call_id": "c0", "content": "Output of the python code (ok): 1"},
    ]

    completion = await stream_completion(
        history,
        config_for(model, model="openai/gpt-4o"),
        deltas.append,
        tools=offered,
        on_tool_call=lambda call: calls.append((call, "".join(deltas))),
    )

    expected = [
        ToolCall("c1", "run_code", json.dumps({"language": "python", "code": code})),
        ToolCall("c2", "run_code", json.dumps({"language": "shell", "code": "ls -l"})),
    ]
    assert [call for call, _ in calls] == expected == list(completion.tool_calls)
    assert all(text == "Looking." for _, text in calls)  # the text came first, then each call whole
    assert completion.text == "Looking."
    sent = model.requests[0]
    assert sent["tools"] == offered
    # The earlier call and its answer, as the OpenAI format has them (a null content is left out).
    assert sent["messages"][2:] == [{k: v for k, v in m.items() if v is not None} for m in history[2:]]
