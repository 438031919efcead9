"""Native tool calls in the middle layers, without processes: the model's view of calls and their answers
(agent/conversation.py), fitting that keeps a call with its answers (agent/budget.py), and the loop with a
fake host. End to end over LSP: tests/test_tools.py."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from fakes import FakeHost, count_tokens
from interpreter_lsp import protocol as p
from interpreter_lsp.agent import budget
from interpreter_lsp.agent.conversation import Conversation
from interpreter_lsp.agent.loop import Loop
from interpreter_lsp.history import History
from interpreter_lsp.llm.models import ModelFacts
from interpreter_lsp.llm.toolstream import ToolCall
from interpreter_lsp.runs import Run
from test_tools import assert_valid

FACTS = ModelFacts("fake", None, 0.0, 0.0, False, False, False, count_tokens)
RISK = p.Risk("low", [])


def call(call_id: str, code: str | None, language: str = "python") -> dict[str, str]:
    arguments = json.dumps({"language": language, "code": code}) if code is not None else "{not json"
    return {"id": call_id, "name": "run_code", "arguments": arguments}


def conversation(tmp_path: Path, events: list[Any]) -> Conversation:
    c = Conversation(History(tmp_path / "history.jsonl"), tmp_path)
    for event in events:
        c.add(event)
    return c


def a_turn_with_three_calls() -> list[Any]:
    return [
        p.UserEvent("t1", "do it", "do it"),
        p.AssistantEvent(
            "t1", "Two steps.", tool_calls=[call("A", "print(1)"), call("B", "ls", "shell"), call("C", None)]
        ),
        p.ProposalEvent("pa", "t1", "python", "print(1)", RISK, False, True, "A"),
        p.ProposalEvent("pb", "t1", "shell", "ls", RISK, False, True, "B"),
        p.UsageEvent("t1", 1, 1, 0.0),
        p.KernelEvent("python", "restarted", "restarted"),  # while the calls wait: after their answers
        p.DecisionEvent("pa", "t1", "approved", code="print(1)"),
        p.RunEvent("r1", "user", "python", "x = 5", "ok", 1, "", turn_id=None),  # the user ran code meanwhile
        p.RunEvent("r2", "model", "python", "print(1)", "ok", 1, "1\n", turn_id="t1", proposal_id="pa"),
        p.DecisionEvent("pb", "t1", "rejected", language="shell", reason="not now"),
        p.AssistantEvent("t1", "Stopped."),
        p.TurnEndEvent("t1", "done"),
    ]


def test_each_call_is_answered_right_after_it_and_the_meantime_follows(tmp_path: Path) -> None:
    messages = conversation(tmp_path, a_turn_with_three_calls()).model_messages("SYSTEM", native=True)
    assert_valid(messages)
    roles = [m["role"] for m in messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "tool", "user", "assistant"]
    assistant = messages[2]
    assert assistant["content"] == "Two steps."
    assert [c["id"] for c in assistant["tool_calls"]] == ["A", "B", "C"]
    assert assistant["tool_calls"][0]["function"] == {
        "name": "run_code",
        "arguments": call("A", "print(1)")["arguments"],
    }
    answers = {m["tool_call_id"]: m["content"] for m in messages[3:6]}
    assert answers["C"].startswith("Error: the arguments are not valid JSON")
    assert "Output of the python code (ok)" in answers["A"] and "1" in answers["A"]
    assert "declined to run the shell code" in answers["B"] and "not now" in answers["B"]
    assert "kernel" in messages[6]["content"] and "x = 5" in messages[6]["content"]


def test_without_tools_the_same_calls_read_as_fenced_blocks(tmp_path: Path) -> None:
    messages = conversation(tmp_path, a_turn_with_three_calls()).model_messages("SYSTEM")
    assert all(m["role"] != "tool" and "tool_calls" not in m for m in messages)
    assistant = messages[2]["content"]
    assert (
        assistant.startswith("Two steps.")
        and "```python\nprint(1)\n```" in assistant
        and "```shell\nls\n```" in assistant
    )
    assert "could not be read" in assistant
    rest = messages[3]["content"]
    assert "kernel" in rest and "Output of the python code (ok)" in rest and "declined to run the shell code" in rest


@pytest.mark.parametrize(
    ("after", "answer"),
    [
        ([], "Not run: the turn ended before the user decided on it."),
        ([p.DecisionEvent("pa", "t1", "auto-run", code="print(1)")], "No result: the run did not finish"),
    ],
)
def test_a_call_without_a_result_still_gets_an_answer(tmp_path: Path, after: list[Any], answer: str) -> None:
    events = [
        p.UserEvent("t1", "one", "one"),
        p.AssistantEvent("t1", "", tool_calls=[call("A", "print(1)"), call("B", "print(2)")]),
        p.ProposalEvent("pa", "t1", "python", "print(1)", RISK, False, True, "A"),
        *after,
        p.TurnEndEvent("t1", "cancelled"),
        p.UserEvent("t2", "two", "two"),
    ]
    messages = conversation(tmp_path, events).model_messages("SYSTEM", native=True)
    assert_valid(messages)
    assert messages[2]["content"] is None  # no text: the calls alone
    answers = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert answers["A"].startswith(answer)
    assert answers["B"] == "Not run: the reply ended before this call could be proposed."
    assert messages[-1] == {"role": "user", "content": "two"}


async def test_fitting_keeps_or_leaves_out_a_call_with_its_answers() -> None:
    def words(n: int, tag: str) -> str:
        return f"{tag} " + "word " * n

    messages: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    for i in range(6):
        messages.append({"role": "user", "content": words(50, f"q{i}")})
        calls = [
            {"id": f"c{i}{k}", "type": "function", "function": {"name": "run_code", "arguments": "{}"}} for k in "ab"
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages += [{"role": "tool", "tool_call_id": f"c{i}{k}", "content": words(60, f"r{i}{k}")} for k in "ab"]
    request = len(messages) - 4
    for limit in range(300, 1200, 37):  # every cut point falls somewhere else
        fitted = await budget.fit(messages, budget.TokenCache(), FACTS, limit, frozenset({request}))
        assert fitted.left_out > 0
        assert_valid(fitted.messages[1:])
        assert fitted.messages[-1]["tool_call_id"] == "c5b"


def tool(call_id: str, code: str) -> ToolCall:
    return ToolCall(call_id, "run_code", json.dumps({"language": "python", "code": code}))


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    h = FakeHost(tmp_path)
    h.settings = dataclasses.replace(h.settings, code_format="tools")
    return h


def ran(loop: Loop, host: FakeHost, run: Run, output: str) -> None:
    """What the workspace does when a run ends: records it, then resolves it."""
    event = p.RunEvent(run.run_id, "model", run.language, run.code, "ok", 1, output, turn_id=run.turn_id)
    event.proposal_id = run.proposal_id
    loop.conversation.record(event)
    host.finish_run(run, output=output)


async def test_an_unreadable_call_is_answered_and_the_model_asked_again(host: FakeHost, tmp_path: Path) -> None:
    loop = Loop(host, Conversation(History(tmp_path / "history.jsonl"), tmp_path))
    host.replies.extend(
        [[ToolCall("bad", "run_code", '{"code": ')], ["Again:", tool("good", "print(7)")], ["It printed 7."]]
    )
    loop.chat("seven")
    shown = await host.until(lambda: host.notes(p.PROPOSAL) and host.notes(p.PROPOSAL)[0])
    assert shown["code"] == "print(7)" and "toolCallId" not in shown  # the wire to clients is unchanged
    run = loop.approve(shown["proposalId"])
    ran(loop, host, run, "7\n")
    await host.until(lambda: any(n["state"] == "done" for n in host.notes(p.TURN_STATUS)))
    assert len(host.requests) == 3 and all(t and t[0]["function"]["name"] == "run_code" for t in host.tools)
    second, third = host.requests[1], host.requests[2]
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "bad"
    assert "not valid JSON" in second[-1]["content"]
    assert_valid(third)
    assert third[-1]["tool_call_id"] == "good" and "7" in third[-1]["content"]
    proposal = next(e for e in loop.conversation.events if e["type"] == "proposal")
    assert proposal["toolCallId"] == "good"
    assert "run_code tool" in third[0]["content"]
    # A restart reads the same history into the same messages.
    again = Conversation(History(tmp_path / "history.jsonl"), tmp_path)
    assert again.model_messages("S", native=True) == loop.conversation.model_messages("S", native=True)


async def test_only_unreadable_calls_until_max_steps_end_the_turn_with_a_note(host: FakeHost, tmp_path: Path) -> None:
    host.settings = dataclasses.replace(host.settings, max_steps=2)
    loop = Loop(host, Conversation(History(tmp_path / "history.jsonl"), tmp_path))
    host.replies.extend([[ToolCall("bad1", "run_code", '{"code": ')], [ToolCall("bad2", "run_code", "[]")]])
    loop.chat("go")
    end = await host.until(
        lambda: next((n for n in host.notes(p.TURN_STATUS) if n["state"] in p.FINAL_TURN_STATES), None)
    )
    assert end["state"] == "done" and "Stopped after 2 steps (interpreter.maxSteps)" in end["message"]
    assert len(host.requests) == 2 and not host.replies
    notes = [e for e in loop.conversation.events if e["type"] == "note"]
    assert len(notes) == 1 and "2 steps" in notes[0]["text"]
    # The next message lets the model continue, with both calls answered in what it reads.
    host.replies.append(["Done now."])
    loop.chat("continue")
    await host.until(lambda: len([n for n in host.notes(p.TURN_STATUS) if n["state"] == "done"]) == 2)
    assert_valid(host.requests[2])


async def test_an_interrupt_while_calls_stream_leaves_them_answered(host: FakeHost, tmp_path: Path) -> None:
    loop = Loop(host, Conversation(History(tmp_path / "history.jsonl"), tmp_path))
    host.model_gate = asyncio.Event()  # never set: the reply stops after its first piece
    host.gate_after = 0
    host.replies.append([tool("c1", "print(1)"), "never sent"])
    turn = loop.chat("one")
    await host.until(lambda: host.notes(p.PROPOSAL))
    await loop.interrupt()
    assert any(n["turnId"] == turn and n["state"] == "cancelled" for n in host.notes(p.TURN_STATUS))
    [assistant] = [e for e in loop.conversation.events if e["type"] == "assistant"]
    assert assistant["partial"] is True and assistant["toolCalls"][0]["id"] == "c1"
    host.model_gate = None
    host.replies.append(["Fine."])
    loop.chat("two")
    await host.until(lambda: len(host.requests) == 2)
    assert_valid(host.requests[1])
    [answer] = [m for m in host.requests[1] if m["role"] == "tool"]
    assert answer["tool_call_id"] == "c1" and answer["content"].startswith("Not run")


def an_edited_and_an_applied_call(turn: str, uri: str) -> list[Any]:
    """A turn whose first call was run edited and whose second was written into a document."""
    a, b, pa, pb = f"A{turn}", f"B{turn}", f"pa{turn}", f"pb{turn}"
    return [
        p.UserEvent(turn, "go", "go"),
        p.AssistantEvent(turn, "", tool_calls=[call(a, "print(1)"), call(b, "x = 2")]),
        p.ProposalEvent(pa, turn, "python", "print(1)", RISK, False, True, a),
        p.ProposalEvent(pb, turn, "python", "x = 2", RISK, False, True, b),
        p.DecisionEvent(pa, turn, "approved", code="print(11)", edited=True),
        p.RunEvent(f"r{turn}", "model", "python", "print(11)", "ok", 1, "11\n", turn_id=turn, proposal_id=pa),
        p.DecisionEvent(pb, turn, "applied", language="python", uri=uri),
        p.TurnEndEvent(turn, "done"),
    ]


def test_an_edited_run_and_an_applied_call_answer_their_calls(tmp_path: Path) -> None:
    events = an_edited_and_an_applied_call("", (tmp_path / "calc.py").as_uri())
    messages = conversation(tmp_path, events).model_messages("SYSTEM", native=True)
    assert_valid(messages)
    answers = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert "The user edited your code before running it" in answers["A"] and "print(11)" in answers["A"]
    assert answers["B"] == "The user wrote your python code into calc.py instead of running it; it did not run."


async def test_a_fence_and_a_call_in_one_reply_are_two_proposals_both_answered(host: FakeHost, tmp_path: Path) -> None:
    loop = Loop(host, Conversation(History(tmp_path / "history.jsonl"), tmp_path))
    host.replies.extend([["First:\n```python\nprint(1)\n```\nthen ", tool("c2", "print(2)")], ["Both ran."]])
    loop.chat("both")
    await host.until(lambda: len(host.notes(p.PROPOSAL)) == 2)
    first, second = host.notes(p.PROPOSAL)
    assert (first["code"], second["code"]) == ("print(1)", "print(2)")
    for shown, output in ((first, "1\n"), (second, "2\n")):
        run = loop.approve(shown["proposalId"])
        ran(loop, host, run, output)
    await host.until(lambda: any(n["state"] == "done" for n in host.notes(p.TURN_STATUS)))
    after = host.requests[1]
    assert_valid(after)
    assert [m["role"] for m in after[-3:]] == ["assistant", "tool", "user"]
    assert "```python\nprint(1)\n```" in after[-3]["content"] and after[-3]["tool_calls"][0]["id"] == "c2"
    assert "2" in after[-2]["content"] and "Output of the python code (ok)" in after[-1]["content"]
