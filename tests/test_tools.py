"""Native tool calls end to end: a real LSP client, the real server and kernel, real litellm over real HTTP
to the scripted model, which streams `delta.tool_calls` in the OpenAI format and records the `tools` and
`tool` messages it receives. No API key in the environment.

litellm says `openai/gpt-4o` supports function calling (the scripted model answers for it at apiBase);
it says nothing of `openai/scripted`, so under codeFormat "auto" that one gets fences.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import Session, start_session, stop_session
from interpreter_lsp import protocol as p
from scripted_model import ScriptedModel, offered_tools, run_code, tool_messages
from test_loop import model_settings, next_proposal, py, turn_end

TOOLS_MODEL = "openai/gpt-4o"


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


def tools_settings(model: ScriptedModel, **extra: Any) -> dict[str, Any]:
    return {**model_settings(model, **extra), "model": TOOLS_MODEL}


def assert_valid(messages: list[dict[str, Any]]) -> None:
    """The OpenAI rules for tool calls: each assistant message's calls are answered, each by one tool
    message, right after it and before anything else; no tool message answers a call not just made."""
    i = 0
    while i < len(messages):
        message = messages[i]
        assert message["role"] != "tool", f"message {i} is a tool message without its call: {messages}"
        calls = [c["id"] for c in message.get("tool_calls") or []]
        i += 1
        answered = []
        while i < len(messages) and messages[i]["role"] == "tool":
            answered.append(messages[i]["tool_call_id"])
            i += 1
        assert sorted(answered) == sorted(calls), f"calls {calls} answered by {answered}"


async def chat(s: Session, text: str) -> str:
    return str((await s.command(p.CHAT, {"text": text}))["turnId"])


async def test_a_tool_call_is_a_proposal_that_runs_and_its_result_answers_the_call(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    s = await start_session(workspace_root, home, configuration=tools_settings(model))
    try:
        model.tool_calls([run_code("print(6 * 7)", call_id="call_six")], text="Let me compute it.")
        model.reply("It is 42.")
        turn = await chat(s, "six times seven?")
        proposal = await next_proposal(s, turn, timeout=120)
        assert (proposal["language"], proposal["code"], proposal["risk"]["level"]) == ("python", "print(6 * 7)", "low")
        assert proposal["autoRun"] is False  # waits for approval, as a fenced block does
        run_id = (await s.command(p.APPROVE, {"proposalId": proposal["proposalId"]}))["runId"]
        assert (await s.finished(run_id))["state"] == "ok"
        assert "42" in s.text(run_id)  # the output reached the editor
        assert (await turn_end(s, turn, 120))["state"] == "done"

        first, second = model.wait_requests(2, 60)
        assert offered_tools(first) == ["run_code"]
        parameters = first["tools"][0]["function"]["parameters"]
        assert parameters["required"] == ["language", "code"]
        assert {"python", "shell"} <= set(parameters["properties"]["language"]["enum"])
        assert "run_code tool" in first["messages"][0]["content"]
        assert "fenced code block" not in first["messages"][0]["content"]
        shown = "".join(n["delta"] for n in s.notes[p.MESSAGE] if n["turnId"] == turn)
        assert "Let me compute it." in shown and "It is 42." in shown

        assert_valid(second["messages"])
        assistant, answer = second["messages"][-2:]
        assert assistant["role"] == "assistant" and "Let me compute it." in (assistant["content"] or "")
        [call] = assistant["tool_calls"]
        assert call["id"] == "call_six" and call["function"]["name"] == "run_code"
        assert json.loads(call["function"]["arguments"]) == {"language": "python", "code": "print(6 * 7)"}
        assert answer == {"role": "tool", "tool_call_id": "call_six", "content": answer["content"]}
        assert "42" in answer["content"] and "ok" in answer["content"]
    finally:
        await stop_session(s)


async def test_a_tool_call_and_a_fenced_block_of_the_same_code_give_the_same_run(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    code = "import os\nx = 21\nprint(x * 2, os.path.basename(os.getcwd()))"
    s = await start_session(workspace_root, home, configuration=tools_settings(model, autoRun=True))
    try:
        runs = []
        for reply in (lambda: model.reply(py(code)), lambda: model.tool_calls([run_code(code)])):
            reply()
            model.reply("Done.")
            turn = await chat(s, "compute")
            proposal = await next_proposal(s, turn, timeout=120)
            assert (await turn_end(s, turn, 120))["state"] == "done"
            [status] = [n for n in s.notes[p.PROPOSAL_STATUS] if n["proposalId"] == proposal["proposalId"]]
            assert status["state"] == "auto-run"
            final = await s.finished(status["runId"])
            runs.append(
                (proposal["language"], proposal["code"], proposal["risk"], final["state"], s.text(status["runId"]))
            )
        assert runs[0] == runs[1]
        assert runs[0][3:] == ("ok", f"42 {workspace_root.name}\n")
        # Both results reached the model: as a user message after the fence, as the tool's answer after the call.
        fenced, called = model.requests[1], model.requests[3]
        assert f"42 {workspace_root.name}" in fenced["messages"][-1]["content"]
        assert tool_messages(called)[-1]["content"] == fenced["messages"][-1]["content"]
    finally:
        await stop_session(s)


async def test_two_parallel_calls_give_two_proposals_and_both_are_answered(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    s = await start_session(workspace_root, home, configuration=tools_settings(model))
    try:
        calls = [run_code("print('first')", call_id="call_1"), run_code("echo second", "shell", call_id="call_2")]
        model.tool_calls(calls, chunk_size=4)
        model.reply("Both ran.")
        turn = await chat(s, "two things at once")
        first = await next_proposal(s, turn, 0, timeout=120)
        second = await next_proposal(s, turn, 1, timeout=120)
        assert [(x["language"], x["code"]) for x in (first, second)] == [
            ("python", "print('first')"),
            ("shell", "echo second"),
        ]
        for proposal in (first, second):
            run_id = (await s.command(p.APPROVE, {"proposalId": proposal["proposalId"]}))["runId"]
            assert (await s.finished(run_id, 120))["state"] == "ok"
        assert (await turn_end(s, turn, 120))["state"] == "done"
        after = model.wait_requests(2, 60)[1]["messages"]
        assert_valid(after)
        assert [c["id"] for c in after[-3]["tool_calls"]] == ["call_1", "call_2"]
        answers = {m["tool_call_id"]: m["content"] for m in after[-2:]}
        assert "first" in answers["call_1"] and "second" in answers["call_2"]
    finally:
        await stop_session(s)


async def test_a_rejected_call_is_answered_with_the_refusal(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    s = await start_session(workspace_root, home, configuration=tools_settings(model))
    try:
        # With a reason: the model is asked again at once, the refusal as the call's answer.
        model.tool_calls([run_code("import shutil; shutil.rmtree('data')", call_id="call_rm")])
        model.reply("I will not delete anything then.")
        turn = await chat(s, "clean up")
        proposal = await next_proposal(s, turn, timeout=120)
        await s.command(p.REJECT, {"proposalId": proposal["proposalId"], "reason": "keep the data"})
        assert (await turn_end(s, turn, 120))["state"] == "done"
        again = model.wait_requests(2, 60)[1]["messages"]
        assert_valid(again)
        assert again[-1]["role"] == "tool" and again[-1]["tool_call_id"] == "call_rm"
        assert "declined to run" in again[-1]["content"] and "keep the data" in again[-1]["content"]

        # Without a reason: the turn ends; the next request answers the call before the new message.
        model.tool_calls([run_code("print('again')", call_id="call_again")])
        turn = await chat(s, "try something else")
        proposal = await next_proposal(s, turn, timeout=120)
        await s.command(p.REJECT, {"proposalId": proposal["proposalId"]})
        assert (await turn_end(s, turn, 120))["message"] == "Declined: the code did not run."
        model.reply("Understood.")
        assert (await turn_end(s, await chat(s, "never mind"), 120))["state"] == "done"
        last = model.wait_requests(4, 60)[3]["messages"]
        assert_valid(last)
        [answer] = [m for m in last if m.get("tool_call_id") == "call_again"]
        assert "declined to run" in answer["content"]
        assert last[-1] == {"role": "user", "content": "never mind"}
    finally:
        await stop_session(s)


@pytest.mark.parametrize(
    ("name", "code_format", "offered"),
    [(TOOLS_MODEL, "fences", False), ("openai/scripted", "auto", False), ("openai/scripted", "tools", True)],
)
async def test_which_requests_offer_the_tool(
    workspace_root: Path, home: Path, model: ScriptedModel, name: str, code_format: str, offered: bool
) -> None:
    settings = {**model_settings(model, codeFormat=code_format, autoRun=True), "model": name}
    s = await start_session(workspace_root, home, configuration=settings)
    try:
        model.reply(py("print('fenced')"))  # a fenced block is a proposal in every mode
        model.reply("Done.")
        turn = await chat(s, "go")
        assert (await next_proposal(s, turn, timeout=120))["code"] == "print('fenced')"
        assert (await turn_end(s, turn, 120))["state"] == "done"
        first = model.wait_requests(1, 60)[0]
        assert ("tools" in first) is offered
        system = first["messages"][0]["content"]
        assert ("run_code tool" in system) is offered and ("fenced code block" in system) is not offered
    finally:
        await stop_session(s)


async def test_calls_and_their_answers_survive_a_restart_even_one_left_waiting(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    settings = tools_settings(model)
    s = await start_session(workspace_root, home, configuration=settings)
    try:
        model.tool_calls([run_code("print('kept')", call_id="call_kept")], text="Running.")
        model.reply("It printed kept.")
        turn = await chat(s, "first")
        proposal = await next_proposal(s, turn, timeout=120)
        run_id = (await s.command(p.APPROVE, {"proposalId": proposal["proposalId"]}))["runId"]
        assert (await s.finished(run_id))["state"] == "ok"
        assert (await turn_end(s, turn, 120))["state"] == "done"
        model.tool_calls([run_code("print('never decided')", call_id="call_waiting")])
        turn = await chat(s, "second")
        await next_proposal(s, turn, timeout=120)  # the server stops while it waits for approval
    finally:
        await stop_session(s)

    s = await start_session(workspace_root, home, configuration=settings)
    try:
        model.reply("Back.")
        assert (await turn_end(s, await chat(s, "third"), 120))["state"] == "done"
        replayed = model.wait_requests(4, 60)[3]["messages"]
        assert_valid(replayed)
        answers = {m["tool_call_id"]: m["content"] for m in tool_messages({"messages": replayed})}
        assert "kept" in answers["call_kept"]
        assert answers["call_waiting"].startswith("Not run")
        assert replayed[-1] == {"role": "user", "content": "third"}
        # What the model read before the restart is what it reads after it.
        before = model.requests[1]["messages"]
        assert replayed[1 : len(before)] == before[1:]
    finally:
        await stop_session(s)


async def test_compaction_condenses_whole_calls_and_leaves_no_orphan(
    workspace_root: Path, home: Path, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    def summarize(body: dict[str, Any]) -> str | None:
        if "You condense a conversation" not in str(body["messages"][0]["content"]):
            return None
        return "Summary: the user asked for tasks; each printed a block of text."

    model.responder = summarize
    settings = tools_settings(model, contextWindow=2400, compactAt=0.5, autoRun=True)
    s = await start_session(workspace_root, home, configuration=settings)
    try:
        i = 0
        while not any("You condense" in str(r["messages"][0]["content"]) for r in model.requests):
            assert i < 12, "no compaction after 12 turns"
            model.tool_calls([run_code(f"print('task-{i} ' * 150)", call_id=f"call_{i}")])
            model.reply(f"Done with task-{i}.")
            assert (await turn_end(s, await chat(s, f"do task-{i}"), 120))["state"] == "done"
            i += 1
        model.tool_calls([run_code("print('after')", call_id="call_after")])
        model.reply("Done after.")
        assert (await turn_end(s, await chat(s, "one more"), 120))["state"] == "done"
        summaries = [r for r in model.requests if "You condense" in str(r["messages"][0]["content"])]
        chats = [r for r in model.requests if r not in summaries]
        monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        for request in chats:
            assert_valid(request["messages"])
            assert offered_tools(request) == ["run_code"]
            # Within the window minus the reply's room, the calls, their answers and the tools' schema counted.
            sent = litellm.token_counter(model=TOOLS_MODEL, messages=request["messages"], tools=request["tools"])
            assert sent <= 2400 - 2400 // 8, sent
        # The summary request reads the calls as code (a transcript, no tool messages).
        transcript = summaries[0]["messages"][1]["content"]
        assert "print('task-0 ' * 150)" in transcript and "tools" not in summaries[0]
        last = chats[-1]["messages"]
        assert "Summary: the user asked for tasks" in str(last[1]["content"])
        assert "call_0" not in json.dumps(last)  # the condensed turns' calls are gone with their answers
        assert last[-1]["tool_call_id"] == "call_after" and "after" in last[-1]["content"]
    finally:
        await stop_session(s)


async def test_an_unreadable_call_is_answered_with_why_and_the_model_tries_again(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    s = await start_session(workspace_root, home, configuration=tools_settings(model))
    try:
        model.tool_calls([{"id": "call_cut", "name": "run_code", "arguments": '{"language": "python", "code": "pri'}])
        model.tool_calls([run_code("print('whole')", call_id="call_whole")])
        turn = await chat(s, "print whole")
        proposal = await next_proposal(s, turn, timeout=120)  # only the readable call is proposed
        assert proposal["code"] == "print('whole')" and len(s.notes[p.PROPOSAL]) == 1
        second = model.wait_requests(2, 60)[1]["messages"]
        assert_valid(second)
        assert second[-1]["tool_call_id"] == "call_cut" and "not valid JSON" in second[-1]["content"]
        await s.command(p.INTERRUPT, {})
        assert (await turn_end(s, turn, 120))["state"] == "cancelled"
    finally:
        await stop_session(s)
