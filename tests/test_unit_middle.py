"""Unit tests of the middle layers, without processes: History (torn lines, reset, undo), Conversation (what the
model reads), RunManager (with a fake kernel), cells and Args."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from fakes import FakeKernel, FakePool
from interpreter_lsp import cells
from interpreter_lsp import protocol as p
from interpreter_lsp.agent.conversation import Conversation
from interpreter_lsp.arguments import Args, BadArguments
from interpreter_lsp.history import History, replay
from interpreter_lsp.runs import RunManager

# ---- History -------------------------------------------------------------------------------------------


def test_history_survives_a_torn_last_line_and_appends_on_a_fresh_line(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    history = History(path)
    history.append({"type": "user", "text": "one"})
    history.close()
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"type": "assistant", "te')  # a crash in the middle of a write
    again = History(path)
    assert [e["text"] for e in again.load()] == ["one"]
    again.append({"type": "user", "text": "two"})
    again.close()
    assert [e["text"] for e in History(path).load()] == ["one", "two"]


def test_replay_applies_reset_and_undo() -> None:
    events: list[dict[str, Any]] = [
        {"type": "user", "text": "a"},
        {"type": "assistant", "text": "A"},
        {"type": "reset"},
        {"type": "user", "text": "b"},
        {"type": "assistant", "text": "B"},
        {"type": "user", "text": "c"},
        {"type": "assistant", "text": "C"},
        {"type": "undo"},
    ]
    assert [e["text"] for e in replay(events)] == ["b", "B"]


def test_history_redacts_before_writing(tmp_path: Path) -> None:
    history = History(tmp_path / "h.jsonl", lambda e: json.loads(json.dumps(e).replace("sk-secret", "***")))
    history.append({"type": "user", "text": "my key is sk-secret"})
    history.close()
    assert "sk-secret" not in (tmp_path / "h.jsonl").read_text()


def test_an_unwritable_history_keeps_the_conversation_in_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    conversation = Conversation(History(blocker / "h.jsonl"))  # its parent is a file: cannot be created
    conversation.add(p.UserEvent("t-1", "hi", "hi"))
    assert conversation.events[0]["text"] == "hi"


# ---- Conversation ----------------------------------------------------------------------------------------


def test_usage_and_compactions_follow_adds_undo_redo_reset_and_a_reload(tmp_path: Path) -> None:
    """Tallied as events come (not rescanned at every step), and right after whatever takes events away."""
    path = tmp_path / "h.jsonl"
    conversation = Conversation(History(path))
    conversation.add(p.UserEvent("t-1", "one", "one"))
    conversation.add(p.UsageEvent("t-1", 100, 10, 0.5))
    conversation.add(p.CompactionEvent("summary of t-1", "t-1"))
    assert conversation.usage() == {"promptTokens": 100, "completionTokens": 10, "cost": 0.5}
    conversation.add(p.UserEvent("t-2", "two", "two"))
    conversation.add(p.UsageEvent("t-2", 200, 20, 0.25))
    conversation.add(p.CompactionEvent("summary of t-2", "t-2"))
    assert conversation.usage() == {"promptTokens": 300, "completionTokens": 30, "cost": 0.75}
    assert [c["summary"] for c in conversation.compactions()] == ["summary of t-1", "summary of t-2"]
    conversation.undo()  # takes back t-2, its usage and its compaction
    assert conversation.usage() == {"promptTokens": 100, "completionTokens": 10, "cost": 0.5}
    assert [c["summary"] for c in conversation.compactions()] == ["summary of t-1"]
    conversation.redo()
    assert conversation.usage()["promptTokens"] == 300 and len(conversation.compactions()) == 2
    conversation.close()
    again = Conversation(History(path))  # the same figures from the history on disk
    assert again.usage() == {"promptTokens": 300, "completionTokens": 30, "cost": 0.75}
    again.reset()
    assert again.usage() == {"promptTokens": 0, "completionTokens": 0, "cost": 0.0}
    assert again.compactions() == []
    again.add(p.UsageEvent("t-3", 7, 1, 0.0))
    assert again.usage()["promptTokens"] == 7
    again.close()



def test_model_messages_alternate_and_carry_runs_decisions_and_kernel_events(tmp_path: Path) -> None:
    c = Conversation(History(tmp_path / "h.jsonl"), tmp_path)
    c.add(p.UserEvent("t-1", "hi", "hi (with context)"))
    c.add(p.AssistantEvent("t-1", "Running it."))
    c.add(p.ProposalEvent("p-1", "t-1", "python", "print(1)", p.Risk("low"), False, True))
    c.add(p.DecisionEvent("p-1", "t-1", "approved", code="print(2)", edited=True))
    c.add(p.RunEvent("r-1", "model", "python", "print(2)", "ok", 3, "2\n", turn_id="t-1", proposal_id="p-1"))
    c.add(p.KernelEvent("python", "restarted", "restarted"))
    c.add(p.RunEvent("r-2", "user", "python", "x = 1", "ok", 3, ""))
    messages = c.model_messages("SYSTEM")
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    last = messages[-1]["content"]
    assert "edited your code" in last and "print(2)" in last
    assert "restarted the python kernel" in last
    assert "The user ran this python code themselves" in last


def test_usage_adds_up(tmp_path: Path) -> None:
    c = Conversation(History(tmp_path / "h.jsonl"))
    c.add(p.UsageEvent("t-1", 100, 10, 0.5))
    c.add(p.UsageEvent("t-2", 50, 5, 0.25))
    assert c.usage() == {"promptTokens": 150, "completionTokens": 15, "cost": 0.75}


def test_undo_drops_the_last_user_message_and_what_followed(tmp_path: Path) -> None:
    c = Conversation(History(tmp_path / "h.jsonl"))
    assert c.undo() is None
    c.add(p.UserEvent("t-1", "a", "a"))
    c.add(p.AssistantEvent("t-1", "A"))
    c.add(p.UserEvent("t-2", "b", "b"))
    c.add(p.AssistantEvent("t-2", "B"))
    assert c.undo()
    assert [e.get("text") for e in c.events] == ["a", "A"]
    c.close()
    assert [e.get("text") for e in Conversation(History(tmp_path / "h.jsonl")).events] == ["a", "A"]


def test_undo_takes_back_the_last_step_and_keeps_kernel_restarts(tmp_path: Path) -> None:
    """Undo takes back the last step: a cell the user ran by hand after a message is its own step, then the
    message with the model's answer and its turn's run. A kernel restart is not taken back (in the history,
    the panel and the model's view), and a reload replays the same."""
    c = Conversation(History(tmp_path / "h.jsonl"))
    c.add(p.UserEvent("t-1", "a", "a"))
    c.add(p.UserEvent("t-2", "b", "b"))
    c.add(p.AssistantEvent("t-2", "B"))
    c.add(p.RunEvent("r-model", "model", "python", "1", "ok", 1, "", turn_id="t-2", proposal_id="p-1"))
    c.add(p.TurnEndEvent("t-2", "done"))
    c.add(p.RunEvent("r-user", "user", "python", "x = 2", "ok", 1, ""))
    c.add(p.KernelEvent("python", "restarted", "The python kernel restarted."))

    def shown(events: list[dict]) -> list[tuple[str, str]]:
        return [(e["type"], e.get("text") or e.get("runId") or e.get("state")) for e in events]

    assert shown(c.undo() or []) == [("run", "r-user")]
    assert shown(c.events)[-2:] == [("turnEnd", "done"), ("kernel", "restarted")]
    assert [e["type"] for e in c.undo() or []] == ["user", "assistant", "run", "turnEnd"]
    kept = [("user", "a"), ("kernel", "restarted")]
    assert shown(c.events) == kept
    c.close()
    assert shown(Conversation(History(tmp_path / "h.jsonl")).events) == kept


# ---- RunManager with a fake kernel ----------------------------------------------------------------------


class _News:
    """Set whenever the run manager sends or records something. One Event per test's loop: Python 3.10
    binds an Event to the first loop that waits on it, and every test has a loop of its own."""

    def __init__(self) -> None:
        self._events: dict[asyncio.AbstractEventLoop, asyncio.Event] = {}

    def event(self) -> asyncio.Event:
        return self._events.setdefault(asyncio.get_running_loop(), asyncio.Event())

    def set(self) -> None:
        self.event().set()


_news = _News()


@pytest.fixture
def manager() -> tuple[RunManager, FakeKernel, list[tuple[str, dict[str, Any]]], list[Any]]:
    kernel = FakeKernel()
    sent: list[tuple[str, dict[str, Any]]] = []
    finished: list[Any] = []

    def send(method: str, params: dict[str, Any]) -> None:
        sent.append((method, params))
        _news.set()

    def record(result: Any) -> None:
        finished.append(result)
        _news.set()

    runs = RunManager(FakePool(kernel), send, model_limit=lambda: 100, on_finished=record)  # type: ignore[arg-type]
    return runs, kernel, sent, finished


async def _until(predicate: Any, timeout: float = 10) -> None:
    async def wait() -> None:
        while not predicate():
            _news.event().clear()
            await _news.event().wait()

    await asyncio.wait_for(wait(), timeout)


async def test_a_run_goes_queued_running_ok_and_is_recorded_after_its_final_status(manager: Any) -> None:
    runs, kernel, sent, finished = manager
    run = runs.start(
        "print(1)",
        "python",
        approval=runs.ledger.mint("print(1)", "python", "user"),
        source={"uri": "file:///a.py", "kind": "cell", "startLine": 0, "endLine": 2},
    )
    await _until(lambda: kernel.pending)
    kernel.finish("ok", stdout="1\n")
    result = await run.result
    assert result.state == "ok" and result.output_for_model == "1\n"
    states = [params["state"] for method, params in sent if method == p.RUN_STATUS]
    assert states == ["queued", "running", "ok"]
    queued = next(params for method, params in sent if method == p.RUN_STATUS)
    assert queued["code"] == "print(1)" and queued["source"]["kind"] == "cell"
    await _until(lambda: finished)
    assert finished[0].run_id == run.run_id


async def test_runs_take_turns_and_interrupt_cancels_the_queued_ones(manager: Any) -> None:
    runs, kernel, _sent, _finished = manager
    first = runs.start("a", "python", approval=runs.ledger.mint("a", "python", "user"))
    second = runs.start("b", "python", approval=runs.ledger.mint("b", "python", "user"))
    await _until(lambda: kernel.pending)
    assert kernel.submitted == ["a"]  # the second waits for the kernel's turn
    await runs.interrupt()
    assert (await first.result).state == "interrupted"
    assert (await second.result).state == "interrupted"
    assert kernel.submitted == ["a"] and kernel.interrupts >= 1


async def test_a_lost_interrupt_is_sent_again_even_when_a_waiter_gave_up_on_the_run(manager: Any) -> None:
    runs, kernel, sent, _finished = manager
    kernel.lose_interrupts = 1  # the first SIGINT lands before the kernel's handler is installed
    run = runs.start(
        "import time; time.sleep(1e6)",
        "python",
        approval=runs.ledger.mint("import time; time.sleep(1e6)", "python", "user"),
    )
    await _until(lambda: kernel.pending)
    waiter = asyncio.ensure_future(run.result)  # a turn awaiting the run, then cancelled with it
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    await asyncio.wait_for(runs.interrupt(), 30)
    assert kernel.interrupts >= 2
    finals = [params["state"] for method, params in sent if params.get("runId") == run.run_id]
    assert finals[-1] == "interrupted"


async def test_once_the_kernel_shows_the_interrupt_it_is_not_sent_again(manager: Any, monkeypatch: Any) -> None:
    """A second SIGINT while the kernel formats the first one's traceback could cost the run its reply (and
    the kernel its state, with the fallback restart): resending stops once KeyboardInterrupt is shown."""
    from interpreter_lsp import runs as runs_module

    monkeypatch.setattr(runs_module, "INTERRUPT_RESEND", 0.02)
    runs, kernel, _sent, _finished = manager
    kernel.lose_interrupts = 1  # and the first SIGINT is lost, so resending is needed at all
    kernel.slow_traceback = True
    run = runs.start("while True: pass", "python", approval=runs.ledger.mint("while True: pass", "python", "user"))
    await _until(lambda: kernel.pending)
    stopping = asyncio.ensure_future(runs.interrupt())
    await _until(lambda: kernel.interrupts >= 2, 30)
    await asyncio.sleep(0.5)  # 25 resend periods while the traceback is written: none may send again
    assert kernel.interrupts == 2
    kernel.finish("error")
    await asyncio.wait_for(stopping, 30)
    assert (await run.result).state == "interrupted"


async def test_a_timeout_stops_the_run(manager: Any) -> None:
    runs, kernel, _sent, _finished = manager
    run = runs.start(
        "while True: pass", "python", approval=runs.ledger.mint("while True: pass", "python", "user"), timeout=0.05
    )
    result = await asyncio.wait_for(run.result, 10)
    assert result.state == "timeout" and "run timeout" in (result.message or "")
    assert kernel.interrupts >= 1


# ---- cells and Args --------------------------------------------------------------------------------------


def test_cells_split_at_markers_and_keep_a_leading_cell() -> None:
    lines = ["import os", "# %% one", "a = 1", "// %% two", "b = 2"]
    assert cells.cells(lines) == [(0, 0), (1, 2), (3, 4)]
    assert cells.cell_at(lines, 2) == (1, 2)
    assert cells.cell_code(lines, 1, 2) == "a = 1"
    assert cells.cells(["print(1)"]) == []
    assert cells.cells(["", "# %%", "x"]) == [(1, 2)]  # blank lines before the first marker are no cell


def test_args_say_what_was_wrong_without_internal_names() -> None:
    with pytest.raises(BadArguments, match=r"takes one JSON object"):
        Args("interpreter.run", ["print(1)", "python"])
    args = Args("interpreter.run", [{"code": 42, "timeout": -1, "flag": "yes", "range": {"start": 1}}])
    for call, message in (
        (lambda: args.string("code"), "'code' must be a string; got 42"),
        (lambda: args.number("timeout"), "'timeout' must be a number ≥ 0"),
        (lambda: args.flag("flag"), "'flag' must be true or false"),
        (lambda: args.range("range"), "'range' must be a range"),
        (lambda: args.required("text"), "'text' is required"),
    ):
        with pytest.raises(BadArguments) as info:
            call()
        assert str(info.value).startswith(message) and "interpreter." not in str(info.value)
    assert Args("x", [None]).data == {} and Args("x", []).data == {}
