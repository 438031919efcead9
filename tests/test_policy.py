"""The approval policy: what runs by itself, what waits, and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import start_session, stop_session
from interpreter_lsp import protocol as p
from interpreter_lsp.kernels.sandbox import bwrap_available
from interpreter_lsp.protocol import Risk
from interpreter_lsp.safety.policy import (
    SANDBOX_OFFER,
    UNTRUSTED_MESSAGE,
    Decision,
    auto_run_scope,
    decide,
    effective_max_risk,
    may_run,
)

LOW, MEDIUM, HIGH = Risk("low"), Risk("medium", ["installs packages"]), Risk("high", ["deletes your home"])


def test_nothing_runs_by_itself_when_auto_run_is_off() -> None:
    for risk in (LOW, MEDIUM, HIGH):
        decision = decide(risk, auto_run=False, auto_run_max_risk="medium", trusted=True)
        assert decision == Decision(False, "auto-run is off: waits for approval")


def test_auto_run_runs_low_risk_only_by_default() -> None:
    assert decide(LOW, auto_run=True, auto_run_max_risk="low", trusted=True) == Decision(True, "")
    waits = decide(MEDIUM, auto_run=True, auto_run_max_risk="low", trusted=True)
    assert not waits.run_now
    assert waits.reason == "medium risk is above autoRunMaxRisk (low): waits for approval"


def test_auto_run_max_risk_medium_widens_it_only_in_the_sandbox() -> None:
    assert decide(MEDIUM, auto_run=True, auto_run_max_risk="medium", trusted=True, sandboxed=True).run_now
    assert decide(LOW, auto_run=True, auto_run_max_risk="medium", trusted=True, sandboxed=False).run_now


@pytest.mark.parametrize("sandboxed", [False, None])
def test_medium_without_the_sandbox_acts_as_low_and_says_why(sandboxed: bool | None) -> None:
    kwargs = {} if sandboxed is None else {"sandboxed": sandboxed}  # not saying is not sandboxed
    decision = decide(MEDIUM, auto_run=True, auto_run_max_risk="medium", trusted=True, **kwargs)
    assert decision == Decision(
        False,
        'medium risk: auto-run of medium-risk code needs the sandbox (interpreter.sandbox = "bubblewrap"): '
        "waits for approval",
    )
    assert effective_max_risk("medium", sandboxed=False) == (
        "low", 'autoRunMaxRisk "medium" acts as "low": the kernel is not sandboxed (interpreter.sandbox)'
    )
    assert effective_max_risk("medium", sandboxed=True) == ("medium", "")
    assert effective_max_risk("low", sandboxed=False) == ("low", "")


@pytest.mark.parametrize("limit", ["low", "medium", "high", "anything"])
def test_high_risk_never_runs_by_itself(limit: str) -> None:
    decision = decide(HIGH, auto_run=True, auto_run_max_risk=limit, trusted=True, sandboxed=True)
    assert decision == Decision(False, "high risk: waits for approval")


def test_an_unknown_max_risk_falls_back_to_low() -> None:
    assert not decide(MEDIUM, auto_run=True, auto_run_max_risk="high", trusted=True).run_now
    assert decide(LOW, auto_run=True, auto_run_max_risk="bogus", trusted=True).run_now


def test_an_unknown_risk_level_is_treated_as_high() -> None:
    odd = Risk("catastrophic")  # type: ignore[arg-type]
    assert not decide(odd, auto_run=True, auto_run_max_risk="medium", trusted=True, sandboxed=True).run_now


def test_untrusted_workspace_runs_nothing() -> None:
    for risk in (LOW, MEDIUM, HIGH):
        decision = decide(risk, auto_run=True, auto_run_max_risk="medium", trusted=False, sandboxed=True)
        assert decision == Decision(False, "the workspace is not trusted: nothing runs")
    assert may_run(False) == UNTRUSTED_MESSAGE
    assert "not trusted" in UNTRUSTED_MESSAGE and "Trust" in UNTRUSTED_MESSAGE
    assert may_run(True) is None


def test_decision_is_frozen() -> None:
    decision = decide(LOW, auto_run=True, auto_run_max_risk="low", trusted=True)
    with pytest.raises(AttributeError):
        decision.run_now = False  # type: ignore[misc]


def test_without_the_sandbox_auto_run_covers_only_proven_low_code_whatever_the_settings() -> None:
    """Issue 18, point 3: the settings cannot widen auto-run past "low" outside the sandbox; status says why."""
    for limit in ("low", "medium", "high"):
        assert decide(LOW, auto_run=True, auto_run_max_risk=limit, trusted=True, sandboxed=False).run_now
        assert not decide(MEDIUM, auto_run=True, auto_run_max_risk=limit, trusted=True, sandboxed=False).run_now
    scope = auto_run_scope(auto_run=True, auto_run_max_risk="medium", sandboxed=False)
    assert scope["covers"] == "low" and scope["sandboxed"] is False
    assert "not sandboxed" in str(scope["why"]) and "proven harmless" in str(scope["why"])
    assert "offer" not in scope  # only where bubblewrap was found to work


def test_with_the_sandbox_auto_run_goes_up_to_the_setting_and_high_always_waits() -> None:
    assert decide(MEDIUM, auto_run=True, auto_run_max_risk="medium", trusted=True, sandboxed=True).run_now
    assert not decide(MEDIUM, auto_run=True, auto_run_max_risk="low", trusted=True, sandboxed=True).run_now
    assert not decide(HIGH, auto_run=True, auto_run_max_risk="medium", trusted=True, sandboxed=True).run_now
    assert auto_run_scope(auto_run=True, auto_run_max_risk="medium", sandboxed=True)["covers"] == "medium"
    assert auto_run_scope(auto_run=True, auto_run_max_risk="high", sandboxed=True)["covers"] == "low"
    assert auto_run_scope(auto_run=False, auto_run_max_risk="medium", sandboxed=True)["covers"] == "nothing"


def test_the_sandbox_offer_is_one_line_and_only_with_auto_run_on_outside_the_sandbox() -> None:
    offered = auto_run_scope(auto_run=True, auto_run_max_risk="low", sandboxed=False, offer=SANDBOX_OFFER)
    assert offered["offer"] == SANDBOX_OFFER and "\n" not in SANDBOX_OFFER
    assert 'interpreter.sandbox = "bubblewrap"' in SANDBOX_OFFER
    assert "offer" not in auto_run_scope(auto_run=False, auto_run_max_risk="low", sandboxed=False, offer=SANDBOX_OFFER)
    assert "offer" not in auto_run_scope(auto_run=True, auto_run_max_risk="low", sandboxed=True, offer=SANDBOX_OFFER)


async def test_status_says_what_auto_run_covers_and_offers_the_sandbox_once(workspace_root: Path, home: Path) -> None:
    """Through the server: auto-run on, sandbox off. Status says auto-run covers only proven-low code and why;
    where bubblewrap works the editor is told, in one line, how to turn the sandbox on, and nothing changes."""
    s = await start_session(workspace_root, home, configuration={"autoRun": True, "autoRunMaxRisk": "medium"})
    try:
        status = await s.command(p.STATUS, {})
        scope = status["autoRunScope"]
        assert scope["covers"] == "low" and scope["sandboxed"] is False
        assert "proven harmless" in scope["why"]
        if bwrap_available() is None:
            await s.wait_for(lambda: any(m.message == SANDBOX_OFFER for m in s.client.messages),
                             what="the one-line sandbox offer")
            status = await s.command(p.STATUS, {})
            assert status["autoRunScope"]["offer"] == SANDBOX_OFFER
            assert status["autoRunScope"]["covers"] == "low"  # offered, not applied
        assert sum(m.message == SANDBOX_OFFER for m in s.client.messages) <= 1
    finally:
        await stop_session(s)
