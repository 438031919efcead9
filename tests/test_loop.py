"""The interpreter loop end to end: a real LSP client, the real server and kernel, real litellm over real
HTTP to a scripted OpenAI-compatible server (only the model's words are scripted)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from harness import DEFAULT_WAIT, Session, start_session, stop_session
from interpreter_lsp import protocol as p
from scripted_model import ScriptedModel

FENCE = "```"


def py(code: str, before: str = "Let me check.", after: str = "") -> str:
    return f"{before}\n{FENCE}python\n{code}\n{FENCE}\n{after}"


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


def model_settings(model: ScriptedModel, **extra: Any) -> dict[str, Any]:
    return {"model": "openai/scripted", "apiBase": model.base_url, "apiKey": "sk-test-key-1234", "maxRetries": 2,
            **extra}


@pytest.fixture
async def chat(workspace_root: Path, home: Path, model: ScriptedModel) -> AsyncIterator[Session]:
    s = await start_session(workspace_root, home, configuration=model_settings(model))
    try:
        yield s
    finally:
        await stop_session(s)


def turn_states(s: Session, turn_id: str) -> list[str]:
    """The turn's states as the user sees them change ("thinking" is sent again with the context's use)."""
    states = [n["state"] for n in s.notes[p.TURN_STATUS] if n["turnId"] == turn_id]
    return [state for i, state in enumerate(states) if i == 0 or states[i - 1] != state]


async def turn_end(s: Session, turn_id: str, timeout: float = DEFAULT_WAIT) -> dict[str, Any]:
    def final() -> dict[str, Any] | None:
        for n in s.notes[p.TURN_STATUS]:
            if n["turnId"] == turn_id and n["state"] in p.FINAL_TURN_STATES:
                return n
        return None

    return await s.wait_for(final, timeout, f"turn {turn_id} to end")


async def next_proposal(s: Session, turn_id: str, index: int = 0, timeout: float = DEFAULT_WAIT) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        props = [n for n in s.notes[p.PROPOSAL] if n["turnId"] == turn_id]
        return props[index] if len(props) > index else None

    return await s.wait_for(found, timeout, f"proposal {index} of {turn_id}")


def streamed_text(s: Session, turn_id: str) -> str:
    msgs = [n for n in s.notes[p.MESSAGE] if n["turnId"] == turn_id]
    assert [m["seq"] for m in msgs] == list(range(len(msgs)))
    return "".join(m["delta"] for m in msgs)


def last_user_content(request: dict[str, Any]) -> str:
    return request["messages"][-1]["content"]


async def test_full_loop(chat: Session, model: ScriptedModel) -> None:
    model.reply(py("import platform\nprint(6 * 7)", before="I'll compute it."))
    model.reply("The answer is 42.")
    turn = (await chat.command(p.CHAT, {"text": "What is six times seven?"}))["turnId"]
    proposal = await next_proposal(chat, turn)
    assert proposal["language"] == "python"
    assert proposal["code"] == "import platform\nprint(6 * 7)"
    assert proposal["risk"]["level"] == "low"
    assert proposal["autoRun"] is False
    await chat.wait_for(lambda: "awaiting-approval" in turn_states(chat, turn), what="awaiting approval")
    run_id = (await chat.command(p.APPROVE, {"proposalId": proposal["proposalId"]}))["runId"]
    assert (await chat.finished(run_id))["state"] == "ok"
    assert chat.text(run_id) == "42\n"
    end = await turn_end(chat, turn)
    assert end["state"] == "done"
    assert streamed_text(chat, turn).endswith("The answer is 42.")
    second = model.wait_requests(2, 60)[1]
    assert "42" in last_user_content(second)
    assert turn_states(chat, turn)[:2] == ["thinking", "awaiting-approval"]
    status = await chat.command(p.STATUS, {})
    assert status["model"] == "openai/scripted"
    assert status["usage"]["promptTokens"] > 0


async def test_nothing_runs_before_approval_and_reject_tells_the_model(chat: Session, model: ScriptedModel) -> None:
    model.reply(py("open('made.txt', 'w').write('x')"))
    turn = (await chat.command(p.CHAT, {"text": "make a file"}))["turnId"]
    proposal = await next_proposal(chat, turn)
    await chat.wait_for(lambda: "awaiting-approval" in turn_states(chat, turn), what="awaiting approval")
    assert not chat.notes[p.RUN_STATUS]
    assert not (chat.root / "made.txt").exists()
    await chat.command(p.REJECT, {"proposalId": proposal["proposalId"]})
    end = await turn_end(chat, turn)
    assert (end["state"], end["message"]) == ("done", "Declined: the code did not run.")
    assert [n["state"] for n in chat.notes[p.PROPOSAL_STATUS]] == ["rejected"]
    assert not (chat.root / "made.txt").exists()
    model.reply("Understood.")
    turn2 = (await chat.command(p.CHAT, {"text": "ok"}))["turnId"]
    await turn_end(chat, turn2)
    second = model.wait_requests(2, 60)[1]
    rejection = "\n".join(m["content"] for m in second["messages"] if m["role"] == "user")
    assert "declined" in rejection
    with pytest.raises(JsonRpcException, match=r"already|No proposal"):
        await chat.command(p.APPROVE, {"proposalId": proposal["proposalId"]})


async def test_a_rejection_with_a_reason_asks_the_model_again(chat: Session, model: ScriptedModel) -> None:
    model.reply(py("open('made.txt', 'w').write('x')"))
    model.reply(py("open('made.md', 'w').write('x')", before="Markdown then."))
    model.reply("Done.")
    turn = (await chat.command(p.CHAT, {"text": "make a file"}))["turnId"]
    first = await next_proposal(chat, turn)
    await chat.command(p.REJECT, {"proposalId": first["proposalId"], "reason": "use markdown, not text"})
    second = await next_proposal(chat, turn, index=1)
    assert second["code"] == "open('made.md', 'w').write('x')"
    asked = model.wait_requests(2, 60)[1]
    assert "use markdown, not text" in last_user_content(asked)
    statuses = [(n["proposalId"], n["state"], n.get("reason")) for n in chat.notes[p.PROPOSAL_STATUS]]
    assert statuses == [(first["proposalId"], "rejected", "use markdown, not text")]
    run_id = (await chat.command(p.APPROVE, {"proposalId": second["proposalId"]}))["runId"]
    assert (await chat.finished(run_id))["state"] == "ok"
    assert (await turn_end(chat, turn))["state"] == "done"
    assert (chat.root / "made.md").exists() and not (chat.root / "made.txt").exists()


async def test_state_across_turns_and_error_reaches_the_model(chat: Session, model: ScriptedModel) -> None:
    model.reply(py("data = [1, 2, 3]"))
    model.reply("Stored.")
    turn = (await chat.command(p.CHAT, {"text": "store data"}))["turnId"]
    prop = await next_proposal(chat, turn)
    await chat.command(p.APPROVE, {"proposalId": prop["proposalId"]})
    await turn_end(chat, turn)

    model.reply(py("print(sum(dta))"))
    model.reply(py("print(sum(data))", before="Typo, fixing."))
    model.reply("The sum is 6.")
    turn = (await chat.command(p.CHAT, {"text": "sum it"}))["turnId"]
    bad = await next_proposal(chat, turn)
    run_id = (await chat.command(p.APPROVE, {"proposalId": bad["proposalId"]}))["runId"]
    assert (await chat.finished(run_id))["state"] == "error"
    fix = await next_proposal(chat, turn, 1)
    after_error = model.wait_requests(4, 60)[3]
    assert "NameError" in last_user_content(after_error) and "dta" in last_user_content(after_error)
    run_id = (await chat.command(p.APPROVE, {"proposalId": fix["proposalId"]}))["runId"]
    await chat.finished(run_id)
    assert chat.text(run_id) == "6\n"
    assert (await turn_end(chat, turn))["state"] == "done"


async def test_edited_code_runs_and_the_model_sees_what_ran(chat: Session, model: ScriptedModel) -> None:
    model.reply(py("print('original')"))
    model.reply("Done.")
    turn = (await chat.command(p.CHAT, {"text": "print something"}))["turnId"]
    prop = await next_proposal(chat, turn)
    run_id = (await chat.command(p.APPROVE, {"proposalId": prop["proposalId"], "code": "print('edited')"}))["runId"]
    await chat.finished(run_id)
    assert chat.text(run_id) == "edited\n"
    await turn_end(chat, turn)
    assert "print('edited')" in last_user_content(model.wait_requests(2, 60)[1])


async def test_auto_run_runs_low_risk_and_high_risk_still_waits(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    s = await start_session(workspace_root, home, configuration=model_settings(model, autoRun=True))
    try:
        model.reply(py("print('auto')"))
        model.reply(f"Now cleaning up.\n{FENCE}bash\nrm -rf ~\n{FENCE}")
        turn = (await s.command(p.CHAT, {"text": "go"}))["turnId"]
        first = await next_proposal(s, turn)
        assert first["autoRun"] is True
        risky = await next_proposal(s, turn, 1)
        assert risky["language"] == "shell"
        assert risky["risk"]["level"] == "high" and risky["risk"]["reasons"]
        assert risky["autoRun"] is False
        await s.wait_for(lambda: turn_states(s, turn)[-1] == "awaiting-approval", what="the high-risk proposal waits")
        runs = [n for n in s.notes[p.RUN_STATUS] if n.get("proposalId") == first["proposalId"]]
        assert runs and s.text(runs[0]["runId"]) == "auto\n"
        assert not [n for n in s.notes[p.RUN_STATUS] if n.get("proposalId") == risky["proposalId"]]
        await s.command(p.REJECT, {"proposalId": risky["proposalId"]})
        await turn_end(s, turn)
    finally:
        await stop_session(s)


async def test_an_auto_run_block_runs_as_soon_as_it_is_shown_while_the_reply_goes_on(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    """The reply stops in the middle (the model goes silent after its block): the block, shown, runs
    meanwhile; nothing of it is lost when the user then stops the turn, and the model reads its output next."""
    s = await start_session(workspace_root, home, configuration=model_settings(model, autoRun=True))
    try:
        model.stall(py("print('ran early')", after="It will print a greeting"))
        turn = (await s.command(p.CHAT, {"text": "go"}))["turnId"]
        shown = await next_proposal(s, turn)
        assert shown["autoRun"] is True
        run = await s.wait_for(
            lambda: next((n for n in s.notes[p.RUN_STATUS] if n.get("proposalId") == shown["proposalId"]), None),
            what="the run of the block",
        )
        assert (await s.finished(run["runId"]))["state"] == "ok"
        assert s.text(run["runId"]) == "ran early\n"
        assert not [m for m in s.notes[p.MESSAGE] if m["turnId"] == turn and m["done"]], "the reply had not ended"
        await s.command(p.INTERRUPT, {})
        assert (await turn_end(s, turn, 60))["state"] == "cancelled"
        model.reply("It printed.")
        turn2 = (await s.command(p.CHAT, {"text": "and?"}))["turnId"]
        await turn_end(s, turn2)
        assert "ran early" in json.dumps(model.requests[-1]["messages"])
    finally:
        await stop_session(s)


async def test_an_auto_run_block_after_one_that_waits_does_not_run_before_it(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    s = await start_session(workspace_root, home, configuration=model_settings(model, autoRun=True))
    try:
        model.reply(f"First this.\n{FENCE}bash\nrm -rf ~\n{FENCE}\n" + py("print('second')", before="Then:"))
        turn = (await s.command(p.CHAT, {"text": "go"}))["turnId"]
        risky, second = await next_proposal(s, turn), await next_proposal(s, turn, 1)
        assert (risky["autoRun"], second["autoRun"]) == (False, True)
        await s.wait_for(lambda: turn_states(s, turn)[-1] == "awaiting-approval", what="the risky one waits")
        assert not [n for n in s.notes[p.RUN_STATUS] if n.get("turnId") == turn]
        await s.command(p.REJECT, {"proposalId": risky["proposalId"]})
        await turn_end(s, turn)
        assert not [n for n in s.notes[p.RUN_STATUS] if n.get("turnId") == turn]
        expired = [n for n in s.notes[p.PROPOSAL_STATUS] if n["proposalId"] == second["proposalId"]]
        assert [n["state"] for n in expired] == ["expired"]
    finally:
        await stop_session(s)


async def test_interrupt_while_streaming(chat: Session, model: ScriptedModel) -> None:
    held = model.hold()
    turn = (await chat.command(p.CHAT, {"text": "think hard"}))["turnId"]
    assert await asyncio.to_thread(held.received.wait, 60), "the request never reached the model"
    await chat.command(p.INTERRUPT, {})
    end = await turn_end(chat, turn, 60)
    assert end["state"] == "cancelled"
    assert await held.wait_disconnected(30), "the HTTP stream was not closed"
    model.reply("Still here.")
    turn2 = (await chat.command(p.CHAT, {"text": "hello again"}))["turnId"]
    assert (await turn_end(chat, turn2))["state"] == "done"


async def test_interrupt_while_running(chat: Session, model: ScriptedModel) -> None:
    model.reply(py("import time\ntime.sleep(1e6)"))
    turn = (await chat.command(p.CHAT, {"text": "wait forever"}))["turnId"]
    prop = await next_proposal(chat, turn)
    run_id = (await chat.command(p.APPROVE, {"proposalId": prop["proposalId"]}))["runId"]
    await chat.wait_for(lambda: any(s["state"] == "running" for s in chat.statuses(run_id)), what="running")
    await chat.command(p.INTERRUPT, {})
    assert (await chat.finished(run_id, 60))["state"] == "interrupted"
    assert (await turn_end(chat, turn, 60))["state"] == "cancelled"
    assert len(model.requests) == 1  # the loop stopped: the model was not asked again


async def test_rate_limit_then_success(chat: Session, model: ScriptedModel) -> None:
    model.fail(429, "slow down", retry_after=0.2)
    model.reply("Hello after waiting.")
    turn = (await chat.command(p.CHAT, {"text": "hi"}))["turnId"]
    assert (await turn_end(chat, turn))["state"] == "done"
    assert streamed_text(chat, turn) == "Hello after waiting."
    assert len(model.requests) == 2


async def test_server_errors_until_retries_end(chat: Session, model: ScriptedModel) -> None:
    model.fail(500, "boom", times=3)
    turn = (await chat.command(p.CHAT, {"text": "hi"}))["turnId"]
    end = await turn_end(chat, turn)
    assert end["state"] == "error"
    assert "500" in end["message"] or "server" in end["message"].lower()
    assert "sk-test-key-1234" not in json.dumps(chat.notes)
    history = await chat.command(p.HISTORY, {})
    assert [m["type"] for m in history["messages"]][:1] == ["user"]  # the conversation is intact


async def test_malformed_and_stalled_streams_end_the_turn_with_an_error(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    s = await start_session(workspace_root, home, configuration=model_settings(model, streamStallTimeout=1))
    try:
        model.malformed()
        turn = (await s.command(p.CHAT, {"text": "one"}))["turnId"]
        end = await turn_end(s, turn)
        assert end["state"] == "error" and end["message"]
        model.stall("Partial answer")
        turn = (await s.command(p.CHAT, {"text": "two"}))["turnId"]
        end = await turn_end(s, turn, 60)
        assert end["state"] == "error"
        assert "stall" in end["message"].lower() or "no data" in end["message"].lower() or "1 s" in end["message"]
    finally:
        await stop_session(s)


async def test_no_model_configured(workspace_root: Path, home: Path) -> None:
    s = await start_session(workspace_root, home)
    try:
        turn = (await s.command(p.CHAT, {"text": "hi"}))["turnId"]
        end = await turn_end(s, turn)
        assert end["state"] == "error"
        assert "interpreter.model" in end["message"] and "ollama_chat/" in end["message"]
    finally:
        await stop_session(s)


async def test_bounded_output_to_the_model_while_the_user_gets_all(chat: Session, model: ScriptedModel) -> None:
    model.reply(py("for i in range(5000):\n    print('line', i)"))
    model.reply("That was long.")
    turn = (await chat.command(p.CHAT, {"text": "print a lot"}))["turnId"]
    prop = await next_proposal(chat, turn)
    run_id = (await chat.command(p.APPROVE, {"proposalId": prop["proposalId"]}))["runId"]
    await chat.finished(run_id)
    await turn_end(chat, turn)
    full = "".join(f"line {i}\n" for i in range(5000))
    assert chat.text(run_id) == full
    seen = last_user_content(model.wait_requests(2, 60)[1])
    assert "line 0\n" in seen and "line 4999" in seen
    assert "characters cut" in seen
    assert len(seen) < 2800 + 600


async def test_users_own_runs_are_in_the_models_context(chat: Session, model: ScriptedModel) -> None:
    await chat.run_and_wait("secret_number = 1234\nprint('set by hand')")
    model.reply("I see you set secret_number.")
    turn = (await chat.command(p.CHAT, {"text": "what did I do?"}))["turnId"]
    await turn_end(chat, turn)
    sent = json.dumps(model.wait_requests(1, 60)[0]["messages"])
    assert "secret_number = 1234" in sent and "set by hand" in sent
    assert "secret_number" in last_user_content(model.requests[0])  # the variables summary


async def test_apply_proposal_writes_into_the_selection(chat: Session, model: ScriptedModel) -> None:
    uri = chat.open("calc.py", "def add(a, b):\n    return a - b\n")
    model.reply(py("def add(a, b):\n    return a + b", before="Fixed:"))
    rng = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 16}}
    turn = (await chat.command(p.CHAT, {"text": "fix this", "uri": uri, "range": rng}))["turnId"]
    prop = await next_proposal(chat, turn)
    sent = last_user_content(model.wait_requests(1, 60)[0])
    assert "return a - b" in sent and "calc.py" in sent
    result = await chat.command(p.APPLY_PROPOSAL, {"proposalId": prop["proposalId"]})
    assert result == {"applied": True}
    [edit] = chat.edits
    [change] = edit.edit.document_changes
    assert change.text_document.uri == uri
    assert change.edits[0].new_text == "def add(a, b):\n    return a + b"
    assert change.edits[0].range.end.line == 1
    # Applying a waiting proposal decides it: it does not run, the turn ends, the model is told.
    end = await turn_end(chat, turn)
    assert (end["state"], end["message"]) == ("done", "Written into calc.py; it did not run.")
    assert [(n["state"], n["uri"]) for n in chat.notes[p.PROPOSAL_STATUS]] == [("applied", uri)]
    assert not chat.notes[p.RUN_STATUS]
    with pytest.raises(JsonRpcException, match=r"already decided|No proposal"):
        await chat.command(p.APPROVE, {"proposalId": prop["proposalId"]})
    # A decided proposal can still be written again; nothing else changes.
    again = {"proposalId": prop["proposalId"], "uri": uri, "range": {"start": {"line": 2, "character": 0},
                                                                     "end": {"line": 2, "character": 0}}}
    assert await chat.command(p.APPLY_PROPOSAL, again) == {"applied": True}
    model.reply("Good.")
    turn2 = (await chat.command(p.CHAT, {"text": "thanks"}))["turnId"]
    await turn_end(chat, turn2)
    told = "\n".join(m["content"] for m in model.wait_requests(2, 60)[1]["messages"] if m["role"] == "user")
    assert "wrote your python code into calc.py instead of running it" in told
    history = (await chat.command(p.HISTORY, {}))["messages"]
    decisions = [e for e in history if e["type"] == "decision"]
    assert [(d["decision"], d["uri"]) for d in decisions] == [("applied", uri)]


async def test_max_steps_stops_a_runaway_loop(workspace_root: Path, home: Path, model: ScriptedModel) -> None:
    s = await start_session(workspace_root, home, configuration=model_settings(model, autoRun=True, maxSteps=3))
    try:
        for i in range(5):
            model.reply(py(f"print({i})"))
        turn = (await s.command(p.CHAT, {"text": "loop"}))["turnId"]
        end = await turn_end(s, turn)
        assert end["state"] == "done" and "3 steps" in end["message"]
        assert len(model.requests) == 3
        assert len([n for n in s.notes[p.RUN_STATUS] if n["state"] == "ok"]) == 3
    finally:
        await stop_session(s)


async def test_undo_and_reset(chat: Session, model: ScriptedModel) -> None:
    model.reply("First answer.")
    model.reply("Second answer.")
    for text in ("first question", "second question"):
        turn = (await chat.command(p.CHAT, {"text": text}))["turnId"]
        await turn_end(chat, turn)
    await chat.command(p.UNDO, {})
    texts = [m.get("text") for m in (await chat.command(p.HISTORY, {}))["messages"] if m["type"] == "user"]
    assert texts == ["first question"]
    model.reply("Third.")
    turn = (await chat.command(p.CHAT, {"text": "third"}))["turnId"]
    await turn_end(chat, turn)
    sent = json.dumps(model.wait_requests(3, 60)[2]["messages"])
    assert "first question" in sent and "second question" not in sent
    await chat.command(p.RESET, {})
    assert (await chat.command(p.HISTORY, {}))["messages"] == []
    with pytest.raises(JsonRpcException, match="Nothing to undo"):
        await chat.command(p.UNDO, {})


async def test_history_survives_restart_and_kill(workspace_root: Path, home: Path, model: ScriptedModel) -> None:
    s = await start_session(workspace_root, home, configuration=model_settings(model))
    model.reply(py("print('ran before restart')"))
    model.reply("Done.")
    turn = (await s.command(p.CHAT, {"text": "remember me"}))["turnId"]
    prop = await next_proposal(s, turn)
    await s.command(p.APPROVE, {"proposalId": prop["proposalId"]})
    await turn_end(s, turn)
    await stop_session(s)

    s = await start_session(workspace_root, home, configuration=model_settings(model))
    try:
        events = (await s.command(p.HISTORY, {}))["messages"]
        assert [e["type"] for e in events if e["type"] in ("user", "proposal", "run", "assistant")] == [
            "user", "assistant", "proposal", "run", "assistant"
        ]
        model.hold()
        turn = (await s.command(p.CHAT, {"text": "in flight when killed"}))["turnId"]
        await asyncio.to_thread(model.wait_requests, 3, 60)
    finally:
        server = s.client._server
        assert server is not None
        server.kill()
        await server.wait()
        await s.client.stop()

    s = await start_session(workspace_root, home, configuration=model_settings(model))
    try:
        events = (await s.command(p.HISTORY, {}))["messages"]
        users = [e["text"] for e in events if e["type"] == "user"]
        assert users == ["remember me", "in flight when killed"]
        run = next(e for e in events if e["type"] == "run")
        assert run["state"] == "ok" and "ran before restart" in run["outputForModel"]
    finally:
        await stop_session(s)


async def test_export_notebook(chat: Session, model: ScriptedModel) -> None:
    import nbformat

    model.reply(py("print('in the notebook')"))
    model.reply("All done.")
    turn = (await chat.command(p.CHAT, {"text": "make a notebook"}))["turnId"]
    prop = await next_proposal(chat, turn)
    await chat.command(p.APPROVE, {"proposalId": prop["proposalId"]})
    await turn_end(chat, turn)
    result = await chat.command(p.EXPORT_NOTEBOOK, {"path": "out/session.ipynb"})
    path = Path(result["path"])
    assert path == chat.root / "out" / "session.ipynb"
    nb = nbformat.read(path, as_version=4)
    kinds = [c.cell_type for c in nb.cells]
    assert kinds == ["markdown", "markdown", "code", "markdown"]
    code = nb.cells[2]
    assert code.source == "print('in the notebook')"
    assert code.outputs[0]["text"] == "in the notebook\n"
    for bad in ("../escape.ipynb", "/tmp/abs.ipynb"):
        with pytest.raises(JsonRpcException, match="outside the workspace"):
            await chat.command(p.EXPORT_NOTEBOOK, {"path": bad})
    # An existing notebook is not overwritten unless asked.
    before = path.read_bytes()  # noqa: ASYNC240 - a small file
    with pytest.raises(JsonRpcException, match="exists already"):
        await chat.command(p.EXPORT_NOTEBOOK, {"path": "out/session.ipynb"})
    assert path.read_bytes() == before  # noqa: ASYNC240
    again = await chat.command(p.EXPORT_NOTEBOOK, {"path": "out/session.ipynb", "overwrite": True})
    assert again["path"] == str(path)


async def test_the_model_is_told_the_variables_the_last_run_left(chat: Session, model: ScriptedModel) -> None:
    """The variables come with the snapshot taken after each run (one kernel request, not two): each chat
    sees what the latest run left, a chat after a chat the same, and after a restart none (asked again)."""

    async def told(text: str) -> str:
        model.reply("Noted.")
        turn = (await chat.command(p.CHAT, {"text": text}))["turnId"]
        assert (await turn_end(chat, turn))["state"] == "done"
        return last_user_content(model.requests[-1])

    run_id, status = await chat.run_and_wait("x = 41")
    assert status["state"] == "ok", chat.text(run_id)
    assert "- x (int: 41)" in await told("what is x?")
    run_id, status = await chat.run_and_wait("x = 42\ny = 'new'")
    assert status["state"] == "ok", chat.text(run_id)
    seen = await told("and now?")
    assert "- x (int: 42)" in seen and "- y (str: 'new')" in seen, seen
    assert "- x (int: 42)" in await told("still?")  # no run since: the same answer
    await chat.command(p.RESTART_KERNEL, {"language": "python"})
    await chat.run_and_wait("z = 7")
    seen = await told("after the restart?")
    assert "- z (int: 7)" in seen and "- x (" not in seen, seen
    await chat.command(p.RESTART_KERNEL, {"language": "python"})
    assert "Variables in the python kernel" not in await told("and now, nothing run?")


@pytest.mark.parametrize("undo", [True, False], ids=["variables undo on", "variables undo off"])
async def test_the_variables_are_asked_right_after_each_run(
    workspace_root: Path, home: Path, model: ScriptedModel, undo: bool
) -> None:
    """The variables the next chat tells the model are asked right after each run (with its snapshot, or
    alone with variables undo off): the chat then asks the kernel nothing. (Undo off, the chat's start used to
    wait for a request of its own.) The kernel records every request of the server's own: a line of the names
    of each that asks user expressions, and a line for each call answered on the snapshots module's socket or
    comm (its `_answer`: the same for both)."""
    s = await start_session(workspace_root, home, configuration=model_settings(model, undoVariables=undo))
    try:
        run_id, status = await s.run_and_wait(
            "_shell = get_ipython()\n"
            "def _record(names):\n"
            "    if names:\n"
            "        with open('asked', 'a') as out:\n"
            "            out.write(' '.join(sorted(names)) + '\\n')\n"
            "_evaluate = _shell.user_expressions\n"
            "def _asked(expressions):\n"
            "    _record(expressions)\n"
            "    return _evaluate(expressions)\n"
            "_shell.user_expressions = _asked\n"
            "import sys as _sys\n"
            "_module = _sys.modules['_interpreter_lsp_snapshots']\n"
            "_answer = _module._answer\n"
            "def _answering(function, argument):\n"
            "    _record([function])\n"
            "    return _answer(function, argument)\n"
            "_module._answer = _answering\n"
            "x = 41\n"
        )
        assert status["state"] == "ok", s.text(run_id)
        asked = s.root / "asked"
        after_run = "variables\nsnap\n" if undo else "variables\n"  # one request: the variables, then the snapshot
        for _ in range(1200):  # the kernel writes it between requests, when no notification comes: polled, bounded
            if asked.exists() and asked.read_text() == after_run:
                break
            await asyncio.sleep(0.05)
        assert asked.exists() and asked.read_text() == after_run, "no request for the variables after the run"
        model.reply("Noted.")
        turn = (await s.command(p.CHAT, {"text": "what is x?"}))["turnId"]
        assert (await turn_end(s, turn))["state"] == "done"
        assert "- x (int: 41)" in last_user_content(model.requests[-1])
        assert asked.read_text() == after_run
    finally:
        await stop_session(s)


async def test_the_installed_kernels_languages_reach_the_model_without_holding_the_server(
    workspace_root: Path, home: Path, model: ScriptedModel
) -> None:
    """The system prompt names the languages of the installed kernelspecs. Listing them waits for
    jupyter_client's import, and a chat sent as the server started held the event loop for it (~0.2 s of its
    first delta). They are listed in a thread while the python kernel starts; once that start is over (its
    progress ended), every request names them."""
    from lsprotocol.types import WorkDoneProgressEnd

    data = home / "jupyter data"
    spec = data / "kernels" / "fake-r"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps({"argv": ["false", "{connection_file}"], "display_name": "Fake R", "language": "R"})
    )
    s = await start_session(
        workspace_root, home, configuration=model_settings(model), env={"JUPYTER_PATH": str(data)}
    )
    try:
        await s.wait_for(
            lambda: any(isinstance(report, WorkDoneProgressEnd)
                        for reports in s.client.progress_reports.values() for report in reports),
            DEFAULT_WAIT, "the python kernel's start",
        )
        model.reply("Noted.")
        turn = (await s.command(p.CHAT, {"text": "which languages can you run?"}))["turnId"]
        await turn_end(s, turn)
        system = model.wait_requests(1, 60)[0]["messages"][0]["content"]
        assert "Languages: python, shell, r." in system, system
    finally:
        await stop_session(s)
