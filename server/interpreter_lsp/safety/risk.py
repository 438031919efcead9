"""Risk assessment of code before it runs: the entry points the server calls for every proposal.

`assess` is the pure, synchronous rating; `rate` runs it off the event loop with a time budget, so that no
input (a 200 KB line, code nested a thousand deep) can hold up the server. Rating is linear in the input.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import time
from collections.abc import Collection
from pathlib import Path

from interpreter_lsp.protocol import Risk
from interpreter_lsp.safety.context import Context, Findings, OverBudget, new_context
from interpreter_lsp.safety.python import assess_python
from interpreter_lsp.safety.secret_text import secret_shaped
from interpreter_lsp.safety.shell import assess_shell
from interpreter_lsp.safety.visible import reason as hidden_characters

# Longer code is rated "high" whatever it holds: nobody reviews 200 KB, and what lies past the cap (a
# dangerous line after a huge comment) is not seen. What lies before it is still rated, for the reasons.
MAX_CHARS = 200_000
_ASSESSORS = {"python": assess_python, "shell": assess_shell}
# How long `rate` waits for a worker thread that overran its own deadline (the deadline is checked
# between statements and commands; one huge statement can take a little longer).
_GRACE = 0.5


def assess(
    code: str,
    language: str,
    root: Path,
    *,
    home: Path | None = None,
    written: Collection[Path] = (),
) -> Risk:
    """Rate `code` low / medium / high, with reasons in plain words.

    `language` is canonical ("python", "shell", or another kernel language); `root` is the workspace the
    code runs in; `home` the user's home directory (default: $HOME); `written` the files that earlier runs
    in this session created or changed (running or importing one of them is at least medium: its content
    was never rated). "Low" means every operation was understood and none is risky; anything the rules
    cannot understand is at least medium, and so is code holding characters that do not show as what they
    are (safety/visible.py).
    """
    return _assess(code, language, root, home=home, written=written, deadline=None)


async def rate(
    code: str,
    language: str,
    root: Path,
    *,
    home: Path | None = None,
    written: Collection[Path] = (),
    budget: float = 2.0,
) -> Risk:
    """`assess`, in a worker thread, within `budget` seconds: over budget is at least medium, with a reason."""
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + budget
    written = tuple(written)
    started: list[Context] = []  # the worker's context, to report what it found if it overruns
    work = loop.run_in_executor(
        None,
        lambda: _assess(code, language, root, home=home, written=written, deadline=deadline, started=started),
    )
    try:
        return await asyncio.wait_for(work, budget + _GRACE)
    except asyncio.TimeoutError:
        # The thread cannot be stopped from here; its own deadline ends it soon after. What it found so far
        # stands (a copy: the thread may still be adding).
        findings = started[0].findings.copy() if started else Findings()
        findings.add("medium", _over_budget(budget))
        return _risk(findings)


def _assess(
    code: str,
    language: str,
    root: Path,
    *,
    home: Path | None,
    written: Collection[Path],
    deadline: float | None,
    started: list[Context] | None = None,
) -> Risk:
    home_text = posixpath.normpath(str(home)) if home is not None else os.path.expanduser("~")
    ctx = new_context(root, _ASSESSORS, home=home_text, written=written, deadline=deadline)
    if started is not None:
        started.append(ctx)
    if len(code) > MAX_CHARS:
        ctx.add("high", f"the code is too long to check in full ({len(code)} characters): read it before it runs")
        cut = code.rfind("\n", 0, MAX_CHARS)
        code = code[: cut if cut > 0 else MAX_CHARS]
    assessor = _ASSESSORS.get(language)
    try:
        if assessor is not None:
            assessor(code, ctx)
        elif code.strip():
            ctx.add("medium", f"cannot assess {language or 'unknown'} code: read it before it runs")
    except OverBudget:
        ctx.add("medium", _over_budget(deadline))
    if (shape := secret_shaped(code)) is not None:
        ctx.add("medium", shape)
    # Whatever the code does, a person must be able to read it: low never holds what does not show (or
    # reorders what does), however harmless the operations the allowlist proved.
    if (hiding := hidden_characters(code)) is not None:
        ctx.add("medium", hiding)
    _unproven(ctx)
    return _risk(ctx.findings)


_SHOWN_UNPROVEN = 3


def _unproven(ctx: Context) -> None:
    """What the allowlist could not prove makes the code at least medium. When the rules already found
    something medium or high, their reasons say enough; otherwise the first few unproven operations are
    the reasons ("not on the allowlist: imports requests")."""
    if not ctx.unproven or ctx.findings.level() != "low":
        return
    for what in ctx.unproven[:_SHOWN_UNPROVEN]:
        ctx.add("medium", f"not on the allowlist: {what}")
    if len(ctx.unproven) > _SHOWN_UNPROVEN:
        ctx.add("medium", f"not on the allowlist: {len(ctx.unproven) - _SHOWN_UNPROVEN} more operations")


def _over_budget(budget: float | None) -> str:
    return "the code took too long to check in full: read it before it runs"


def _risk(findings: Findings) -> Risk:
    return Risk(level=findings.level(), reasons=findings.reasons())


__all__ = ["MAX_CHARS", "assess", "rate"]
