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


SANDBOX_NEEDED = (
    'auto-run of medium-risk code needs the sandbox (interpreter.sandbox = "bubblewrap"): waits for approval'
)


def decide(
    risk: Risk, *, auto_run: bool, auto_run_max_risk: str, trusted: bool, sandboxed: bool = False
) -> Decision:
    """Run a proposal now, or wait for approval? Untrusted workspaces never run; high risk always waits;
    medium runs by itself only with `autoRunMaxRisk: "medium"` *and* a sandboxed kernel (without the
    sandbox, "medium" acts as "low", and the reason says so)."""
    if not trusted:
        return Decision(False, "the workspace is not trusted: nothing runs")
    if not auto_run:
        return Decision(False, "auto-run is off: waits for approval")
    limit = auto_run_max_risk if auto_run_max_risk in AUTO_RUN_MAX_RISKS else "low"
    level = risk.level if risk.level in _ORDER else "high"  # an unknown level is treated as the worst
    if level == "high":
        return Decision(False, "high risk: waits for approval")
    if level == "medium" and limit == "medium" and not sandboxed:
        return Decision(False, f"medium risk: {SANDBOX_NEEDED}")
    if _ORDER[level] > _ORDER[limit]:
        return Decision(False, f"{level} risk is above autoRunMaxRisk ({limit}): waits for approval")
    return Decision(True, "")


def effective_max_risk(auto_run_max_risk: str, *, sandboxed: bool) -> tuple[str, str]:
    """The autoRunMaxRisk in force and, when it differs from the setting, why (for interpreter.status)."""
    limit = auto_run_max_risk if auto_run_max_risk in AUTO_RUN_MAX_RISKS else "low"
    if limit == "medium" and not sandboxed:
        return "low", 'autoRunMaxRisk "medium" acts as "low": the kernel is not sandboxed (interpreter.sandbox)'
    return limit, ""


SANDBOX_OFFER = (
    'Auto-run is on without the sandbox, so it runs only code proven harmless ("low"). Bubblewrap works '
    'here: set interpreter.sandbox = "bubblewrap" to let auto-run cover medium-risk code too, in the sandbox.'
)


def auto_run_scope(
    *, auto_run: bool, auto_run_max_risk: str, sandboxed: bool, offer: str | None = None
) -> dict[str, object]:
    """What auto-run covers here and why, for interpreter.status: with a working sandbox up to
    autoRunMaxRisk (medium at most); without one only code proven harmless (low), whatever the settings
    say; `offer` is the one line that offers the sandbox where bubblewrap works (the user decides)."""
    limit, _ = effective_max_risk(auto_run_max_risk, sandboxed=sandboxed)
    if not auto_run:
        scope: dict[str, object] = {"covers": "nothing", "sandboxed": sandboxed,
                                    "why": "auto-run is off: every proposal waits for approval"}
    elif sandboxed:
        scope = {"covers": limit, "sandboxed": True,
                 "why": f"the kernel runs in the sandbox: auto-run covers up to {limit} risk; high always waits"}
    else:
        scope = {"covers": "low", "sandboxed": False,
                 "why": "the kernel is not sandboxed: auto-run covers only code proven harmless (low), whatever "
                        "autoRunMaxRisk says; medium and high wait for approval"}
    if offer and auto_run and not sandboxed:
        scope["offer"] = offer
    return scope
