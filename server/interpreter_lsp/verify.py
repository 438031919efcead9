"""Verified export: the exported notebook re-run top to bottom in a fresh kernel, each code cell stamped
with a verdict in `metadata.interpreter_lsp.verify`, and the notebook with what a reader needs to
reproduce it (`metadata.interpreter_lsp.verify`: interpreter and package versions from the fresh kernel,
the seeds the cells set, sha-256 of the workspace input files the cells name).

The fresh kernel is a `Kernel` of the session's kind (KernelPool.fresh: the same kernelspec, environment,
limits and, when the session is sandboxed, the same bubblewrap wrapper, so what was approved to run
sandboxed never runs outside it) and runs on the one execution path (kernels/execution.py) that the
session's runs take; its outputs are recorded by notebook.OutputRecords as the session's were, so the two
sides are kept alike before they are compared. Verdicts: `identical`; `equivalent` (normalise.py names what
was forgiven); `differs: <cause>`; `not run` (an error the session did not have stopped the run).

Everything here is one asyncio task per verification (Workspace holds it by id, `interpreter.interrupt`
cancels it); comparisons, image decoding and hashing run in a worker thread.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import causes, normalise, notebook
from . import protocol as p
from .errors import UserError
from .kernels.backend import KernelStartError
from .kernels.kernel import Kernel
from .kernels.spare import start_fresh
from .notebook import OutputRecords
from .undo_notes import named

UNFINISHED = ("interrupted", "timeout", "died")  # session runs that did not end by themselves
STARTUP_TIMEOUT = 120.0  # a fresh kernel on a busy machine
VERSIONS_TIMEOUT = 30.0
INTERRUPT_WAIT = 10.0  # a cell past runTimeout: how long it has to stop after the interrupt

# Run in the fresh kernel in a namespace of its own (nothing is left in the user's): the interpreter, and the
# versions of the modules the cells import. packages_distributions() reads every installed distribution's
# file list (~0.2-0.5 s), so it is asked only for modules whose name is neither their distribution's nor the
# well-known one below (a shortcut, checked like any name: a wrong guess falls through to the full lookup).
_VERSIONS = """
import importlib.metadata as md, json, sys
KNOWN = {"sklearn": "scikit-learn", "PIL": "pillow", "cv2": "opencv-python", "yaml": "PyYAML",
         "bs4": "beautifulsoup4", "skimage": "scikit-image", "dateutil": "python-dateutil"}
found, missing = {}, []
for m in MODULES:
    if m in getattr(sys, "stdlib_module_names", ()) or m in sys.builtin_module_names:
        continue
    version = None
    for name in (m, KNOWN.get(m)):
        if name and version is None:
            try:
                version = md.version(name)
            except Exception:
                pass
    if version:
        found[m] = version
    else:
        missing.append(m)
if missing:
    dists = md.packages_distributions()
    for m in missing:
        for d in dists.get(m, []):
            try:
                found[m] = md.version(d)
                break
            except Exception:
                pass
result = json.dumps({"python": sys.version, "executable": sys.executable, "packages": found})
"""


def _versions_expression(modules: list[str]) -> str:
    code = f"MODULES = {modules!r}\n{_VERSIONS}"
    return f"(lambda ns: (exec({code!r}, ns), ns['result'])[1])({{}})"


@dataclass
class CellReport:
    cell: int  # the execution count in the notebook (In [n]): the n-th code cell
    verdict: str
    normalisations: list[str] = field(default_factory=list)
    diff: str = ""


@dataclass
class Session:
    """What the verification needs from the workspace, gathered on the event loop before it starts."""

    root: Path
    runs: list[dict[str, Any]]  # the surviving run events, in order (one per code cell)
    kernel: Kernel  # fresh (KernelPool.fresh): nothing ran in it; started and set up already if `started`
    runtime_dir: Path
    sandbox: str | None
    timeout: float | None
    dropped_runs: list[dict[str, Any]] = field(default_factory=list)  # dropped_runs(): undone or reset runs
    # The masking the session's outputs went through (ctx.redact_shown): the fresh outputs go through it too,
    # before they are compared and before any of their text (a diff) is written or answered.
    mask: Callable[[Any], Any] = lambda value: value
    started: bool = False  # a spare started ahead (kernels/spare.start_fresh)
    began: float | None = None  # time.monotonic() when the user's wait began (a spare's start may be in it)


def _code_cells(nb: Any) -> list[Any]:
    return [c for c in nb.cells if c.cell_type == "code"]


class _Cell:
    """The execution sink of one cell: its outputs recorded as the session's runs record theirs; an input
    request is refused (nothing answers one in a verification: the cell fails as it would unattended)."""

    def __init__(self) -> None:
        self.recorded = OutputRecords()

    def on_busy(self) -> None:
        pass

    def on_ended(self) -> None:
        pass

    def on_iopub(self, msg_type: str, content: dict[str, Any]) -> None:
        self.recorded.add(msg_type, content)

    async def on_input(self, prompt: str, password: bool) -> str | None:
        return None


async def _start(session: Session) -> None:
    if session.started:
        return
    # A start that fails ends what it made (Kernel.start); the kernel's owner shuts it down in any case.
    try:
        await asyncio.wait_for(start_fresh(session.kernel), STARTUP_TIMEOUT)
    except asyncio.TimeoutError as exc:
        raise UserError(f"The fresh kernel for verification did not start within {STARTUP_TIMEOUT:g} s. The "
                        "notebook was written without verdicts.") from exc
    except KernelStartError as exc:
        raise UserError(f"The fresh kernel for verification could not start: {exc}. The notebook was written "
                        "without verdicts.") from exc


async def _execute(session: Session, code: str) -> tuple[str, list[dict[str, Any]]]:
    """Run one cell: ("ok" | "error" | "timeout" | "died", its outputs recorded). Past runTimeout it is
    interrupted (and given INTERRUPT_WAIT to stop)."""
    cell = _Cell()
    done = session.kernel.submit(code, cell)
    try:
        finished, _ = await asyncio.wait({done}, timeout=session.timeout)
    except asyncio.CancelledError:
        done.cancel()
        raise
    if not finished:
        with contextlib.suppress(Exception):
            await session.kernel.interrupt()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(done), INTERRUPT_WAIT)
        return "timeout", cell.recorded.records
    reply = done.result()
    return ("died" if reply.status == "died" else reply.status), cell.recorded.records


async def _silent(session: Session, code: str, expression: str | None = None) -> str | None:
    reply = await asyncio.wait_for(
        session.kernel.execute(code, None, silent=True, user_expressions={"v": expression} if expression else None),
        VERSIONS_TIMEOUT,
    )
    if not expression:
        return None
    value = reply.content.get("user_expressions", {}).get("v", {}).get("data", {}).get("text/plain")
    return ast.literal_eval(value) if isinstance(value, str) else None


async def verify(nb: Any, session: Session, history_path: Path | None = None) -> dict[str, Any]:
    """Re-run `nb` (the export, which it stamps in place) and return the summary for the command's result. The
    session's kernel is its caller's to shut down, whatever happens here (verification.Verifications._verify)."""
    started = session.began if session.began is not None else time.monotonic()
    if history_path is not None:
        session.dropped_runs = await asyncio.to_thread(causes.dropped_runs, history_path)
    cells = _code_cells(nb)
    sources = [str(c.source) for c in cells]
    if not cells:
        raise UserError("There is nothing to verify: the conversation has no code that ran. The notebook was "
                        "written.")
    root_text = (str(session.root), str(session.root.resolve()))
    reports: list[CellReport] = []
    environment: dict[str, Any] = {}
    await _start(session)
    start_seconds = time.monotonic() - started
    stopped = False
    for index, source in enumerate(sources):
        number = index + 1
        if stopped:
            reports.append(CellReport(number, "not run"))
            continue
        state = session.runs[index].get("state") if index < len(session.runs) else "ok"
        if state in UNFINISHED:
            # An interrupted loop would run until a timeout again: it is not re-run, and says why.
            reports.append(CellReport(number, f"not run: the session's run ended {state}"))
            continue
        ended, records = await _execute(session, source)
        if ended in ("timeout", "died"):
            why = "timeout (past runTimeout)" if ended == "timeout" else "the fresh kernel died"
            reports.append(CellReport(number, f"differs: {why}"))
            stopped = True
            if ended == "died":
                break
            continue
        comparison = await asyncio.to_thread(
            lambda old=list(cells[index].outputs), new=records, n=number: normalise.compare(
                old, session.mask(notebook.outputs_of(new, n)), root_text
            )
        )
        if comparison.verdict == "differs":
            cause = causes.cause(index, comparison, sources, session, session.root)
            reports.append(CellReport(number, f"differs: {cause}", diff=comparison.diff))
            if comparison.new_error is not None:
                stopped = True  # like Run All: an error the session did not have ends the run
        else:
            reports.append(CellReport(number, comparison.verdict, comparison.normalisations))
    with contextlib.suppress(Exception):
        probe = _versions_expression(causes.imported_modules(sources))
        environment = json.loads(await _silent(session, "", probe) or "{}")
    reports += [CellReport(n, "not run") for n in range(len(reports) + 1, len(cells) + 1)]
    seconds = time.monotonic() - started
    inputs = await asyncio.to_thread(causes.input_hashes, sources, session.root)
    for cell, report in zip(cells, reports, strict=False):
        stamp: dict[str, Any] = {"verdict": report.verdict}
        if report.normalisations:
            stamp["normalisations"] = report.normalisations
        if report.diff:
            stamp["diff"] = report.diff
        cell.metadata.setdefault(p.VERIFY_METADATA, {})["verify"] = stamp
    differs = [
        {"cell": r.cell, "cause": r.verdict.removeprefix("differs: ")}
        for r in reports
        if r.verdict.startswith("differs")
    ]
    summary = {
        "cells": len(reports),
        "identical": sum(r.verdict == "identical" for r in reports),
        "equivalent": sum(r.verdict == "equivalent" for r in reports),
        "differs": differs,
        "notRun": sum(r.verdict.startswith("not run") for r in reports),
        "seconds": round(seconds, 3),
        "startSeconds": round(start_seconds, 3),
        "sessionSeconds": round(sum(int(r.get("duration_ms", r.get("durationMs", 0)) or 0) for r in session.runs)
                                / 1000, 3),
        "sandbox": session.sandbox or "off (the session's kernels were not sandboxed)",
    }
    nb.metadata.setdefault(p.VERIFY_METADATA, {})["verify"] = {
        "python": environment.get("python"),
        "executable": environment.get("executable"),
        "packages": environment.get("packages", {}),
        "seeds": causes.seeds(sources),
        "inputFiles": inputs,
        "inputFilesFrom": "workspace files named as string literals in the cells (the files tracker records "
        "writes, not reads)",
        "tolerance": {"rtol": [normalise.RTOL_TIGHT, normalise.RTOL_LOOSE]},
        "summary": summary,
    }
    return summary


def note(path: str, summary: dict[str, Any]) -> tuple[str, str]:
    """The conversation's note of a verification: the panel's line, and what the model reads (so that the user
    can ask it why a cell differs, and it knows which and why)."""
    same = summary["identical"] + summary["equivalent"]
    differs = [f"cell {d['cell']} differs: {d['cause']}" for d in summary["differs"]]
    if summary["notRun"]:
        differs.append(f"{summary['notRun']} not run (after an error or the stop)")
    verdict = "reproduces" if not differs else "does not fully reproduce"
    text = f"Verified export {path}: {verdict} ({same} of {summary['cells']} code cells as in the session)."
    put_back, lost = summary.get("filesPutBack") or [], summary.get("filesNotPutBack") or []
    files = ""
    if put_back:
        files += f" The re-run changed {len(put_back)} workspace file{'s' if len(put_back) != 1 else ''}: put back."
    if lost:
        files += f" Not put back: {named(lost)}."
    text += files
    for_model = (
        f"The user exported this conversation's code as the notebook {path} and re-ran it top to bottom in a fresh "
        f"kernel: {same} of {summary['cells']} code cells gave the session's output again (identical or "
        f"equivalent). " + ("; ".join(differs) + ". " if differs else "")
        + "Cells are numbered in the notebook's order (the surviving runs, in execution order)." + files
    )
    return text, for_model
