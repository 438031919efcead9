"""Long conversations end to end: the context budget, compaction, context use shown, the cost and token
caps. A real LSP client, the real server and kernel, real litellm over real HTTP to the scripted model
(which records every request); no API key in the environment."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import Session, start_session, stop_session
from interpreter_lsp import protocol as p
from scripted_model import ScriptedModel
from test_loop import model_settings, py, turn_end

SUMMARY_MARK = "You condense a conversation"


@pytest.fixture(scope="module")
def litellm() -> Any:
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm as module

    return module


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


def is_summary(body: dict[str, Any]) -> bool:
    return SUMMARY_MARK in str(body["messages"][0]["content"])


def summaries(model: ScriptedModel) -> list[dict[str, Any]]:
    return [r for r in model.requests if is_summary(r)]


def chats(model: ScriptedModel) -> list[dict[str, Any]]:
    return [r for r in model.requests if not is_summary(r)]


def sent(body: dict[str, Any]) -> str:
    return "\n".join(str(m["content"]) for m in body["messages"])


async def chat_turn(s: Session, text: str) -> dict[str, Any]:
    turn = (await s.command(p.CHAT, {"text": text}))["turnId"]
    # Generous: a turn here is up to three requests and a run, on a machine that may be busy.
    return await turn_end(s, turn, 120)


def summarize(body: dict[str, Any]) -> str | None:
    """The scripted model's summaries: which turns the transcript held, so tests can tell them apart."""
    if not is_summary(body):
        return None
    asked = sorted(set(re.findall(r"task-\d+", sent(body))), key=lambda t: int(t.split("-")[1]))
    return "Summary: the user asked for " + ", ".join(asked[-5:]) + "; each printed a block of rows."


async def test_a_long_conversation_stays_in_the_window_and_keeps_answering(
    workspace_root: Path, home: Path, model: ScriptedModel, litellm: Any
) -> None:
    window, turns = 3000, 24
    model.responder = summarize
    settings = model_settings(model, contextWindow=window, autoRun=True, maxOutput=2400)
    s = await start_session(workspace_root, home, configuration=settings)
    try:
        for i in range(turns):
            model.reply(py(f"for row in range(400):\n    print('task-{i} row', row)", before=f"Printing for task-{i}."))
            model.reply(f"Done with task-{i}.")
            end = await chat_turn(s, f"print the rows of task-{i}")
            assert end["state"] == "done", end
        requests = chats(model)
        assert len(requests) == 2 * turns
        reserve = window // 8
        counted = [litellm.token_counter(model="openai/scripted", messages=r["messages"]) for r in requests]
        assert max(counted) <= window - reserve, counted
        assert summaries(model), "the conversation was never compacted"
        # The request after each run carries that run's output (its tail at least) and the task's request.
        for i in range(turns):
            after_run = sent(requests[2 * i + 1])
            assert f"task-{i} row 399" in after_run and f"print the rows of task-{i}" in after_run
        history = (await s.command(p.HISTORY, {}))["messages"]
        assert sum(1 for e in history if e["type"] == "user") == turns  # the panel keeps every turn
        compactions = [e for e in history if e["type"] == "compaction"]
        assert len(compactions) == len(summaries(model))
        status = await s.command(p.STATUS, {})
        context = status["context"]
        assert (context["window"], context["windowSource"], context["replyReserve"]) == (window, "setting", reserve)
        assert 0 < context["tokens"] <= window - reserve
        assert context["compactions"] == len(compactions)
        assert (context["cost"], context["costKnown"]) == (0, False)
        ends = [n for n in s.notes[p.TURN_STATUS] if n["state"] == "done"]
        assert all("context" in n for n in ends)
        assert any(n["state"] == "compacting" for n in s.notes[p.TURN_STATUS])
    finally:
        await stop_session(s)


async def test_compaction_is_recorded_once_and_survives_a_restart(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    model.responder = summarize
    settings = model_settings(model, contextWindow=2400, compactAt=0.5, autoRun=True)
    s = await start_session(workspace_root, home, configuration=settings)
    try:
        i = 0
        while not summaries(model):
            assert i < 12, "no compaction after 12 turns"
            model.reply(py(f"print('task-{i} ' * 150)"))
            model.reply(f"Done with task-{i}.")
            assert (await chat_turn(s, f"do task-{i}"))["state"] == "done"
            i += 1
        history = (await s.command(p.HISTORY, {}))["messages"]
        [compaction] = [e for e in history if e["type"] == "compaction"]
        assert compaction["summary"].startswith("Summary: the user asked for")
        assert compaction["summaryTokens"] > 0 and compaction["turns"] >= 1
        # The compacted request still carries the latest run, and the summary instead of older turns.
        after = [r for r in chats(model) if compaction["summary"] in sent(r)]
        assert after, "no request carried the summary"
        assert f"task-{i - 1} task-{i - 1}" in sent(after[-1])
        assert "do task-0" not in sent(after[-1])
    finally:
        await stop_session(s)

    asked = len(summaries(model))
    # A larger window after the restart: nothing needs condensing, the recorded summary is still used.
    s = await start_session(workspace_root, home, configuration={**settings, "contextWindow": 8000})
    try:
        model.reply("Still here.")
        assert (await chat_turn(s, "are you there?"))["state"] == "done"
        last = chats(model)[-1]
        assert compaction["summary"] in sent(last) and "do task-0" not in sent(last)
        assert len(summaries(model)) == asked, "the restart compacted again"
        history = (await s.command(p.HISTORY, {}))["messages"]
        assert sum(1 for e in history if e["type"] == "user") == i + 1  # the panel still has every turn
    finally:
        await stop_session(s)


async def test_a_failing_summary_drops_the_oldest_turns_and_says_so(
    workspace_root: Path, home: Path, model: ScriptedModel, litellm: Any
) -> None:
    window = 2400
    model.responder = lambda body: 400 if is_summary(body) else None
    settings = model_settings(model, contextWindow=window, compactAt=0.5, autoRun=True, maxRetries=0)
    s = await start_session(workspace_root, home, configuration=settings)
    try:
        for i in range(6):
            model.reply(py(f"print('task-{i} ' * 150)"))
            model.reply(f"Done with task-{i}.")
            assert (await chat_turn(s, f"do task-{i}"))["state"] == "done"
        assert summaries(model)
        history = (await s.command(p.HISTORY, {}))["messages"]
        notes = [e["text"] for e in history if e["type"] == "note"]
        assert any("could not be condensed" in n and "left out" in n for n in notes), notes
        compactions = [e for e in history if e["type"] == "compaction"]
        assert compactions and all(c.get("failed") for c in compactions)
        last = chats(model)[-1]
        assert "do task-0" not in sent(last) and "task-5 task-5" in sent(last)
        assert litellm.token_counter(model="openai/scripted", messages=last["messages"]) <= window - window // 8
    finally:
        await stop_session(s)


async def test_compact_on_demand(workspace_root: Path, home: Path, model: ScriptedModel) -> None:
    model.responder = summarize
    s = await start_session(workspace_root, home, configuration=model_settings(model))
    try:
        with pytest.raises(Exception, match="Nothing to compact"):
            await s.command(p.COMPACT, {})
        for i in range(2):
            model.reply(f"Answer to task-{i}.")
            assert (await chat_turn(s, f"task-{i} please"))["state"] == "done"
        result = await s.command(p.COMPACT, {})
        assert result["droppedTurns"] == 2 and result["summaryTokens"] > 0
        with pytest.raises(Exception, match="Nothing to compact"):
            await s.command(p.COMPACT, {})
        model.reply("Fine.")
        assert (await chat_turn(s, "next"))["state"] == "done"
        last = chats(model)[-1]
        assert "Summary: the user asked for task-0, task-1" in sent(last)
        assert "task-0 please" not in sent(last)
        assert (await s.command(p.STATUS, {}))["context"]["compactions"] == 1
    finally:
        await stop_session(s)


async def test_max_tokens_per_turn_stops_before_the_request(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    settings = model_settings(model, autoRun=True, maxTokensPerTurn=1000)
    s = await start_session(workspace_root, home, configuration=settings)
    try:
        model.reply(py("print('hello')"), usage=(800, 150))
        model.reply("Not asked.")
        end = await chat_turn(s, "say hello")
        assert end["state"] == "done"
        assert "maxTokensPerTurn" in end["message"] and "950" in end["message"] and "1,000" in end["message"]
        assert len(model.requests) == 1
        history = (await s.command(p.HISTORY, {}))["messages"]
        assert any(e["type"] == "note" and "maxTokensPerTurn" in e["text"] for e in history)
    finally:
        await stop_session(s)


async def test_max_tokens_per_turn_under_the_conversation_itself_says_what_helps(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    """When the request alone (the conversation) is over the cap, "send a message to continue in a new turn"
    cannot help: the advice names what does (compact, reset, a cap above the request)."""
    s = await start_session(workspace_root, home, configuration=model_settings(model, maxTokensPerTurn=20))
    try:
        end = await chat_turn(s, "say hello")
        assert end["state"] == "done"
        message = end["message"]
        assert "the request alone needs about" in message and "maxTokensPerTurn (20)" in message
        assert "Compact the conversation" in message and "reset it" in message
        assert "new turn" not in message
        assert len(model.requests) == 0
    finally:
        await stop_session(s)


async def test_max_cost_stops_a_priced_model_and_never_a_local_one(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    # openai/gpt-4o has a price in litellm's map (the scripted model answers for it).
    priced = {**model_settings(model, maxCost=0.002), "model": "openai/gpt-4o"}
    s = await start_session(workspace_root, home, configuration=priced)
    try:
        model.reply("First.", usage=(400, 100))  # 400 * 2.5e-6 + 100 * 1e-5 = $0.002
        assert (await chat_turn(s, "one"))["state"] == "done"
        status = await s.command(p.STATUS, {})
        assert status["context"]["costKnown"] is True
        assert status["context"]["cost"] == pytest.approx(0.002)
        assert (status["context"]["window"], status["context"]["windowSource"]) == (128000, "model")
        end = await chat_turn(s, "two")
        assert "maxCost" in end["message"] and "$0.0020" in end["message"]
        assert len(model.requests) == 1
    finally:
        await stop_session(s)

    local = model_settings(model, maxCost=0)
    s = await start_session(workspace_root, home, configuration=local)
    try:
        model.reply("Free.", usage=(400, 100))
        assert (await chat_turn(s, "three"))["state"] == "done"
        assert len(model.requests) == 2
        context = (await s.command(p.STATUS, {}))["context"]
        assert (context["costKnown"], context["windowSource"], context["window"]) == (False, "guess", 8192)
    finally:
        await stop_session(s)


async def test_a_huge_latest_result_is_cut_to_fit(
    workspace_root: Path, home: Path, model: ScriptedModel, litellm: Any
) -> None:
    window = 1200
    settings = model_settings(model, contextWindow=window, autoRun=True, maxOutput=100_000)
    s = await start_session(workspace_root, home, configuration=settings)
    try:
        model.reply(py("print('\\n'.join(f'line {i}' for i in range(3000)))"))
        model.reply("Long.")
        assert (await chat_turn(s, "print many lines"))["state"] == "done"
        second = model.wait_requests(2, 60)[1]
        assert litellm.token_counter(model="openai/scripted", messages=second["messages"]) <= window - 256
        assert "line 0" in sent(second) and "line 2999" in sent(second) and "print many lines" in sent(second)
    finally:
        await stop_session(s)


async def test_a_tool_call_printed_as_json_is_a_proposal_that_runs(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    s = await start_session(workspace_root, home, configuration=model_settings(model))
    try:
        model.reply('{"name": "run_code", "arguments": {"language": "python", "code": "print(6 * 7)"}}')
        model.reply("It is 42.")
        turn = (await s.command(p.CHAT, {"text": "six times seven?"}))["turnId"]
        proposal = await s.wait_for(lambda: next(iter(s.notes[p.PROPOSAL]), None), 120, "the proposal")
        assert (proposal["language"], proposal["code"]) == ("python", "print(6 * 7)")
        run_id = (await s.command(p.APPROVE, {"proposalId": proposal["proposalId"]}))["runId"]
        assert (await s.finished(run_id))["state"] == "ok"
        assert (await turn_end(s, turn, 120))["state"] == "done"
        assert "42" in str(model.wait_requests(2, 60)[1]["messages"][-1]["content"])
    finally:
        await stop_session(s)


def tiny_png(width: int = 40, height: int = 30) -> str:
    """A valid grey PNG, base64."""
    import base64
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode()


@pytest.mark.parametrize(("name", "sees"), [("openai/gpt-4o", True), ("openai/scripted", False)])
async def test_images_reach_a_vision_model_and_are_described_to_others(
    workspace_root: Path, home: Path, model: ScriptedModel, name: str, sees: bool
) -> None:
    png = tiny_png()
    code = f"from IPython.display import Image, display\nimport base64\ndisplay(Image(data=base64.b64decode('{png}')))"
    settings = {**model_settings(model, autoRun=True), "model": name}
    s = await start_session(workspace_root, home, configuration=settings)
    try:
        model.reply(py(code))
        model.reply("A grey rectangle.")
        assert (await chat_turn(s, "show me a picture"))["state"] == "done"
        last = model.wait_requests(2, 60)[1]["messages"][-1]
        if sees:
            parts = last["content"]
            assert isinstance(parts, list)
            [image] = [part for part in parts if part["type"] == "image_url"]
            assert image["image_url"]["url"] == "data:image/png;base64," + png
            assert any("40x30 pixels" in part.get("text", "") for part in parts)
        else:
            assert isinstance(last["content"], str)
            assert "showed the user an image, 40x30 pixels; you cannot see it" in last["content"]
            assert png not in last["content"]
    finally:
        await stop_session(s)


async def test_a_large_image_reaches_a_vision_model_downscaled_and_the_user_keeps_it_whole(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    from interpreter_lsp.agent import images

    code = (
        "import io\nfrom PIL import Image\nfrom IPython.display import Image as Shown, display\n"
        "buffer = io.BytesIO()\nImage.linear_gradient('L').resize((3000, 600)).save(buffer, 'PNG')\n"
        "display(Shown(data=buffer.getvalue()))"
    )
    s = await start_session(workspace_root, home, configuration={**model_settings(model, autoRun=True),
                                                                 "model": "openai/gpt-4o"})
    try:
        model.reply(py(code))
        model.reply("A wide gradient.")
        assert (await chat_turn(s, "draw a wide gradient"))["state"] == "done"
        [run] = s.notes[p.RUN_STATUS][-1:]
        [shown] = [o for o in s.outputs(run["runId"]) if o["kind"] == "display"]
        assert images.size(shown["data"]["image/png"]) == (3000, 600)  # the panel gets it whole
        parts = model.wait_requests(2, 60)[1]["messages"][-1]["content"]
        [image] = [part for part in parts if part["type"] == "image_url"]
        sent = image["image_url"]["url"].removeprefix("data:image/png;base64,")
        assert images.size(sent) == (images.MAX_SIDE, 307)
        assert any(f"3000x600 pixels, attached downscaled to {images.MAX_SIDE}x307" in part.get("text", "")
                   for part in parts)
    finally:
        await stop_session(s)
