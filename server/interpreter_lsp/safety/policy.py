"""The approval policy: whether a proposal runs at once or waits for the user, and why."""

from __future__ import annotations

from dataclasses import dataclass

from interpreter_lsp.protocol import Risk

AUTO_RUN_MAX_RISKS = ("low", "medium")  # `high` never runs by itself, whatever the settings say
_ORDER = {"low": 0, "medium": 1, "high": 2}

UNTRUSTED_MESSAGE = (
    "This workspace is not trusted, so no code runs in it. Trust the workspace in your editor "
    "(VS Code: Manage Workspace Trust), then try again."
)


@dataclass(frozen=True)
class Decision:
    run_now: bool
    reason: str  # why it waits, in plain words ("" when it runs now)


def may_run(trusted: bool) -> str | None:
    """None if code may run in this workspace at all, else the message to show the user."""
    return None if trusted else UNTRUSTED_MESSAGE


def decide(risk: Risk, *, auto_run: bool, auto_run_max_risk: str, trusted: bool) -> Decision:
    """Run a proposal now, or wait for approval? Untrusted workspaces never run; high risk always waits."""
    if not trusted:
        return Decision(False, "the workspace is not trusted: nothing runs")
    if not auto_run:
        return Decision(False, "auto-run is off: waits for approval")
    limit = auto_run_max_risk if auto_run_max_risk in AUTO_RUN_MAX_RISKS else "low"
    level = risk.level if risk.level in _ORDER else "high"  # an unknown level is treated as the worst
    if level == "high":
        return Decision(False, "high risk: waits for approval")
    if _ORDER[level] > _ORDER[limit]:
        return Decision(False, f"{level} risk is above autoRunMaxRisk ({limit}): waits for approval")
    return Decision(True, "")
