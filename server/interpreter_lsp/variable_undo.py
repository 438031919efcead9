"""Undo of the python kernel's variables: a snapshot before each python run, and putting the variables back.

Before a python run's code reaches its kernel (local or on a gateway), `before_run` has the kernel fork a
copy-on-write snapshot of itself (kernels/snapshot_kernel.py). `plan` says, for the runs an undo takes back,
which variables would come back, which the runs created (removed), and what cannot come back and why;
`restore` does it from the snapshot taken before the earliest of those runs. A run without a snapshot (the
kernel restarted since, more runs than are kept, the snapshot failed) is named: nothing is lost silently.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from .kernels import snapshots
from .kernels.backend import KernelBackend
from .kernels.pool import KernelPool
from .languages import PYTHON, canonical_language

log = logging.getLogger(__name__)


@dataclass
class _Snap:
    kernel: KernelBackend
    why_not: str | None = None  # why there is no snapshot of this run


@dataclass
class VariablesPlan:
    restore: list[str]
    remove: list[str]
    lost: list[dict[str, str]]
    first: str | None = None  # the run whose snapshot it restores


class VariableUndo:
    def __init__(self, pool: KernelPool) -> None:
        self._pool = pool
        self._snaps: dict[str, _Snap] = {}

    def kernel_gone(self, why: str = "restarted") -> None:
        """The python kernel restarted or died: the snapshots went with its process."""
        for snap in self._snaps.values():
            snap.why_not = snap.why_not or f"the python kernel {why} since: its variables before the run are gone"

    async def ready(self, kernel: KernelBackend) -> None:
        """A python kernel (re)started: set up its side. Snapshots taken before are gone with the old process."""
        self.kernel_gone()
        try:
            await snapshots.install(kernel)
        except Exception as exc:  # runs go ahead; undo names their variables as not restorable, with this
            log.warning("variables undo is not available in this kernel: %s", exc)

    def before_run(self, run_id: str, kernel: KernelBackend) -> None:
        """Send the snapshot request now, just ahead of the run's own: the kernel takes them in order, so
        the snapshot costs the run no round trip of its own. What came of it is recorded when it answers."""
        if canonical_language(kernel.language) != PYTHON:
            return
        try:
            sent = snapshots.submit(kernel, "snap", run_id)
        except Exception as exc:  # the run goes ahead: undo names its variables, with this reason
            self._snaps[run_id] = _Snap(kernel, f"the snapshot before the run failed ({exc})")
            return
        snap = self._snaps[run_id] = _Snap(kernel, "the snapshot before the run did not finish")

        def finished(future: asyncio.Future[Any]) -> None:
            try:
                snapshots.answer(future.result())
                snap.why_not = None
            except BaseException as exc:  # an interrupt, the kernel died, the run was cancelled: undo says so
                log.warning("no snapshot of the variables before run %s: %s", run_id, exc)
                snap.why_not = f"the snapshot before the run failed ({exc or type(exc).__name__})"

        sent.add_done_callback(finished)

    def _target(self, events: list[dict[str, Any]]) -> tuple[str | None, str | None]:
        """(the earliest python run undone, why its variables cannot come back or None)."""
        runs = [e for e in events if e.get("type") == "run" and canonical_language(str(e.get("language"))) == PYTHON]
        if not runs:
            return None, None
        run_id = str(runs[0].get("runId"))
        snap = self._snaps.get(run_id)
        if snap is None:
            return run_id, "no snapshot of the variables before its run is kept (a run of an earlier session)"
        if snap.why_not:
            return run_id, snap.why_not
        if self._pool.existing(PYTHON) is not snap.kernel:
            return run_id, "the python kernel restarted since: its variables before the run are gone"
        return run_id, None

    async def plan(self, events: list[dict[str, Any]], *, commit: bool = False) -> VariablesPlan:
        """What undoing `events` does to the variables; with `commit`, does it."""
        run_id, why = self._target(events)
        if run_id is None:
            return VariablesPlan([], [], [])
        if why is not None:
            return VariablesPlan([], [], [{"name": "kernel variables", "why": why}], run_id)
        kernel = self._snaps[run_id].kernel
        try:
            if commit:
                answer = await snapshots.call(kernel, "restore", run_id, snapshots.RESTORE_TIMEOUT)
                names = list(answer.get("restored", []))
            else:
                answer = await snapshots.call(kernel, "plan", run_id, snapshots.RESTORE_TIMEOUT)
                names = list(answer.get("restore", []))
        except Exception as exc:
            return VariablesPlan([], [], [{"name": "kernel variables", "why": str(exc)}], run_id)
        if commit:
            log.info("variables restored from before run %s in %s ms", run_id, answer.get("ms"))
        lost = [{"name": f"variable {item['name']}", "why": str(item["why"])} for item in answer.get("lost", [])]
        return VariablesPlan(names, list(answer.get("removed" if commit else "remove", [])), lost, run_id)

    async def forget(self, run_ids: list[str] | None = None) -> None:
        """Snapshots no undo can reach any more (their runs were undone; the conversation was reset)."""
        ids = list(self._snaps) if run_ids is None else [r for r in run_ids if r in self._snaps]
        by_kernel: dict[int, tuple[KernelBackend, list[str]]] = {}
        for run_id in ids:
            snap = self._snaps.pop(run_id)
            by_kernel.setdefault(id(snap.kernel), (snap.kernel, []))[1].append(run_id)
        for kernel, keys in by_kernel.values():
            if self._pool.existing(PYTHON) is kernel:
                try:
                    await snapshots.call(kernel, "drop", keys, snapshots.SNAP_TIMEOUT)
                except Exception as exc:
                    log.info("snapshots %s not dropped: %s", keys, exc)
