"""The scripted model itself, reached as the product reaches models: real litellm over real HTTP."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from interpreter_lsp.llm import errors
from interpreter_lsp.llm.client import ModelConfig, stream_completion
from interpreter_lsp.llm.errors import ModelError
from interpreter_lsp.llm.loader import get_litellm
from scripted_model import NO_REPLY_QUEUED, ScriptedModel

MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as scripted:
        yield scripted


def config(model: ScriptedModel) -> ModelConfig:
    return ModelConfig(model="openai/scripted", api_base=model.base_url, api_key="any", max_retries=0)


async def test_replies_are_served_in_order_and_requests_recorded(model: ScriptedModel) -> None:
    model.reply("first")
    model.reply("second", chunk_size=1)

    one = await stream_completion(MESSAGES, config(model), lambda _: None)
    deltas: list[str] = []
    two = await stream_completion([*MESSAGES, {"role": "assistant", "content": "first"}], config(model), deltas.append)

    assert (one.text, two.text) == ("first", "second")
    assert deltas == list("second")
    assert [r["messages"][-1]["content"] for r in model.wait_requests(2)] == ["hello", "first"]
    assert model.base_url.startswith("http://127.0.0.1:") and model.base_url.endswith("/v1")


async def test_usage_chunk_is_sent_when_asked(model: ScriptedModel) -> None:
    model.reply("counted", usage=(123, 4))

    completion = await stream_completion(MESSAGES, config(model), lambda _: None)

    assert (completion.prompt_tokens, completion.completion_tokens) == (123, 4)


async def test_an_empty_script_fails_loudly(model: ScriptedModel) -> None:
    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config(model), lambda _: None)

    assert caught.value.kind == errors.SERVER
    assert NO_REPLY_QUEUED in caught.value.message


async def test_non_streaming_requests_get_the_reply(model: ScriptedModel) -> None:
    litellm = await get_litellm()
    model.reply("whole answer", usage=(5, 2))

    response = await litellm.acompletion(
        model="openai/scripted", api_base=model.base_url, api_key="any", messages=MESSAGES, max_retries=0
    )

    assert response.choices[0].message.content == "whole answer"
    assert response.usage.prompt_tokens == 5


def test_works_from_a_sync_test_with_sync_litellm(model: ScriptedModel) -> None:
    litellm = asyncio.run(get_litellm())
    model.reply("sync works")

    chunks = litellm.completion(
        model="openai/scripted", api_base=model.base_url, api_key="any", messages=MESSAGES, stream=True
    )

    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "sync works"


async def test_models_are_listed(model: ScriptedModel) -> None:
    async with httpx.AsyncClient(trust_env=False) as client:
        listed = (await client.get(f"{model.base_url}/models")).json()

    assert [m["id"] for m in listed["data"]] == ["scripted"]


async def test_failures_carry_status_and_retry_after(model: ScriptedModel) -> None:
    model.fail(429, "slow down", retry_after=2)
    async with httpx.AsyncClient(trust_env=False) as client:
        response = await client.post(f"{model.base_url}/chat/completions", json={"messages": MESSAGES})

    assert response.status_code == 429
    assert response.headers["retry-after"] == "2"
    assert response.json()["error"]["message"] == "slow down"


async def test_hold_then_release(model: ScriptedModel) -> None:
    held = model.hold("let go")
    task = asyncio.create_task(stream_completion(MESSAGES, config(model), lambda _: None))
    assert await asyncio.to_thread(held.received.wait, 60)
    assert not task.done()

    held.release()

    assert (await asyncio.wait_for(task, 60)).text == "let go"
    assert held.finished.wait(5) and not held.disconnected.is_set()


def test_wait_requests_is_bounded(model: ScriptedModel) -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        model.wait_requests(1, timeout=0.2)
    assert time.monotonic() - started < 2


def test_stop_ends_a_stalled_stream_promptly() -> None:
    model = ScriptedModel()
    model.start()
    stalled = model.stall("waiting")
    litellm = asyncio.run(get_litellm())
    failure: list[BaseException] = []

    def client() -> None:
        try:
            for _ in litellm.completion(
                model="openai/scripted", api_base=model.base_url, api_key="any", messages=MESSAGES,
                stream=True, max_retries=0, timeout=30,
            ):  # fmt: skip
                pass
        except Exception as exc:
            failure.append(exc)

    reader = threading.Thread(target=client, daemon=True)
    reader.start()
    assert stalled.received.wait(10)
    started = time.monotonic()
    model.stop()
    reader.join(10)

    assert time.monotonic() - started < 5
    assert not reader.is_alive()


async def test_a_required_key_is_checked_before_the_script() -> None:
    with ScriptedModel(api_key="sk-right") as m:
        m.reply("for the right key only")
        async with httpx.AsyncClient(trust_env=False) as client:
            url = f"{m.base_url}/chat/completions"
            missing = await client.post(url, json={"model": "scripted", "messages": MESSAGES})
            wrong = await client.post(url, json={"messages": MESSAGES}, headers={"Authorization": "Bearer sk-wrong"})
            pending_after_refusals = m.pending
            right = await client.post(url, json={"messages": MESSAGES}, headers={"Authorization": "Bearer sk-right"})

    assert (missing.status_code, wrong.status_code, right.status_code) == (401, 401, 200)
    assert "didn't provide an API key" in missing.json()["error"]["message"]
    assert wrong.json()["error"]["code"] == "invalid_api_key"
    assert pending_after_refusals == 1  # refusals consumed nothing
    assert right.json()["choices"][0]["message"]["content"] == "for the right key only"
    assert [h.get("authorization") for h in m.request_headers] == [None, "Bearer sk-wrong", "Bearer sk-right"]


async def test_models_are_listed_the_openai_way_and_the_ollama_way() -> None:
    with ScriptedModel(models=["a:7b", "b"]) as m:
        async with httpx.AsyncClient(trust_env=False) as client:
            openai_list = (await client.get(f"{m.base_url}/models")).json()
            tags = (await client.get(f"{m.root_url}/api/tags")).json()
            m.lists_models = False
            unlisted = await client.get(f"{m.base_url}/models")

    assert [item["id"] for item in openai_list["data"]] == ["a:7b", "b"]
    assert [item["name"] for item in tags["models"]] == ["a:7b", "b"]
    assert unlisted.status_code == 404
    assert m.listings == 3


async def test_strict_models_answer_404_in_each_servers_words() -> None:
    with ScriptedModel(strict_models=True) as m:
        async with httpx.AsyncClient(trust_env=False) as client:
            openai = await client.post(f"{m.base_url}/chat/completions", json={"model": "gpt-x", "messages": MESSAGES})
            ollama = await client.post(f"{m.root_url}/api/chat", json={"model": "llama9", "messages": MESSAGES})

    assert openai.status_code == 404 and openai.json()["error"]["code"] == "model_not_found"
    assert "The model `gpt-x` does not exist" in openai.json()["error"]["message"]
    assert ollama.status_code == 404 and ollama.json() == {"error": 'model "llama9" not found, try pulling it first'}


async def test_context_exceeded_is_openais_400(model: ScriptedModel) -> None:
    model.context_exceeded(limit=4096, requested=5000)
    async with httpx.AsyncClient(trust_env=False) as client:
        response = await client.post(f"{model.base_url}/chat/completions", json={"messages": MESSAGES})

    error = response.json()["error"]
    assert response.status_code == 400 and error["code"] == "context_length_exceeded"
    assert error["message"].startswith("This model's maximum context length is 4096 tokens. However, your messages")


async def test_ollamas_chat_api_streams_ndjson(model: ScriptedModel) -> None:
    model.reply("one two", chunk_size=4, usage=(9, 2))
    async with httpx.AsyncClient(trust_env=False) as client:
        response = await client.post(f"{model.root_url}/api/chat", json={"model": "scripted", "messages": MESSAGES})

    lines = [json.loads(line) for line in response.text.splitlines()]
    assert response.headers["content-type"] == "application/x-ndjson"
    assert "".join(line["message"]["content"] for line in lines) == "one two"
    assert [line["done"] for line in lines] == [False, False, True]
    assert (lines[-1]["prompt_eval_count"], lines[-1]["eval_count"]) == (9, 2)


async def test_drop_closes_the_connection_without_an_answer(model: ScriptedModel) -> None:
    dropped = model.drop()
    async with httpx.AsyncClient(trust_env=False) as client:
        with pytest.raises(httpx.TransportError):
            await client.post(f"{model.base_url}/chat/completions", json={"messages": MESSAGES})

    assert dropped.received.is_set() and dropped.disconnected.is_set()
