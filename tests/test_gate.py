"""The approval gate (gate.py): a decision is bound to the exact code and kernel, used once, and nothing
but the gate can start a run (RunManager.start redeems the gate's token first)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from fakes import FakeHost, FakeKernel, FakePool
from interpreter_lsp import protocol as p
from interpreter_lsp.agent.conversation import Conversation
from interpreter_lsp.gate import Approval, Gate, Ledger, NotApproved, code_hash
from interpreter_lsp.history import History
from interpreter_lsp.runs import RunManager
from interpreter_lsp.settings import Settings


@pytest.fixture
def runs() -> RunManager:
    return RunManager(FakePool(FakeKernel()), lambda _m, _p: None, model_limit=lambda: 100)  # type: ignore[arg-type]


async def test_a_decision_bound_to_one_code_cannot_run_another(runs: RunManager) -> None:
    approval = runs.ledger.mint("print('approved')", "python", "approved", "p-1")
    with pytest.raises(NotApproved, match="different code"):
        runs.start("import shutil; shutil.rmtree('/')", "python", approval=approval)
    assert runs.runs == {}
    # Spent by the refused attempt: not even the approved code runs with it afterwards.
    with pytest.raises(NotApproved, match="used already"):
        runs.start("print('approved')", "python", approval=approval)
    assert runs.runs == {}


async def test_the_kernel_is_part_of_the_binding(runs: RunManager) -> None:
    approval = runs.ledger.mint("ls", "python", "approved")
    with pytest.raises(NotApproved):
        runs.start("ls", "shell", approval=approval)
    assert runs.runs == {}


async def test_an_approval_runs_once(runs: RunManager) -> None:
    approval = runs.ledger.mint("1", "python", "approved")
    run = runs.start("1", "python", approval=approval)
    assert run.code_hash == code_hash("1", "python")
    with pytest.raises(NotApproved):
        runs.start("1", "python", approval=approval)
    assert list(runs.runs) == [run.run_id]
    await runs.drain()


async def test_a_token_not_minted_by_the_gate_is_refused(runs: RunManager) -> None:
    forged = Approval("0" * 32, "python", code_hash("print(1)", "python"), "approved")
    with pytest.raises(NotApproved):
        runs.start("print(1)", "python", approval=forged)
    other = Ledger().mint("print(1)", "python", "approved")  # another workspace's ledger
    with pytest.raises(NotApproved):
        runs.start("print(1)", "python", approval=other)
    with pytest.raises(TypeError):
        runs.start("print(1)", "python")  # type: ignore[call-arg]
    assert runs.runs == {}


async def test_an_approved_edit_is_bound_to_the_edited_code(tmp_path: Path, runs: RunManager) -> None:
    host = FakeHost(tmp_path, Settings())
    conversation = Conversation(History(tmp_path / "h.jsonl"), tmp_path)
    gate = Gate(host, conversation.record, runs.start, runs.ledger)
    proposal, event = await gate.propose("print('agent')", "python", turn_id="a-1", origin="agent", agent="codex 1")
    conversation.record(event)
    assert event.code_hash == code_hash("print('agent')", "python")
    shown = host.notes(p.PROPOSAL)[-1]
    assert (shown["origin"], shown["agent"]) == ("agent", "codex 1") and not shown["autoRun"]
    assert gate.run_now(proposal) is None  # auto-run is off: it waits
    assert runs.runs == {}
    run = gate.approve(proposal.proposal_id, "print('user')")
    assert run.code == "print('user')" and run.code_hash == code_hash("print('user')", "python")
    decision = next(e for e in conversation.events if e["type"] == "decision")
    assert decision["codeHash"] == run.code_hash and decision["edited"] is True and decision["agent"] == "codex 1"
    assert runs.ledger.open == 0
    await runs.drain()


async def test_the_policy_decides_auto_run_for_every_origin(tmp_path: Path, runs: RunManager) -> None:
    host = FakeHost(tmp_path, Settings(auto_run=True))
    gate = Gate(host, lambda _e: None, runs.start, runs.ledger)
    results: dict[Any, Any] = {}
    for origin in ("model", "agent"):
        for level in ("low", "medium", "high"):
            host.risk = p.Risk(level, [])  # type: ignore[arg-type]
            proposal, _ = await gate.propose("x = 1", "python", turn_id="t", origin=origin)
            results[(origin, level)] = proposal.auto_run
    assert results[("model", "low")] and results[("agent", "low")]
    for level in ("medium", "high"):
        assert results[("model", level)] is results[("agent", level)] is False
    await runs.drain()


async def test_a_run_interrupted_before_its_task_started_still_ends() -> None:
    """A run and an interrupt handled in one go (no await between): the run's task is cancelled before its
    first step, so its body (and the `finally` that reports how it ended) never runs. It must still end,
    "interrupted", for the editor and for whoever awaits it."""
    sent: list[tuple[str, dict[str, Any]]] = []
    runs = RunManager(FakePool(FakeKernel()), lambda m, prm: sent.append((m, prm)), model_limit=lambda: 100)  # type: ignore[arg-type]
    run = runs.start("x = 1", "python", approval=runs.ledger.mint("x = 1", "python", "user"))
    await runs.interrupt()  # no await before it: the run's task has not taken a step
    result = await asyncio.wait_for(run.result, 30)
    assert result.state == "interrupted"
    assert [prm["state"] for m, prm in sent if m == p.RUN_STATUS] == ["queued", "interrupted"]
    assert runs.runs == {}
