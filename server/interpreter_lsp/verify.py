"""Verified export: the exported notebook re-run top to bottom in a fresh kernel (nbclient), each code cell
stamped with a verdict in `metadata.interpreter_lsp.verify`, and the notebook with what a reader needs to
reproduce it (`metadata.interpreter_lsp.verify`: interpreter and package versions from the fresh kernel,
the seeds the cells set, sha-256 of the workspace input files the cells name).

The fresh kernel is the session's kernelspec (kernels/specs.py's choice for python: the workspace venv or
interpreter.kernel.python), started in the workspace with the session's kernel environment and, when the
session is sandboxed, through the same bubblewrap wrapper (the workspace's LaunchOptions), so what was
approved to run sandboxed never runs outside it. Verdicts: `identical`; `equivalent` (normalise.py names what
was forgiven); `differs: <cause>`; `not run` (an error the session did not have stopped the run).

Everything here is one asyncio task per verification (Workspace holds it by id, `interpreter.interrupt`
cancels it); comparisons, image decoding and hashing run in a worker thread.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import copy
import json
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import causes, normalise
from . import protocol as p
from .errors import UserError
from .kernels.figures import REGISTER

UNFINISHED = ("interrupted", "timeout", "died")  # session runs that did not end by themselves
STARTUP_TIMEOUT = 120.0  # a fresh kernel on a busy machine
VERSIONS_TIMEOUT = 30.0

# Run in the fresh kernel in a namespace of its own (nothing is left in the user's): the interpreter, and the
# versions of the modules the cells import. packages_distributions() reads every installed distribution's
# file list (~0.5 s), so it is asked only for modules whose name is not their distribution's.
_VERSIONS = """
import importlib.metadata as md, json, sys
found, missing = {}, []
for m in MODULES:
    if m in getattr(sys, "stdlib_module_names", ()) or m in sys.builtin_module_names:
        continue
    try:
        found[m] = md.version(m)
    except Exception:
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
    kernel_name: str
    kernel_dirs: tuple[str, ...]
    env: dict[str, str]
    wrapper: Any  # (cmd) -> cmd, or None: the sandbox's
    runtime_dir: Path
    sandbox: str | None
    timeout: float | None
    dropped_runs: list[dict[str, Any]] = field(default_factory=list)  # dropped_runs(): undone or reset runs
    # The masking the session's outputs went through (ctx.redact_shown): the fresh outputs go through it too,
    # before they are compared and before any of their text (a diff) is written or answered.
    mask: Callable[[Any], Any] = lambda value: value


def _code_cells(nb: Any) -> list[Any]:
    return [c for c in nb.cells if c.cell_type == "code"]


async def _start(session: Session, nb: Any) -> Any:
    from jupyter_client.kernelspec import KernelSpecManager
    from nbclient import NotebookClient

    from .kernels.connection import manager_class  # the session's manager: its launch command can be wrapped
    from .kernels.stderr import KernelStderr

    session.runtime_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    km = manager_class()(
        kernel_name=session.kernel_name,
        transport="ipc",  # sockets in our own 0700 runtime directory, reachable inside the sandbox too
        ip=str(session.runtime_dir / "k"),
        connection_file=str(session.runtime_dir / "k.json"),
    )
    if session.kernel_dirs:
        km.kernel_spec_manager = KernelSpecManager(kernel_dirs=list(session.kernel_dirs))
    km.command_wrapper = session.wrapper
    client = NotebookClient(
        nb, km=km, timeout=session.timeout, startup_timeout=int(STARTUP_TIMEOUT), allow_errors=True,
        record_timing=False, kernel_name=session.kernel_name,
    )
    # stdout is the LSP wire: the kernel never inherits it; nor the server's stderr (a sandboxed kernel holds
    # no descriptor of the server's): a pipe of its own, logged, its tail said if the start fails.
    stderr = km.ilsp_stderr = KernelStderr("verification")
    try:
        await km.start_kernel(
            cwd=str(session.root), env=session.env, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            stderr=stderr.fd, extra_arguments=[],
        )
        await client.async_start_new_kernel_client()
    except BaseException as exc:
        with contextlib.suppress(Exception):
            await km.shutdown_kernel(now=True)
        tail = stderr.tail()
        stderr.close()
        if isinstance(exc, Exception):
            said = f" Its last words: {tail}" if tail else ""
            raise UserError(f"The fresh kernel for verification could not start: {exc}. The notebook was written "
                            f"without verdicts.{said}") from exc
        raise
    return client


async def _stop(client: Any) -> None:
    km, kc = client.km, client.kc
    with contextlib.suppress(Exception):
        if kc is not None:
            kc.stop_channels()
    with contextlib.suppress(Exception):
        if km is not None and km.has_kernel:
            await km.shutdown_kernel(now=True)
    if (stderr := getattr(km, "ilsp_stderr", None)) is not None:
        stderr.close()


async def _execute(client: Any, cell: Any, index: int, number: int) -> None:
    """nbclient turns a cancellation of the cell's execution into DeadKernelError ("Kernel died"): it runs
    shielded, so cancelling the verification raises CancelledError here, and the execution is then dropped
    (the kernel is shut down next)."""
    execution = asyncio.ensure_future(client.async_execute_cell(cell, index, execution_count=number))
    try:
        await asyncio.shield(execution)
    except asyncio.CancelledError:
        execution.cancel()
        with contextlib.suppress(BaseException):
            await execution
        raise


async def _silent(client: Any, code: str, expression: str | None = None) -> str | None:
    reply = await asyncio.wait_for(
        client.kc.execute_interactive(
            code, silent=True, store_history=False, user_expressions={"v": expression} if expression else None,
            timeout=VERSIONS_TIMEOUT,
        ),
        VERSIONS_TIMEOUT + 5,
    )
    if not expression:
        return None
    value = reply["content"].get("user_expressions", {}).get("v", {}).get("data", {}).get("text/plain")
    return ast.literal_eval(value) if isinstance(value, str) else None


async def verify(nb: Any, session: Session, history_path: Path | None = None) -> dict[str, Any]:
    """Re-run `nb` (the export, which it stamps in place) and return the summary for the command's result."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    started = time.monotonic()
    if history_path is not None:
        session.dropped_runs = await asyncio.to_thread(causes.dropped_runs, history_path)
    cells = _code_cells(nb)
    sources = [str(c.source) for c in cells]
    if not cells:
        raise UserError("There is nothing to verify: the conversation has no code that ran. The notebook was "
                        "written.")
    fresh = copy.deepcopy(nb)
    fresh_cells = _code_cells(fresh)
    root_text = (str(session.root), str(session.root.resolve()))
    reports: list[CellReport] = []
    environment: dict[str, Any] = {}
    client = await _start(session, fresh)
    start_seconds = time.monotonic() - started
    try:
        await _silent(client, REGISTER)  # the session's kernels show figures of any backend: so does this one
        stopped = False
        for index, cell in enumerate(fresh_cells):
            number = index + 1
            if stopped:
                reports.append(CellReport(number, "not run"))
                continue
            state = session.runs[index].get("state") if index < len(session.runs) else "ok"
            if state in UNFINISHED:
                # An interrupted loop would run until a timeout again: it is not re-run, and says why.
                reports.append(CellReport(number, f"not run: the session's run ended {state}"))
                continue
            cell.outputs = []
            try:
                await _execute(client, cell, fresh.cells.index(cell), number)
            except (CellTimeoutError, DeadKernelError) as exc:
                why = "timeout (past runTimeout)" if isinstance(exc, CellTimeoutError) else "the fresh kernel died"
                reports.append(CellReport(number, f"differs: {why}"))
                stopped = True
                if isinstance(exc, DeadKernelError):
                    break
                with contextlib.suppress(Exception):  # the cell still runs: stop it before the versions probe
                    await client.km.interrupt_kernel()
                continue
            comparison = await asyncio.to_thread(
                lambda old=list(cells[index].outputs), new=list(cell.outputs): normalise.compare(
                    old, session.mask(new), root_text
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
            environment = json.loads(await _silent(client, "", probe) or "{}")
    finally:
        await _stop(client)
        await asyncio.to_thread(shutil.rmtree, session.runtime_dir, True)
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
