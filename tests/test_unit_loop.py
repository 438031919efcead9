"""The agent loop with a fake host and a scripted model stream: no process, no HTTP. The end-to-end tests
(test_loop.py) prove the whole; these say which rule of the loop broke."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fakes import FakeHost
from interpreter_lsp import protocol as p
from interpreter_lsp.agent.conversation import Conversation
from interpreter_lsp.agent.loop import DECLINED, Loop, TurnBusy, UnknownProposal
from interpreter_lsp.history import History
from interpreter_lsp.llm.errors import ModelError

FENCE = "```"


def block(code: str, language: str = "python") -> list[str]:
    return ["Here:\n", f"{FENCE}{language}\n", f"{code}\n", f"{FENCE}\n"]


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path)


@pytest.fixture
def loop(host: FakeHost, tmp_path: Path) -> Loop:
    loop = Loop(host, Conversation(History(tmp_path / "history.jsonl"), tmp_path))
    host.ledger = loop.gate.ledger  # every run the loop starts must carry the gate's approval for its code
    return loop


def types(loop: Loop) -> list[str]:
    return [e["type"] for e in loop.conversation.events]


async def ended(host: FakeHost, turn_id: str) -> dict:
    def end() -> dict | None:
        return next(
            (n for n in host.notes(p.TURN_STATUS) if n["turnId"] == turn_id and n["state"] in p.FINAL_TURN_STATES),
            None,
        )

    return await host.until(end)


async def proposal(host: FakeHost, index: int = 0) -> dict:
    return await host.until(lambda: len(host.notes(p.PROPOSAL)) > index and host.notes(p.PROPOSAL)[index])


async def test_a_reply_without_code_ends_the_turn(host: FakeHost, loop: Loop) -> None:
    host.replies.append(["Hello", " there."])
    turn = loop.chat("hi")
    assert (await ended(host, turn))["state"] == "done"
    assert types(loop) == ["user", "assistant", "usage", "turnEnd"]
    messages = host.notes(p.MESSAGE)
    assert [m["seq"] for m in messages] == list(range(len(messages)))
    assert "".join(m["delta"] for m in messages) == "Hello there."
    assert messages[-1]["done"] is True


async def test_deltas_read_together_leave_as_one_message_and_a_block_before_its_proposal(
    host: FakeHost, loop: Loop
) -> None:
    """A fast model's deltas come several to a read of the stream: they leave as one message (each costs the
    server and the editor its masking and JSON). The text of a block is sent before its proposal."""
    host.together = True
    host.replies.append(["Let me ", "check.\n", *block("print(1)"), "After ", "it."])
    turn = loop.chat("go")
    shown = await proposal(host)
    sent = [(method, params) for method, params in host.sent if method in (p.MESSAGE, p.PROPOSAL)]
    before = [params["delta"] for method, params in sent[: sent.index((p.PROPOSAL, shown))] if method == p.MESSAGE]
    # Read together up to the block's end: one message, sent as the block closed (before its proposal).
    assert before[0] == "Let me check.\nHere:\n" + f"{FENCE}python\nprint(1)\n{FENCE}\n", before
    loop.reject(shown["proposalId"])
    await ended(host, turn)
    deltas = [n["delta"] for n in host.notes(p.MESSAGE) if n["turnId"] == turn]
    assert "".join(deltas) == "Let me check.\nHere:\n" + f"{FENCE}python\nprint(1)\n{FENCE}\n" + "After it."
    assert deltas[1:] == ["After it.", ""] and host.notes(p.MESSAGE)[-1]["done"]  # the rest, then the end


async def test_approve_runs_and_the_output_goes_back_to_the_model(host: FakeHost, loop: Loop) -> None:
    host.replies.extend([block("print(42)"), ["It printed 42."]])
    turn = loop.chat("compute")
    shown = await proposal(host)
    await host.until(lambda: any(n["state"] == "awaiting-approval" for n in host.notes(p.TURN_STATUS)))
    run = loop.approve(shown["proposalId"])
    assert host.notes(p.PROPOSAL_STATUS) == [
        {"proposalId": shown["proposalId"], "turnId": turn, "state": "approved", "runId": run.run_id}
    ]
    host.finish_run(run, output="42\n")
    assert (await ended(host, turn))["state"] == "done"
    assert "42" in host.requests[1][-1]["content"]
    with pytest.raises(UnknownProposal):
        loop.approve(shown["proposalId"])


async def test_reject_without_a_reason_ends_the_turn(host: FakeHost, loop: Loop) -> None:
    host.replies.append(block("rm -rf build", "shell"))
    turn = loop.chat("clean")
    shown = await proposal(host)
    loop.reject(shown["proposalId"])
    end = await ended(host, turn)
    assert (end["state"], end["message"]) == ("done", DECLINED)
    assert not host.runs and len(host.requests) == 1


async def test_reject_with_a_reason_asks_again_and_the_rest_of_the_step_expires(host: FakeHost, loop: Loop) -> None:
    host.replies.extend([block("a = 1") + block("b = 2"), ["Fine, I will not."]])
    turn = loop.chat("do two things")
    first = await proposal(host)
    second = await proposal(host, 1)
    loop.reject(first["proposalId"], "  not like that  ")
    assert (await ended(host, turn))["state"] == "done"
    assert "not like that" in host.requests[1][-1]["content"]
    states = {n["proposalId"]: (n["state"], n.get("reason")) for n in host.notes(p.PROPOSAL_STATUS)}
    assert states == {first["proposalId"]: ("rejected", "not like that"), second["proposalId"]: ("expired", None)}


async def test_applied_ends_the_turn_and_the_model_learns_where_it_went(
    host: FakeHost, loop: Loop, tmp_path: Path
) -> None:
    host.replies.extend([block("x = 1"), ["Noted."]])
    turn = loop.chat("write it")
    shown = await proposal(host)
    uri = (tmp_path / "a.py").as_uri()
    loop.applied(shown["proposalId"], uri, "a.py")
    end = await ended(host, turn)
    assert end["message"] == "Written into a.py; it did not run."
    loop.applied(shown["proposalId"], uri, "a.py")  # a decided proposal: nothing more happens
    assert [n["state"] for n in host.notes(p.PROPOSAL_STATUS)] == ["applied"]
    turn2 = loop.chat("thanks")
    await ended(host, turn2)
    assert "wrote your python code into a.py instead of running it" in host.requests[1][-1]["content"]


async def test_a_failed_request_is_not_glued_to_the_next_question(host: FakeHost, loop: Loop) -> None:
    host.replies.extend([ModelError("No model is configured: set interpreter.model.", "no_model"), ["Answer."]])
    turn = loop.chat("first question")
    end = await ended(host, turn)
    assert (end["state"], end["message"]) == ("error", "No model is configured: set interpreter.model.")
    assert "error" in types(loop)
    turn2 = loop.chat("second question")
    await ended(host, turn2)
    sent = [m["content"] for m in host.requests[-1] if m["role"] == "user"]
    assert len(sent) == 1 and "second question" in sent[0] and "first question" not in sent[0]


async def test_interrupt_while_streaming_keeps_the_partial_reply(host: FakeHost, loop: Loop) -> None:
    host.model_gate = asyncio.Event()
    host.replies.append(["Thinking", " more"])
    turn = loop.chat("go")
    await host.until(lambda: host.notes(p.MESSAGE))
    await loop.interrupt()
    end = await ended(host, turn)
    assert (end["state"], end["message"]) == ("cancelled", "Interrupted: you stopped the turn.")
    assert loop.conversation.events[1] == {**loop.conversation.events[1], "type": "assistant", "partial": True}
    assert not loop.busy


async def test_a_decision_made_while_the_reply_streams_is_recorded_after_it(host: FakeHost, loop: Loop) -> None:
    host.model_gate, host.gate_after = asyncio.Event(), 3  # the stream stops right after the closing fence
    host.replies.extend([[*block("print(1)"), "And more text."], ["Done."]])
    turn = loop.chat("go")
    shown = await proposal(host)
    run = loop.approve(shown["proposalId"])  # while the reply still streams
    # The workspace records the run's end through the same door: it too waits for the reply.
    loop.conversation.record(p.RunEvent(run.run_id, "model", "python", "print(1)", "ok", 1, "1\n", turn_id=turn))
    assert types(loop) == ["user"]
    host.model_gate.set()
    host.finish_run(run, output="1\n")
    await ended(host, turn)
    order = types(loop)
    assert order.index("assistant") < order.index("proposal") < order.index("decision") < order.index("run")


async def test_one_turn_at_a_time(host: FakeHost, loop: Loop) -> None:
    host.model_gate = asyncio.Event()
    host.replies.append(["slow"])
    loop.chat("one")
    with pytest.raises(TurnBusy):
        loop.chat("two")
    host.model_gate.set()


async def test_proposals_are_shown_in_the_order_written_even_when_rating_takes_longer(
    host: FakeHost, loop: Loop
) -> None:
    slow = asyncio.Event()

    async def rate(code: str, language: str) -> p.Risk:
        if code.startswith("first"):
            await slow.wait()
        return p.Risk("low", [])

    host.rate = rate  # type: ignore[method-assign]
    host.replies.append(block("first = 1") + block("second = 2"))
    loop.chat("two steps")
    await asyncio.sleep(0.05)
    assert host.notes(p.PROPOSAL) == []  # the second is rated but waits for the first
    slow.set()
    second = await proposal(host, 1)
    assert [n["code"] for n in host.notes(p.PROPOSAL)] == ["first = 1", "second = 2"]
    assert second["code"] == "second = 2"


async def test_history_restores_the_conversation(host: FakeHost, loop: Loop, tmp_path: Path) -> None:
    host.replies.append(["Hello."])
    await ended(host, loop.chat("hi"))
    again = Conversation(History(tmp_path / "history.jsonl"), tmp_path)
    assert [e["type"] for e in again.events] == types(loop)
    assert again.model_messages("system")[1:] == loop.conversation.model_messages("system")[1:]


async def test_the_view_of_a_long_conversation_is_built_off_the_loop_and_is_the_same(
    host: FakeHost, loop: Loop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Weeks of turns before a compaction: rebuilding the model's view of 900 events (~4 ms, three times a
    turn) is not done on the event loop, and what the model reads is what the view built inline gives."""
    import threading

    conversation = loop.conversation
    for i in range(300):
        turn = f"t-{i}"
        conversation.add(p.UserEvent(turn, f"question {i}", f"question {i}"))
        conversation.add(p.AssistantEvent(turn, f"answer {i}"))
        conversation.add(p.TurnEndEvent(turn, "done"))
    built_in: list[int] = []
    inline = Conversation.model_view

    def recording(self: Conversation, *args: object, **kwargs: object) -> object:
        built_in.append(threading.get_ident())
        return inline(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Conversation, "model_view", recording)
    host.replies.append(["Fine."])
    assert (await ended(host, loop.chat("one more")))["state"] == "done"
    assert built_in and threading.get_ident() not in built_in
    [request] = host.requests
    asked = next(i for i, e in enumerate(conversation.events) if e.get("text") == "one more")
    assert request == inline(conversation, request[0]["content"], conversation.events[: asked + 1]).messages
    assert len(request) == 1 + 2 * 300 + 1 and "one more" in request[-1]["content"]
