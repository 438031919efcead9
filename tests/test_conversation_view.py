"""The model's view built step by step (Conversation.model_view with `resume`, as each request of a turn asks
for it) is the view built from every event at once, after every event of conversations that exercise its
rules: native calls answered after the meantime, fences, edited and applied proposals, a turn that failed
before any reply, kernel news, notes, images displaced by newer ones, undo, redo and reset."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest

from interpreter_lsp import protocol as p
from interpreter_lsp.agent.conversation import Conversation
from interpreter_lsp.history import History
from test_images import gradient
from test_unit_tools import RISK, a_turn_with_three_calls, an_edited_and_an_applied_call, call


def picture_run(run_id: str, turn_id: str, pictures: int) -> p.RunEvent:
    outputs = [{"output_type": "display_data", "data": {"image/png": gradient(8 + i, 8)}} for i in range(pictures)]
    return p.RunEvent(run_id, "model", "python", "plot()", "ok", 1, "", outputs=outputs, turn_id=turn_id)


def events() -> list[Any]:
    return [
        *a_turn_with_three_calls(),
        p.UserEvent("t2", "fails", "fails"),
        p.TurnEndEvent("t2", "error", "no model"),  # no reply: its request is left out, found after it was read
        *an_edited_and_an_applied_call("t3", "file:///w/calc.py"),
        p.UserEvent("t4", "plot", "plot"),
        p.AssistantEvent("t4", "Plotting.\n```python\nplot()\n```"),
        picture_run("r4", "t4", 2),
        p.NoteEvent("a note for the model", "t4", for_model="the user closed the panel"),
        picture_run("r5", "t4", 2),  # the newest images: r4's first one is only described from here on
        p.AssistantEvent("t4", "Two plots."),
        p.TurnEndEvent("t4", "done"),
        p.UserEvent("t5", "again", "again"),
        p.AssistantEvent("t5", "", tool_calls=[call("A5", "print(5)")]),
        p.ProposalEvent("pa5", "t5", "python", "print(5)", RISK, False, True, "A5"),
        p.KernelEvent("python", "died", "died"),  # while the call is open: deferred
    ]


def views(c: Conversation, **options: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    stepwise = c.model_view("SYSTEM", resume=True, **options)
    whole = c.model_view("SYSTEM", **options)
    assert (stepwise.request, stepwise.summary) == (whole.request, whole.summary)
    return stepwise.messages, whole.messages


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("vision", [True, False])
def test_the_view_built_step_by_step_is_the_view_built_at_once(tmp_path: Path, native: bool, vision: bool) -> None:
    c = Conversation(History(tmp_path / "history.jsonl"), tmp_path)
    handed_out: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
    for number, event in enumerate(events()):
        c.add(event)
        stepwise, whole = views(c, native=native, vision=vision)
        assert stepwise == whole, f"after event {number}: {event}"
        handed_out.append((stepwise, copy.deepcopy(stepwise)))
    # The views handed out share messages with the later ones: none changed since.
    for view, as_it_was in handed_out:
        assert view == as_it_was
    stepwise, whole = views(c, native=native, vision=vision)
    assert stepwise == whole
    # Undo, redo and reset change the list in place: the next view is read again from every event.
    c.undo()
    assert views(c, native=native, vision=vision)[0] == views(c, native=native, vision=vision)[1]
    c.redo()
    stepwise, whole = views(c, native=native, vision=vision)
    assert stepwise == whole and stepwise[-1]["role"] in ("user", "tool")
    c.reset()
    c.add(p.UserEvent("t9", "fresh", "fresh"))
    stepwise, whole = views(c, native=native, vision=vision)
    assert stepwise == whole == [{"role": "system", "content": "SYSTEM"}, {"role": "user", "content": "fresh"}]


def test_a_long_conversation_costs_its_new_events_not_all_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request's view reads the events since the last one (~3 requests a turn), not the whole conversation."""
    monkeypatch.undo()  # conftest's check of every step, which builds each view twice
    c = Conversation(History(tmp_path / "history.jsonl"), tmp_path)
    for turn in range(300):
        t = f"t{turn}"
        c.add(p.UserEvent(t, f"step {turn}", f"step {turn}"))
        c.add(p.AssistantEvent(t, f"Running.\n```python\nprint({turn})\n```"))
        c.add(p.RunEvent(f"r{turn}", "model", "python", f"print({turn})", "ok", 1, f"{turn}\n", turn_id=t))
        c.add(p.AssistantEvent(t, "Done."))
        c.add(p.TurnEndEvent(t, "done"))
    c.model_view("SYSTEM", resume=True)
    c.add(p.UserEvent("next", "one more", "one more"))
    whole = min(_timed(lambda: c.model_view("SYSTEM")) for _ in range(5))
    stepwise = []
    for i in range(5):
        c.add(p.NoteEvent(f"note {i}", "next", for_model=f"note {i}"))
        stepwise.append(_timed(lambda: c.model_view("SYSTEM", resume=True)))
    assert c.model_view("SYSTEM", resume=True) == c.model_view("SYSTEM")
    # Both on one machine at one moment; the step's work is a copy of the messages, not their making.
    print(f"whole {whole * 1e3:.2f} ms, step {min(stepwise) * 1e3:.2f} ms")
    assert min(stepwise) < whole / 2, (stepwise, whole)


def _timed(build: Any) -> float:
    started = time.perf_counter()
    build()
    return time.perf_counter() - started
