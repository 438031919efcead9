"""stream_completion through real litellm over real HTTP to the scripted model: what a user would see."""

from __future__ import annotations

import asyncio
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
from interpreter_lsp.llm.errors import ModelError
from interpreter_lsp.llm.loader import get_litellm
from scripted_model import ScriptedModel

MESSAGES = [{"role": "system", "content": "You run code."}, {"role": "user", "content": "say hello"}]
SECRET_KEY = "sk-test-4f9d2c7a1b8e6f30"
SERVER_DIR = Path(__file__).resolve().parent.parent / "server"


@pytest.fixture(autouse=True)
async def litellm_loaded() -> None:
    """Import litellm before a test starts its clock (the first import takes seconds)."""
    await asyncio.wait_for(get_litellm(), 60)


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as scripted:
        yield scripted


def config_for(scripted: ScriptedModel, **overrides: object) -> ModelConfig:
    settings: dict[str, object] = {
        "model": "openai/scripted",
        "api_base": scripted.base_url,
        "api_key": SECRET_KEY,
        "backoff_base": 0.05,
    }
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


async def test_usage_is_counted_when_the_server_sends_none(model: ScriptedModel) -> None:
    model.reply("one two three four five six seven eight")

    completion = await stream_completion(MESSAGES, config_for(model), lambda _: None)

    assert completion.prompt_tokens > 0
    assert completion.completion_tokens > 0


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


async def test_auth_failure_is_not_retried_and_names_the_variable(model: ScriptedModel) -> None:
    model.fail(401, "Incorrect API key provided")

    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model), lambda _: None)

    assert caught.value.kind == errors.AUTH
    assert "OPENAI_API_KEY" in caught.value.message and "interpreter.apiKey" in caught.value.message
    assert len(model.requests) == 1


async def test_the_api_key_never_appears_in_an_error(model: ScriptedModel) -> None:
    model.fail(401, f"Incorrect API key provided: {SECRET_KEY}. You can find your key at ...")
    model.fail(500, f"backend saw key {SECRET_KEY}", times=2)

    for _ in range(2):
        with pytest.raises(ModelError) as caught:
            await stream_completion(MESSAGES, config_for(model, max_retries=1), lambda _: None)
        assert SECRET_KEY not in caught.value.message
        assert SECRET_KEY not in str(caught.value)
        assert "[redacted]" in caught.value.message


async def test_unknown_model_is_reported_with_what_to_check(model: ScriptedModel) -> None:
    model.fail(404, "The model `scripted` does not exist")

    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model), lambda _: None)

    assert caught.value.kind == errors.NOT_FOUND
    assert "openai/scripted" in caught.value.message and "interpreter.model" in caught.value.message


async def test_context_window_exceeded(model: ScriptedModel) -> None:
    model.fail(400, "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens")

    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model), lambda _: None)

    assert caught.value.kind == errors.CONTEXT_WINDOW
    assert "context window" in caught.value.message and "interpreter.reset" in caught.value.message
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
    assert await stalled.wait_disconnected(5)  # and the connection was closed, not leaked


async def test_first_token_timeout(model: ScriptedModel) -> None:
    held = model.hold()

    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model, first_token_timeout=0.5), lambda _: None)
    elapsed = time.monotonic() - started

    assert caught.value.kind == errors.FIRST_TOKEN_TIMEOUT
    assert "sent nothing for 0.5 s" in caught.value.message
    assert 0.45 <= elapsed < 2.5
    assert await held.wait_disconnected(5)


async def test_connection_refused_names_the_url() -> None:
    base = f"http://127.0.0.1:{closed_port()}/v1"
    config = ModelConfig(model="openai/scripted", api_base=base, api_key="x", max_retries=1, backoff_base=0.05)

    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config, lambda _: None)

    assert caught.value.kind == errors.CONNECTION
    assert f"Cannot reach {base}: is the server running?" in caught.value.message


async def test_connection_refused_is_retried_a_bounded_number_of_times() -> None:
    base = f"http://127.0.0.1:{closed_port()}/v1"
    config = ModelConfig(model="openai/scripted", api_base=base, api_key="x", max_retries=2, backoff_base=0.05)

    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config, lambda _: None)

    assert "retried 2 times" in caught.value.message
    assert time.monotonic() - started < 3.0


async def test_cancelling_mid_stream_closes_the_connection(model: ScriptedModel) -> None:
    model.reply("first words ", chunk_size=50)
    held = model.hold("never shown")
    config = config_for(model)
    await stream_completion(MESSAGES, config, lambda _: None)  # a warm connection, as in a real chat
    deltas: list[str] = []

    task = asyncio.create_task(stream_completion(MESSAGES, config, deltas.append))
    assert await asyncio.to_thread(held.received.wait, 10)
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert await held.wait_disconnected(5)
    assert deltas == []


async def test_cancelling_while_text_streams_stops_the_text(model: ScriptedModel) -> None:
    streaming = model.reply("x" * 400, chunk_size=1, delay=0.01)
    deltas: list[str] = []
    first = asyncio.Event()

    def on_delta(text: str) -> None:
        deltas.append(text)
        first.set()

    task = asyncio.create_task(stream_completion(MESSAGES, config_for(model), on_delta))
    await asyncio.wait_for(first.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    shown = len(deltas)

    assert await streaming.wait_disconnected(5)
    assert shown < 400
    assert len(deltas) == shown  # nothing more after the cancel


async def test_a_held_stream_released_streams_normally(model: ScriptedModel) -> None:
    held = model.hold("after the wait")
    task = asyncio.create_task(stream_completion(MESSAGES, config_for(model), lambda _: None))
    assert await asyncio.to_thread(held.received.wait, 10)
    held.release()

    completion = await asyncio.wait_for(task, 10)

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
    assert result["start_call"] < 0.05  # start_warm_up returns at once
    assert result["max_gap"] < 1.0  # the event loop kept running during the import
    assert result["cost_map_env"] == "True"  # the offline cost map: no GET to GitHub at import
    assert result["same_module"] is True


async def test_an_error_in_on_delta_is_the_callers_and_passes_through(model: ScriptedModel) -> None:
    model.reply("some text")

    def broken(_: str) -> None:
        raise KeyError("caller bug")

    with pytest.raises(KeyError, match="caller bug"):
        await stream_completion(MESSAGES, config_for(model), broken)
    assert len(model.requests) == 1


async def test_ollama_connection_refused_names_the_url() -> None:
    base = f"http://127.0.0.1:{closed_port()}"
    config = ModelConfig(model="ollama_chat/qwen2.5-coder", api_base=base, max_retries=0)

    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config, lambda _: None)

    assert caught.value.kind == errors.CONNECTION
    assert f"Cannot reach {base}: is the server running?" in caught.value.message


async def test_cost_comes_from_the_offline_cost_map_for_a_priced_model(model: ScriptedModel) -> None:
    litellm = await get_litellm()
    prices = litellm.model_cost["gpt-4o-mini"]
    model.reply("priced", usage=(1000, 500))

    completion = await stream_completion(MESSAGES, config_for(model, model="openai/gpt-4o-mini"), lambda _: None)

    expected = 1000 * prices["input_cost_per_token"] + 500 * prices["output_cost_per_token"]
    assert completion.cost == pytest.approx(expected)
    assert completion.cost > 0
