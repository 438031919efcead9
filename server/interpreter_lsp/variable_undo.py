"""Undo of the python kernel's variables: a snapshot of the kernel as each python run finds it, and putting
the variables back.

The kernel forks a copy-on-write snapshot of itself (kernels/snapshot_kernel.py), in a silent request, when
it is ready and right after each python run's reply (local or on a gateway): the state a run leaves is the
state the next one finds, so the snapshot is taken while the user reads the output. Once the next one is
forked, the older one packs itself into a memfd of what only it holds (kernels/snapshot_pages.py): nothing
here changes, the kernel's side answers `plan` and `restore` the same way. A namespace of small
plain data is kept as its pickle instead (no fork, no warm-up: the answer says `kept`). A run waits for the
snapshot it finds only if that is still under way (runs back to back), before its own request goes:
sent back to back with it instead, ipykernel's save and restore of the SIGINT handler around each request
could leave the run with SIGINT ignored (an interrupt then missed it). `plan` says, for the runs an undo
takes back, which variables would come back, which the runs created (removed), and what cannot come back
and why; `restore` does it from the snapshot the earliest of those runs found. A run without a snapshot
(the kernel restarted since, more runs than are kept, the snapshot failed) is named: nothing is lost
silently.

Once a snapshot answered and no run waits for it, a warm-up follows (snapshot_kernel.warm): the fork's price is
the kernel's next writes (copy-on-write faults, wherever the fork happens), and the warm-up pays most of them
while the user reads rather than in the next run.
A local kernel answers the snapshot's request on a socket of its own (kernels/snapshots.py, `open_socket`): back
to back, the next run no longer waits for ipykernel's dispatch of a comm message (below, figures of the comm).
Measured (bench/roundtrip.py, `print(1)`), forked: paced 50 ms apart, ~0.4 ms more than with undo off (11.1
against 10.7 ms, the bare kernel 6.6); each run sent the instant the one before ended, ~14 ms more (24.9
against 11.1, the bare kernel 5.8): the snapshot's own request (ipykernel takes ~4.5 ms to start any request,
then the fork) is then on the next run's path. Kept (the bench's empty namespace): as with undo off, within
the noise (back to back 12.2-12.8 ms against 12.3-12.8; undo off asks the variables after each run too).
Earlier figures (~11.5 ms back to back) came from a bench that interleaved
the bare kernel's runs between the server's, which gave the snapshot that time. Taken inside the run's own
request (IPython's pre_ or post_run_cell) it was ~16 ms, measured the same interleaved way.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .kernels import snapshots
from .kernels.backend import ExecuteReply, KernelBackend
from .kernels.execution import NO_COMM_ANSWER
from .kernels.pool import KernelPool
from .languages import PYTHON, canonical_language

log = logging.getLogger(__name__)
TAKING = "the snapshot was still being taken"  # why a snapshot cannot serve until the kernel answers


@dataclass
class _Snap:
    """One snapshot in the kernel: the state some run found."""

    kernel: KernelBackend
    key: str
    why_not: str | None = None  # why it cannot serve (failed, the kernel went); None once it answered ok
    done: asyncio.Future[Any] | None = None  # the kernel's answer
    warmed: asyncio.Future[Any] | None = None  # the warm-up sent once it answered (snapshot_kernel.warm)
    awaited: bool = False  # a run is waiting for it
    socket: snapshots.Calls | None = None  # the kernel's socket it was asked on, if it was


@dataclass
class VariablesPlan:
    restore: list[str]
    remove: list[str]
    lost: list[dict[str, str]]


class VariableUndo:
    def __init__(self, pool: KernelPool, enabled: Callable[[], bool] = lambda: True) -> None:
        self._pool = pool
        self._enabled = enabled  # interpreter.undoVariables
        self._snaps: dict[str, _Snap] = {}  # run id -> the snapshot of what it found
        self._ahead: dict[int, _Snap] = {}  # id(kernel) -> the snapshot of its state now, for its next run
        self._keys = itertools.count(1)
        self._installed: KernelBackend | None = None  # the python kernel whose side is set up
        self._comm: str | None = None  # its comm for the calls after each run (snapshots.open_calls), if any
        self._socket: snapshots.Calls | None = None  # a local kernel's socket for them (snapshots.open_socket)

    def kernel_gone(self, why: str = "restarted") -> None:
        """The python kernel restarted or died: the snapshots went with its process."""
        self._ahead.clear()
        self._installed = None
        self._comm = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        for snap in self._snaps.values():
            snap.why_not = snap.why_not or f"the python kernel {why} since: its variables before the run are gone"

    async def ready(self, kernel: KernelBackend) -> asyncio.Future[ExecuteReply] | None:
        """A python kernel (re)started: set up its side, and take the snapshot its first run finds, with the
        variables (as after_run: the first chat's context has them without asking); returns that reply to
        come, or None when nothing was sent."""
        self.kernel_gone()
        try:
            await snapshots.install(kernel)
        except Exception as exc:  # runs go ahead; undo names their variables as not restorable, with this
            log.warning("variables undo is not available in this kernel: %s", exc)
            return None
        self._comm = await snapshots.open_calls(kernel)
        if self._comm is not None:  # a kernel with ipykernel's comms: its loop reads a socket as well
            self._socket = await snapshots.open_socket(kernel)
        self._installed = kernel
        if self._enabled():
            snap = self._take_ahead(kernel, snapshots.VARIABLES_CALL)
            return snap.done if snap is not None else None
        return None

    def _take(self, kernel: KernelBackend, also: dict[str, tuple[str, Any]] | None = None) -> _Snap | None:
        """Send a snapshot request now (no await): the kernel takes it before anything sent after it. `also`:
        other calls answered by the same request (see after_run)."""
        key = f"s{next(self._keys)}"
        comm = self._calls() if kernel is self._installed else None
        try:
            sent = snapshots.submit(kernel, "snap", key, also, comm)
        except Exception as exc:  # the kernel is not running: undo names the variables, with this reason
            log.info("no snapshot of the variables: %s", exc)
            return None
        snap = _Snap(kernel, key, TAKING, sent, socket=comm if isinstance(comm, snapshots.Calls) else None)

        def finished(future: asyncio.Future[Any]) -> None:
            try:
                kept = snapshots.answer(future.result()).get("kept") is True
                if snap.why_not == TAKING:
                    snap.why_not = None
            except BaseException as exc:  # an interrupt, the kernel died: undo says so
                # A kernel the server ended itself (a restart, the server shutting down) fails what was in
                # flight with no cause: expected, not worth a warning in the editor's log at every close.
                reply = None if future.cancelled() or future.exception() else future.result()
                if isinstance(comm, snapshots.Calls) and comm is self._socket and comm.closed:
                    # Its socket closed (kernel code closed it): the calls go over the comm from now on.
                    log.info("the kernel's calls socket closed: calls go over the comm")
                    self._socket = None
                elif comm is not None and comm == self._comm and reply is not None and (
                    reply.content.get("reason") == NO_COMM_ANSWER
                ):
                    # The comm is gone (kernel code closed it or unregistered its target): the calls go as
                    # execute requests from now on (the next run's snapshot is taken again that way).
                    log.info("the snapshots' comm no longer answers: calls go as execute requests")
                    self._comm = None
                deliberate = reply is not None and reply.status != "ok" and "cause" not in reply.content
                log.log(logging.INFO if deliberate else logging.WARNING, "a snapshot of the variables failed: %s", exc)
                snap.why_not = f"the snapshot of the variables failed ({exc or type(exc).__name__})"
                return
            # No fork, no faults to pay (a small plain namespace is kept as its pickle). A run waiting for this
            # snapshot would pay the warm-up instead of its faults.
            if not kept and not snap.awaited:
                with contextlib.suppress(Exception):
                    snap.warmed = snapshots.warm(kernel)
                    snap.warmed.add_done_callback(_quietly)  # a warm-up that failed costs a run its faults

        sent.add_done_callback(finished)
        return snap

    async def before_run(self, run_id: str, kernel: KernelBackend) -> None:
        """The run finds the state the last snapshot took (sent after the run before); if there is none, or
        it failed, one is taken now. Waited for only while under way (bounded), before the run's code goes."""
        if canonical_language(kernel.language) != PYTHON:
            return
        if not self._enabled():
            self._snaps[run_id] = _Snap(kernel, "", "variables undo is off (interpreter.undoVariables)")
            return
        snap = self._ahead.pop(id(kernel), None)
        fresh = snap is None or snap.kernel is not kernel or _failed(snap)
        if fresh:
            snap = self._take(kernel)
        if snap is None:
            self._snaps[run_id] = _Snap(kernel, "", "no snapshot could be sent: the kernel was not running")
            return
        self._snaps[run_id] = snap
        snap.awaited = True
        while True:
            pending = [f for f in (snap.done, snap.warmed) if f is not None and not f.done()]
            if pending:  # the run goes after both: it is never queued behind a silent request (see the top)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(asyncio.gather(*pending, return_exceptions=True)),
                                           snapshots.SNAP_TIMEOUT)
                if snap.socket is not None and snap.done is not None and not snap.done.done():
                    # Asked on the kernel's socket, unanswered all that time (kernel code stopped its loop
                    # reading it): closed, so that this snapshot fails now and the calls go over the comm,
                    # rather than every run waiting this long.
                    log.warning("the kernel's calls socket did not answer in %g s: calls go over the comm",
                                snapshots.SNAP_TIMEOUT)
                    snap.socket.close(f"the kernel's calls socket did not answer in {snapshots.SNAP_TIMEOUT:g} s")
                    await asyncio.wait({snap.done}, timeout=1.0)
            if fresh or not _failed(snap) or (again := self._take(kernel)) is None:
                break
            # The snapshot sent after the run before failed while this run waited (its comm gone, say): once
            # more, now (and only once), so that this run's variables can still come back.
            snap, fresh = again, True
            self._snaps[run_id] = snap
            snap.awaited = True

    def installed(self, kernel: KernelBackend) -> bool:
        """Whether the kernel's side (snapshot_kernel.py) is set up in this kernel."""
        return kernel is self._installed

    def after_run(self, run_id: str, kernel: KernelBackend, reply: Any) -> asyncio.Future[ExecuteReply] | None:
        """The run ended: the state it left is the one the next run finds. Taken now, off that run's path,
        with the variables in the same request (one kernel round trip after a run, not two: introspect's
        `variables_of` reads its reply); returns that reply to come, or None when no snapshot was sent."""
        if (
            canonical_language(kernel.language) == PYTHON
            and self._pool.existing(PYTHON) is kernel
            and self._enabled()
            and self.installed(kernel)
        ):
            snap = self._take_ahead(kernel, snapshots.VARIABLES_CALL)
            return snap.done if snap is not None else None
        return None

    def ask_variables(self, kernel: KernelBackend) -> asyncio.Future[ExecuteReply] | None:
        """The variables alone (variables undo off), from the kernel's side when it is set up (None if not)."""
        if not self.installed(kernel):
            return None
        return snapshots.submit_calls(kernel, snapshots.VARIABLES_CALL, self._calls())

    def _calls(self) -> snapshots.Calls | str | None:
        """How the installed kernel is called after a run: its socket, else its comm, else execute requests."""
        if self._socket is not None and not self._socket.closed:
            return self._socket
        return self._comm

    def _take_ahead(self, kernel: KernelBackend, also: dict[str, tuple[str, Any]] | None = None) -> _Snap | None:
        snap = self._take(kernel, also)
        if snap is not None:
            self._ahead[id(kernel)] = snap
        return snap

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
            return VariablesPlan([], [], [{"name": "kernel variables", "why": why}])
        return await self._back_to(self._snaps[run_id], commit, f"run {run_id}")

    async def redo_point(self, events: list[dict[str, Any]]) -> _Snap | str | None:
        """Before an undo restores anything: a snapshot of the variables as they are, which a redo brings
        back; or why there is none. None when the undo takes back no python run (a redo has no variables to
        bring back)."""
        runs = [e for e in events if e.get("type") == "run" and canonical_language(str(e.get("language"))) == PYTHON]
        kernel = self._pool.existing(PYTHON)
        if not runs:
            return None
        if kernel is None:
            return "no python kernel was running at the undo"
        if not self._enabled():
            return "variables undo is off (interpreter.undoVariables)"
        # The snapshot taken after the last run (or undo) is the state now: no code ran since (a run takes it
        # for its own). It becomes the redo point instead of a second copy of the same state, which would take
        # one of the kernel's MAX_SNAPSHOTS and push out the oldest (three undos in a row lost the first run's).
        snap = self._ahead.get(id(kernel))
        if snap is not None and snap.kernel is kernel and snap.done is not None and not (
            snap.done.done() and snap.why_not
        ):
            del self._ahead[id(kernel)]
        else:
            snap = self._take(kernel)
        if snap is None:
            return "no snapshot could be sent: the kernel was not running"
        if snap.done is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(snap.done), snapshots.SNAP_TIMEOUT)
        if snap.why_not == TAKING:
            snap.why_not = f"the snapshot before the undo took over {snapshots.SNAP_TIMEOUT:g} s"
        return snap

    async def redo(self, snap: _Snap | str | None, *, commit: bool = False) -> VariablesPlan:
        """What bringing back the variables as the undo found them does; with `commit`, does it."""
        if snap is None:
            return VariablesPlan([], [], [])
        if isinstance(snap, str):
            return VariablesPlan([], [], [{"name": "kernel variables", "why": snap}])
        if snap.why_not:
            return VariablesPlan([], [], [{"name": "kernel variables", "why": snap.why_not}])
        if self._pool.existing(PYTHON) is not snap.kernel:
            why = "the python kernel restarted since the undo: the variables it found are gone"
            return VariablesPlan([], [], [{"name": "kernel variables", "why": why}])
        return await self._back_to(snap, commit, "the undo")

    async def release(self, snap: _Snap | str | None) -> None:
        """A redo point no redo will use (or one used): its snapshot goes."""
        if isinstance(snap, _Snap) and snap.key and self._pool.existing(PYTHON) is snap.kernel:
            try:
                await snapshots.call(snap.kernel, "drop", [snap.key], snapshots.SNAP_TIMEOUT)
            except Exception as exc:
                log.info("snapshot %s not dropped: %s", snap.key, exc)

    async def _back_to(self, snap: _Snap, commit: bool, what: str) -> VariablesPlan:
        """The kernel's variables as `snap` took them: what differs comes back, what is new goes."""
        kernel = snap.kernel
        try:
            if commit:
                answer = await snapshots.call(kernel, "restore", snap.key, snapshots.RESTORE_TIMEOUT)
                names = _names(answer.get("restored"))
            else:
                answer = await snapshots.call(kernel, "plan", snap.key, snapshots.RESTORE_TIMEOUT)
                names = _names(answer.get("restore"))
        except Exception as exc:
            return VariablesPlan([], [], [{"name": "kernel variables", "why": str(exc)}])
        if commit:
            log.info("variables restored as they were before %s in %s ms", what, answer.get("ms"))
            self._take_ahead(kernel)  # the state the next run finds is the one just restored
        found = answer.get("lost")
        lost = [
            {"name": f"variable {item.get('name')}", "why": str(item.get("why"))}
            for item in (found if isinstance(found, list) else [])
            if isinstance(item, dict)
        ]
        return VariablesPlan(names, _names(answer.get("removed" if commit else "remove")), lost)

    async def forget(self, run_ids: list[str] | None = None) -> None:
        """Snapshots no undo can reach any more (their runs were undone; the conversation was reset)."""
        ids = list(self._snaps) if run_ids is None else [r for r in run_ids if r in self._snaps]
        by_kernel: dict[int, tuple[KernelBackend, list[str]]] = {}
        for run_id in ids:
            snap = self._snaps.pop(run_id)
            if snap.key:
                by_kernel.setdefault(id(snap.kernel), (snap.kernel, []))[1].append(snap.key)
        for kernel, keys in by_kernel.values():
            if self._pool.existing(PYTHON) is kernel:
                try:
                    await snapshots.call(kernel, "drop", keys, snapshots.SNAP_TIMEOUT)
                except Exception as exc:
                    log.info("snapshots %s not dropped: %s", keys, exc)


def _failed(snap: _Snap) -> bool:
    """The snapshot answered, and cannot serve. An answer whose done callback has not run yet (it came in this
    loop iteration) is judged by itself: read as "still being taken", it cost the run a second snapshot."""
    if snap.done is None or not snap.done.done():
        return False
    if snap.why_not != TAKING:
        return snap.why_not is not None
    if snap.done.cancelled() or snap.done.exception() is not None:
        return True
    try:
        snapshots.answer(snap.done.result())
    except Exception:
        return True
    return False


def _quietly(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _names(value: Any) -> list[str]:
    """Names from the kernel's answer: JSON the kernel wrote, so whatever its code made of it. Anything but a
    list of strings is read as none (an undo must not fail half done on it: the files are already back)."""
    return [name for name in value if isinstance(name, str)] if isinstance(value, list) else []
