"""The three wire formats the server speaks itself (llm/routes.py, wire.py, direct.py), end to end over real
HTTP against the scripted model: OpenAI-compatible chat completions, Anthropic Messages, Ollama's /api/chat.
Each case runs on all three: text, usage, tool calls, the conversation's shape on the wire, images,
retries and errors, cancellation; and none of it imports litellm.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from interpreter_lsp.llm import errors, routes
from interpreter_lsp.llm.client import ModelConfig, stream_completion
from interpreter_lsp.llm.errors import ModelError
from interpreter_lsp.llm.models import describe
from interpreter_lsp.llm.toolstream import ToolCall
from scripted_model import ScriptedModel, run_code

FORMATS = ["openai", "anthropic", "ollama"]
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


@pytest.fixture
def model() -> ScriptedModel:
    with ScriptedModel() as scripted:
        yield scripted


def config_for(model: ScriptedModel, wire: str, **overrides: object) -> ModelConfig:
    settings: dict[str, object] = {
        "openai": {"model": "openai/scripted", "api_base": model.base_url},
        "anthropic": {"model": "anthropic/claude-scripted", "api_base": model.root_url, "api_key": "sk-ant-test"},
        "ollama": {"model": "ollama_chat/scripted", "api_base": model.root_url},
    }[wire]
    settings = {**settings, "backoff_base": 0.01, **overrides}
    return ModelConfig(**settings)  # type: ignore[arg-type]


@pytest.mark.parametrize("wire", FORMATS)
async def test_text_streams_in_order_with_its_usage(model: ScriptedModel, wire: str) -> None:
    model.reply("Hello there, friend.", chunk_size=4, usage=(31, 7))
    deltas: list[str] = []

    got = await stream_completion(MESSAGES, config_for(model, wire), deltas.append)

    assert len(deltas) > 1 and "".join(deltas) == got.text == "Hello there, friend."
    assert (got.prompt_tokens, got.completion_tokens) == (31, 7)
    assert got.cost == 0.0
    assert routes.route(config_for(model, wire)).wire == wire  # type: ignore[union-attr]


@pytest.mark.parametrize("wire", FORMATS)
async def test_a_conversation_s_requests_carry_every_message_as_it_is_now(model: ScriptedModel, wire: str) -> None:
    """Each message is written as JSON once across requests (wire.encode): the next request, which shares
    the earlier messages, still carries each of them as it is, with what was added or replaced since."""
    conversation = [*MESSAGES, {"role": "assistant", "content": "Olá — ça va? 你好 ✓"}]
    model.reply("one")
    await stream_completion(conversation, config_for(model, wire), lambda _d: None)
    conversation[1] = {"role": "user", "content": "hi, again"}  # replaced: a new message at the same place
    conversation[2]["content"] = "Changed in place"  # not done by the server, but seen all the same
    conversation.append({"role": "user", "content": 'quotes " and \\ and \n lines'})
    model.reply("two")
    await stream_completion(conversation, config_for(model, wire), lambda _d: None)

    first, last = (json.dumps(request, ensure_ascii=False) for request in model.requests[-2:])
    assert all(json.dumps(m["content"], ensure_ascii=False) in last for m in conversation[1:])
    assert "Olá — ça va? 你好 ✓" in first and "Olá" not in last and '"hi"' not in last


def test_a_request_body_is_the_json_of_its_fields_in_their_order() -> None:
    from interpreter_lsp.llm import wire

    shared = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": []}]
    body = {"model": "m", "messages": shared, "stream": True, "temperature": 0.5}
    for _ in range(2):
        encoded = wire.encode(body)
        assert json.loads(encoded) == body
        assert list(json.loads(encoded)) == ["model", "messages", "stream", "temperature"]
    assert json.loads(wire.encode({"model": "m", "stream": True})) == {"model": "m", "stream": True}
    with pytest.raises(ValueError):
        wire.encode({"messages": [{"role": "user", "content": "x"}], "temperature": float("nan")})


@pytest.mark.parametrize("wire", FORMATS)
async def test_tool_calls_arrive_whole_and_in_order(model: ScriptedModel, wire: str) -> None:
    model.tool_calls([run_code("print(1)", call_id="c1"), run_code("ls", "shell", call_id="c2")], "Looking.")
    calls: list[ToolCall] = []
    tools = [{"type": "function", "function": {"name": "run_code", "description": "Run code.",
                                               "parameters": {"type": "object"}}}]  # fmt: skip

    got = await stream_completion(MESSAGES, config_for(model, wire), lambda _d: None, tools=tools,
                                  on_tool_call=calls.append)  # fmt: skip

    assert got.text == "Looking." and list(got.tool_calls) == calls and len(calls) == 2
    assert [c.name for c in calls] == ["run_code", "run_code"]
    assert [json.loads(c.arguments) for c in calls] == [
        {"language": "python", "code": "print(1)"},
        {"language": "shell", "code": "ls"},
    ]
    if wire != "ollama":  # Ollama sends no call ids: the assembler makes them
        assert [c.id for c in calls] == ["c1", "c2"]
    sent = model.requests[0]
    if wire == "anthropic":
        assert sent["tools"] == [{"name": "run_code", "description": "Run code.", "input_schema": {"type": "object"}}]
    else:
        assert sent["tools"] == tools


@pytest.mark.parametrize("wire", FORMATS)
async def test_the_conversation_takes_each_formats_shape(model: ScriptedModel, wire: str) -> None:
    call = {"id": "c0", "type": "function", "function": {"name": "run_code", "arguments": '{"code": "1"}'}}
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c0", "content": "Output of run_code (ok): 1"},
        {"role": "user", "content": [{"type": "text", "text": "and this plot?"}, image]},
    ]
    model.reply("A dot.")

    await stream_completion(history, config_for(model, wire, temperature=0.2, max_tokens=300), lambda _d: None)

    sent = model.requests[0]
    if wire == "anthropic":
        assert sent["system"] == "Be brief." and sent["max_tokens"] == 300 and sent["temperature"] == 0.2
        use = {"type": "tool_use", "id": "c0", "name": "run_code", "input": {"code": "1"}}
        answer = [
            {"type": "tool_result", "tool_use_id": "c0", "content": "Output of run_code (ok): 1"},
            {"type": "text", "text": "and this plot?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        ]
        assert sent["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "run it"}]},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": answer},
        ]
        assert model.request_headers[0]["x-api-key"] == "sk-ant-test"
        assert model.request_headers[0]["anthropic-version"]
    elif wire == "ollama":
        assert sent["options"] == {"temperature": 0.2, "num_predict": 300}
        assert sent["messages"][2]["tool_calls"] == [{"function": {"name": "run_code", "arguments": {"code": "1"}}}]
        assert sent["messages"][3] == {"role": "tool", "content": "Output of run_code (ok): 1", "tool_name": "run_code"}
        assert sent["messages"][4] == {"role": "user", "content": "and this plot?", "images": [PNG]}
    else:
        assert sent["messages"][2] == {"role": "assistant", "tool_calls": [call]}  # a null content left out
        assert sent["messages"][4] == history[4]
        assert sent["max_tokens"] == 300 and sent["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("wire", FORMATS)
async def test_a_rate_limit_is_retried_and_a_refusal_is_not(model: ScriptedModel, wire: str) -> None:
    model.fail(429, "slow down", retry_after=0)
    model.reply("after waiting")
    got = await stream_completion(MESSAGES, config_for(model, wire), lambda _d: None)
    assert got.text == "after waiting" and len(model.requests) == 2

    model.fail(400, "bad parameter", times=3)
    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model, wire), lambda _d: None)
    assert caught.value.kind == errors.BAD_REQUEST and "bad parameter" in caught.value.message
    assert len(model.requests) == 3


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_a_wrong_key_is_said_to_be_refused(wire: str) -> None:
    with ScriptedModel(api_key="the-right-one") as model:
        with pytest.raises(ModelError) as caught:
            await stream_completion(MESSAGES, config_for(model, wire, api_key="a-wrong-one"), lambda _d: None)
    assert caught.value.kind == errors.AUTH and "a-wrong-one" not in caught.value.message
    assert len(model.requests) == 1


@pytest.mark.parametrize("wire", FORMATS)
async def test_an_unknown_model_is_named(wire: str) -> None:
    with ScriptedModel(models=["other"], strict_models=True) as model:
        with pytest.raises(ModelError) as caught:
            await stream_completion(MESSAGES, config_for(model, wire), lambda _d: None)
    assert caught.value.kind == errors.NOT_FOUND
    assert "scripted" in caught.value.message and len(model.requests) == 1


@pytest.mark.parametrize("wire", FORMATS)
async def test_a_malformed_stream_is_said_to_be_one(model: ScriptedModel, wire: str) -> None:
    model.malformed("Here")
    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model, wire), lambda _d: None)
    assert caught.value.kind == errors.MALFORMED and len(model.requests) == 1


@pytest.mark.parametrize("wire", FORMATS)
async def test_cancelling_closes_the_connection(model: ScriptedModel, wire: str) -> None:
    held = model.hold("never shown")
    task = asyncio.ensure_future(stream_completion(MESSAGES, config_for(model, wire), lambda _d: None))
    assert await asyncio.to_thread(held.received.wait, 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await held.wait_disconnected(), "the server would go on generating for no one"


@pytest.mark.parametrize("wire", FORMATS)
async def test_a_stall_mid_reply_is_said_to_be_one(model: ScriptedModel, wire: str) -> None:
    model.stall("Part")
    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model, wire, stall_timeout=0.5), lambda _d: None)
    assert caught.value.kind == errors.STALLED


async def test_ollama_describes_its_model_itself(model: ScriptedModel) -> None:
    model.ollama_show = {
        "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
        "capabilities": ["completion", "tools", "vision"],
    }
    facts = await describe(config_for(model, "ollama"), 10)
    assert (facts.window, facts.function_calling, facts.vision, facts.priced) == (131072, True, True, False)
    assert facts.counter == "estimate"


async def test_a_priced_cloud_model_is_priced_from_the_map_without_litellm(model: ScriptedModel) -> None:
    facts = await describe(ModelConfig(model="gpt-4o-mini", api_key="sk-test"), 10)
    assert facts.priced and facts.input_cost > 0 and facts.window and facts.window >= 100_000
    assert facts.function_calling and facts.vision
    claude = await describe(ModelConfig(model="anthropic/claude-sonnet-4-5", api_key="sk-test"), 10)
    assert claude.priced and claude.function_calling and claude.window


def test_no_direct_path_imports_litellm(tmp_path: Path) -> None:
    """In a fresh process: a reply on each wire format, and the facts of a priced model, load no litellm."""
    script = tmp_path / "direct_only.py"
    script.write_text(
        "import asyncio, sys\n"
        "from scripted_model import ScriptedModel\n"
        "from interpreter_lsp.llm.client import ModelConfig, stream_completion\n"
        "from interpreter_lsp.llm.models import describe\n"
        "async def main():\n"
        "    with ScriptedModel() as m:\n"
        "        for cfg in (ModelConfig('openai/scripted', api_base=m.base_url),\n"
        "                    ModelConfig('anthropic/claude-x', api_base=m.root_url, api_key='k'),\n"
        "                    ModelConfig('ollama_chat/scripted', api_base=m.root_url)):\n"
        "            m.reply('ok', usage=(3, 1))\n"
        "            got = await stream_completion([{'role': 'user', 'content': 'hi'}], cfg, lambda d: None)\n"
        "            assert got.text == 'ok', got\n"
        "            await describe(cfg, 10)\n"
        "        await describe(ModelConfig('gpt-4o-mini', api_key='k'), 10)\n"
        "    print(sorted(m for m in sys.modules if m.split('.')[0] in ('litellm', 'openai', 'tiktoken')))\n"
        "asyncio.run(main())\n"
    )
    tests = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), str(tests.parent / "server")])}
    env.pop("INTERPRETER_LSP_MODEL_CLIENT", None)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


async def test_litellm_still_serves_when_asked_to(model: ScriptedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERPRETER_LSP_MODEL_CLIENT", "litellm")
    model.reply("through litellm", usage=(5, 2))
    config = config_for(model, "openai")
    assert routes.route(config) is None
    got = await stream_completion(MESSAGES, config, lambda _d: None)
    assert got.text == "through litellm" and (got.prompt_tokens, got.completion_tokens) == (5, 2)


def test_a_provider_that_needs_litellm_says_how_to_get_it_when_it_is_missing(tmp_path: Path) -> None:
    """Without the providers extra (litellm not installed), a model only litellm serves says what to install;
    the direct paths work without it."""
    script = tmp_path / "no_litellm.py"
    script.write_text(
        "import asyncio, sys\n"
        "sys.modules['litellm'] = None  # as if not installed: importing it raises ModuleNotFoundError\n"
        "from scripted_model import ScriptedModel\n"
        "from interpreter_lsp.llm.client import ModelConfig, stream_completion\n"
        "from interpreter_lsp.llm.errors import ModelError\n"
        "async def main():\n"
        "    with ScriptedModel() as m:\n"
        "        m.reply('direct')\n"
        "        got = await stream_completion([{'role': 'user', 'content': 'hi'}],\n"
        "                                      ModelConfig('openai/scripted', api_base=m.base_url), lambda d: None)\n"
        "        assert got.text == 'direct'\n"
        "    try:\n"
        "        await stream_completion([{'role': 'user', 'content': 'hi'}], ModelConfig('gemini/gemini-2.0-flash'),\n"
        "                                lambda d: None)\n"
        "    except ModelError as exc:\n"
        "        print(exc.kind, exc.message)\n"
        "asyncio.run(main())\n"
    )
    tests = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), str(tests.parent / "server")])}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(errors.UNAVAILABLE), done.stdout
    assert "pip install 'interpreter-lsp[providers]'" in done.stdout and ":InterpreterInstall!" in done.stdout


@pytest.mark.parametrize("status", [501, 405])
async def test_through_litellm_too_a_client_error_or_501_is_not_retried(
    model: ScriptedModel, monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    """The same decision on the litellm path (its exception classes wrap these statuses)."""
    monkeypatch.setenv("INTERPRETER_LSP_MODEL_CLIENT", "litellm")
    model.fail(status, "Not Implemented", times=4)
    with pytest.raises(ModelError) as caught:
        await stream_completion(MESSAGES, config_for(model, "openai", api_base=model.root_url), lambda _d: None)
    assert len(model.requests) == 1
    if status == 501:
        assert caught.value.kind == errors.NOT_COMPATIBLE
        assert "is not an OpenAI-compatible endpoint" in caught.value.message
