"""Which workspace files a run touched (file_observers.py builds the observer).

The observer starts on the first run, in a worker thread (it walks the workspace): the platform's native
one (inotify on Linux, read on the event loop: inotify_tree.py; watchdog's FSEvents on macOS and
ReadDirectoryChangesW on Windows), or watchdog's polling observer where none can start or when the portable
paths are forced (INTERPRETER_LSP_PORTABLE=1). `.git`, virtualenvs, node_modules, caches, `build` and
`dist` are not watched (on Linux at most MAX_WATCHES directories are). Events reach the event loop (from
watchdog's threads with call_soon_threadsafe), and every run in flight collects the files created, written,
deleted or moved meanwhile.

Attribution is per run, from `begin` to `end`. Events reach the loop a little after the file changed (they
wait in the kernel's queue for the loop, pass through watchdog's threads, or wait for the next poll), so both
ends are marked in the event stream itself with a barrier: an event of our own sent through the same path.
`begin` sends one and returns at once; the run counts changes from the moment its barrier comes out (what the
user saved just before the run is not its doing). When the run's kernel is idle, `settle` sends another and
waits for it (everything the run did has arrived then). With inotify nobody usually waits: an event is queued
within the system call that makes it, so the descriptor is read right after a barrier is sent and the barrier
is found in that same read (`caught_up_now`, `start_settle`). With a native observer the barrier is a file created
in the root (`.interpreter-lsp-sync-*`) and deleted at once, in the same call: its creation's event is the
barrier, so no code (a run listing the folder, the model reading that listing) finds it, and none is ever left
behind; it is never reported. (Re-setting the root's mode would be invisible, but inotify merges an event into
an identical unread one and watchdog's queue drops an event equal to the one before it: two barriers could
come out as one.) A poll would not see a file that short-lived, and a poll's changes come as an unordered set:
with polling there is no file at all; the barrier is the end of the first poll that started after it was asked
for (the observer tags that poll's end), and takes effect there (a change in the same poll as a run's start
counts for the run). If a barrier does not come in time, or the event queue overflowed, or a limit was reached
during the run, the run's list says it may be incomplete."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import logging
import os
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .imports import retrying_deadlocks
from .portable import portable_forced

if TYPE_CHECKING:
    from .file_observers import Built

log = logging.getLogger(__name__)

MAX_WATCHES = 4000
MAX_REPORTED = 200
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", ".venv", "venv", "env", ".env", "node_modules", "__pycache__", ".mypy_cache",
     ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints", ".tox", ".cache", "dist", "build"}
)
POLL_INTERVAL = 0.5  # the polling observer's period
SETTLE_TIMEOUT = 5.0  # how long `settle` waits for its own event, beyond one poll
PROBE_PREFIX = ".interpreter-lsp-sync-"
BATCH_END = PROBE_PREFIX + "poll-end"  # the polling observer's "that was one whole poll" (never a real file)


@dataclass
class Touched:
    """What `end` reports: [{path, change}] relative to the root, and a sentence when it may be incomplete."""

    files: list[dict[str, str]]
    note: str | None = None


@dataclass
class _Waiter:
    """What to do when a barrier comes out of the event stream, called right there (not later: the next
    event may already be waiting behind it)."""

    then: Callable[[], None]
    opens: bool  # a run's start: with polling, called before the rest of its poll is applied (else after)


class FileChanges:
    def __init__(self, root: Path, *, polling: bool | None = None) -> None:
        """`polling` overrides what the environment chooses (tests run both paths on Linux)."""
        self.root = root
        self._real_root = Path(os.path.realpath(root))
        self._prefix = os.path.join(str(root), "")  # the root and a separator: see _relative
        self._polling = portable_forced() if polling is None else polling
        self._active: dict[str, dict[str, str]] = {}  # run id -> {relative path: change}
        self._opening: dict[str, object] = {}  # run id -> its start barrier, not come out yet
        self._notes: dict[str, str] = {}  # run id -> why its list may be incomplete
        self._starting: asyncio.Task[None] | None = None
        self._built: Built | None = None
        self._closed = False
        self._limits_logged: set[str] = set()
        self._probes: dict[str, _Waiter] = {}  # barriers in flight, by file name (FSEvents may report real paths)
        self._poll_waiters: dict[int, _Waiter] = {}  # polling: barriers in flight, by number
        self._probe_ids = itertools.count(1)
        self._no_links = False  # the workspace's file system refused a link: barriers are files (_probe_link)
        self._poll: list[Any] = []  # polling: the events of the poll under way, applied when it ends
        self.kind: str | None = None  # "inotify" | "fsevents" | "windows" | "polling" once started
        self.unavailable: str | None = None
        # Counts every change seen in the workspace, in a run or not (and every overflow or limit reached):
        # unchanged between two moments, with a native observer that missed nothing, nothing changed.
        self.generation = 0
        # Which files changed when (relative path -> the generation of its last change), and the generation
        # of the last change that can bring files unseen (a directory made, moved or removed; a missed event):
        # what a snapshot of the workspace needs to look at again since an earlier one (changed_since).
        self._changed: dict[str, int] = {}
        self._structural = 0
        self._missed = False  # a limit was reached or the queue overflowed: some change may be unseen
        self._arrivals: dict[str | int, asyncio.Future[None]] = {}  # barriers in flight, by token
        self._in_flight: asyncio.Future[None] | None = None  # the last one sent, until it comes out

    # ---- life cycle -------------------------------------------------------------------------------------

    async def _start(self) -> None:
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()

        def later(method: Any) -> Any:
            # For watchdog's threads: they only ever schedule a call on the loop. On the loop's own thread (the
            # inotify tree's reads) it is called right there, in order with the events around it: a barrier
            # read in the same go (caught_up) must find the overflow before it already counted.
            def notify(message: str) -> None:
                if threading.get_ident() == loop_thread:
                    method(message)
                    return
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(method, message)

            return notify

        def build() -> Built:
            from . import file_observers

            return file_observers.start(
                str(self.root),
                file_observers.ToLoop(loop, self._on_event),
                polling=self._polling,
                batch_end=str(self.root / BATCH_END),
                skip=SKIP_DIRS,
                max_watches=MAX_WATCHES,
                interval=POLL_INTERVAL,
                on_limit=later(self._limit_reached),
                on_overflow=later(self._overflowed),
            )

        try:
            # watchdog is imported in that thread, beside the loop's own imports (imports.py)
            built = await asyncio.to_thread(retrying_deadlocks, build)
        except Exception as exc:
            self.unavailable = f"file changes are not watched: {exc}"
            log.warning("%s", self.unavailable)
            return
        if self._closed:
            built.observer.stop()
            return
        if built.attach is not None:
            built.attach()  # here, on the loop: its events come to _on_event from now on
        self._built, self.kind = built, built.kind
        log.info("watching %s for file changes (%s)", self.root, built.kind)

    def close(self) -> None:
        self._closed = True
        if self._built is not None:
            # Stops its threads (they are daemons and end on their own); watches are removed.
            self._built.observer.stop()
            self._built = None
        self._let_go(self._probes, self._poll_waiters)

    # ---- runs ------------------------------------------------------------------------------------------

    async def begin(self, run_id: str) -> None:
        """Changes count for this run from its start barrier on. Only the first run waits: for the observer."""
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        # Shielded: a run cancelled while the observer starts leaves the start to finish for the next one.
        await asyncio.shield(self._starting)
        if self._built is None:
            return

        def opened() -> None:
            if run_id in self._opening:  # not ended meanwhile
                del self._opening[run_id]
                self._active[run_id] = {}

        try:
            self._opening[run_id] = self._send(_Waiter(opened, opens=True))
        except OSError:
            self._opening[run_id] = None
            opened()  # no barrier possible (a read-only root): count from now

    async def settle(self) -> None:
        """Wait until changes made before now have reached the loop (bounded by SETTLE_TIMEOUT)."""
        waiting = self.start_settle()
        if waiting is not None:
            await waiting

    def start_settle(self) -> Coroutine[Any, Any, None] | None:
        """`settle`'s barrier, sent now and looked for at once: None when it came out (every change made before
        now has arrived: nothing to wait for), else what waits for it (await it, or make it a task)."""
        if self._built is None or not (self._active or self._opening):
            return None
        arrived: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            token = self._send(_Waiter(lambda: arrived.done() or arrived.set_result(None), opens=False))
        except OSError as exc:
            if exc.errno != errno.EROFS:  # a read-only workspace: nothing in it changed
                self._incomplete(f"could not check that every change arrived ({exc})")
            return None
        self._read_now()
        if arrived.done():
            self._drop(token)
            return None
        return self._settled(token, arrived)

    async def _settled(self, token: str | int, arrived: asyncio.Future[None]) -> None:
        limit = SETTLE_TIMEOUT + (2 * POLL_INTERVAL if self.kind == "polling" else 0.0)
        try:
            await asyncio.wait_for(asyncio.shield(arrived), limit)
        except asyncio.TimeoutError:
            log.warning("file changes did not arrive within %.1f s", limit)
            self._incomplete(f"file changes were still arriving after {limit:.0f} s")
        finally:
            self._drop(token)

    def end(self, run_id: str) -> Touched:
        """The files this run created, modified, deleted or moved, workspace-relative, sorted."""
        if run_id in self._opening:
            self._drop(self._opening.pop(run_id))
        changes = self._active.pop(run_id, {})
        note = self._notes.pop(run_id, None)
        files = [{"path": path, "change": change} for path, change in sorted(changes.items())]
        if len(files) > MAX_REPORTED:
            more = f"{len(files) - MAX_REPORTED} more files changed than are listed"
            note = f"{note}; {more}" if note else more
            files = files[:MAX_REPORTED]
        if note:
            note = f"the list of files this run touched may be incomplete: {note}"
        return Touched(files, note)

    def changed_since(self, generation: int) -> set[str] | None:
        """The workspace files (relative) changed after `generation` was read, or None when a directory came,
        went or moved since (its files may have come unseen) or an event was missed: look at everything.
        Only as complete as what has reached the loop: `caught_up` first. Forgets what came at or before
        `generation` (the one reader, undo's snapshots, never asks about it again)."""
        for path in [p for p, g in self._changed.items() if g <= generation]:
            del self._changed[path]
        if self._structural > generation or not self.sees_everything:
            return None
        return set(self._changed)

    def others(self, run_id: str) -> set[str]:
        """The paths changed so far by the runs still active other than `run_id`."""
        return {path for other, changes in self._active.items() if other != run_id for path in changes}

    @property
    def sees_everything(self) -> bool:
        """Every change in the workspace reaches `generation`, soon: inotify watching every directory, no
        overflow (a poll is late by design; FSEvents and Windows coalesce: not relied on)."""
        return self.kind == "inotify" and not self._missed and not self._closed

    async def caught_up(self, timeout: float = SETTLE_TIMEOUT) -> bool:
        """Wait until the changes made before now have reached the loop (a barrier); False if it did not come.
        A barrier still in flight serves (a run's start barrier, sent just before its pre-images are asked
        for: what changed after it was sent counts as the run's), so a run does not send two."""
        if (barrier := self._barrier()) is None:
            return False
        token, arrived = barrier
        try:
            self._read_now()
            if not arrived.done():
                await asyncio.wait_for(asyncio.shield(arrived), timeout)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            if token is not None:
                self._drop(token)

    def caught_up_now(self) -> bool:
        """`caught_up` without waiting: True when its barrier came out of the read it makes at once (inotify read
        on the loop, where a barrier's event is queued by its own system call, and fewer than a read's worth of
        events are ahead of it); False otherwise, and `caught_up` says."""
        if self._built is None or self._built.read_now is None or (barrier := self._barrier()) is None:
            return False
        token, arrived = barrier
        try:
            self._read_now()
            return arrived.done()
        finally:
            if token is not None:
                self._drop(token)

    def _barrier(self) -> tuple[str | int | None, asyncio.Future[None]] | None:
        """The barrier in flight, else a new one (its token, to drop once done with it); None if none can go."""
        if self._built is None:
            return None
        arrived = self._in_flight
        if arrived is not None and not arrived.done():
            return None, arrived
        try:
            token = self._send(_Waiter(lambda: None, opens=False))
        except OSError:
            return None
        return token, self._arrivals[token]

    def _read_now(self) -> None:
        """inotify on the loop: read what the kernel has queued now, in this step. Every change made before a
        barrier was sent is queued before it (inotify queues an event within the system call that makes it),
        so a barrier usually comes out here and nobody waits a loop iteration (or two: the wake-up on the
        descriptor) for it: ~0.5-1 ms of a run's start and end on a 2-core VM."""
        if self._built is not None and self._built.read_now is not None:
            self._built.read_now()

    # ---- barriers ---------------------------------------------------------------------------------------

    def _send(self, waiter: _Waiter) -> str | int:
        """Send a barrier; `waiter` is called when it comes out. Returns a token for `_drop`."""
        arrived: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        sent: list[str | int] = []

        def then(then: Callable[[], None] = waiter.then) -> None:
            then()
            self._arrivals.pop(sent[0], None)
            if not arrived.done():
                arrived.set_result(None)

        token = self._send_barrier(_Waiter(then, waiter.opens))
        sent.append(token)  # it comes out later: from the kernel's queue, through watchdog's thread, or the next poll
        self._arrivals[token] = self._in_flight = arrived
        return token

    def _send_barrier(self, waiter: _Waiter) -> str | int:
        number = next(self._probe_ids)
        request = self._built.request_batch_end if self._built is not None else None
        if request is not None:  # polling: the end of the next whole poll, no file
            self._poll_waiters[number] = waiter
            request(number)
            return number
        probe = self.root / f"{PROBE_PREFIX}{os.getpid()}-{number}"
        self._probes[probe.name] = waiter
        try:
            if not self._probe_link(probe):
                os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except OSError:
            del self._probes[probe.name]
            raise
        # Gone at once: its creation is already in the event stream, and no code ever sees the file.
        with contextlib.suppress(OSError):
            probe.unlink()
        return probe.name

    def _probe_link(self, probe: Path) -> bool:
        """With inotify, a barrier is a link (to nothing): its creation and removal are two events, where a
        file's close after writing adds a third to read, twice a run. False where
        a file serves instead: other observers (links need a privilege on Windows), or a file system without
        links (FAT, exFAT, some network mounts), found once."""
        if self.kind != "inotify" or self._no_links:
            return False
        try:
            os.symlink(PROBE_PREFIX, probe)
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise
            self._no_links = True
            return False
        return True

    def _drop(self, token: object) -> None:
        dropped = self._arrivals.pop(token, None) if isinstance(token, (str, int)) else None
        if dropped is not None and dropped is self._in_flight:
            self._in_flight = None  # it will not come: the next caught_up sends its own
        if isinstance(token, int):
            self._poll_waiters.pop(token, None)
        elif isinstance(token, str):
            self._probes.pop(token, None)

    @staticmethod
    def _fire(waiter: _Waiter) -> None:
        waiter.then()

    def _let_go(self, *tables: dict[Any, _Waiter]) -> None:
        """The barriers in these tables will not come out: whoever waits for one goes on now."""
        waiting = [waiter for table in tables for waiter in table.values()]
        for table in tables:
            table.clear()
        for waiter in waiting:
            self._fire(waiter)

    # ---- events (on the loop) ---------------------------------------------------------------------------

    def _on_event(self, event: Any) -> None:
        if self.kind != "polling":
            self._apply(event)  # in order: a barrier event takes effect exactly where it is
        elif not (name := os.path.basename(os.fsdecode(event.src_path))).startswith(BATCH_END):
            self._poll.append(event)
        else:
            # One whole poll: its changes are a set in no order. Runs started before it ended count them all
            # (a change after a run's start can only be in a poll that ended after it); a settle is done once
            # a poll that started after it was asked for (the tag says which) is applied.
            events, self._poll = self._poll, []
            tag = name[len(BATCH_END) + 1 :]
            upto = int(tag) if tag.isdigit() else 0
            numbers = [n for n, w in sorted(self._poll_waiters.items()) if w.opens or n <= upto]
            seen = [self._poll_waiters.pop(n) for n in numbers]
            for waiter in seen:
                if waiter.opens:
                    self._fire(waiter)
            self._apply_poll(events)
            for waiter in seen:
                if not waiter.opens:
                    self._fire(waiter)

    def _apply(self, event: Any) -> None:
        src = os.fsdecode(event.src_path)
        if event.is_directory:
            # A directory made, moved or removed: its files may come with it unseen. (A directory's
            # "modified" only says its listing changed, as a barrier's file does: its files' events say how.)
            if event.event_type in ("created", "deleted", "moved"):
                self.generation += 1
                self._structural = self.generation
            return
        if event.event_type == "moved":
            self._note(src, "deleted")
            self._note(os.fsdecode(event.dest_path), "created")
        elif event.event_type in ("created", "deleted"):
            self._note(src, event.event_type)
        elif event.event_type in ("modified", "closed"):
            self._note(src, "modified")

    def _apply_poll(self, events: list[Any]) -> None:
        """A poll's changes are one set, not a sequence: per path, what it was before the poll against what
        it is after. (Applied in watchdog's order, a file replaced in one poll could come out "created" then
        "deleted", so gone, though it is there.)"""
        gone: set[str] = set()
        came: set[str] = set()
        touched: set[str] = set()
        for event in events:
            if event.is_directory:
                continue
            src = os.fsdecode(event.src_path)
            if event.event_type == "moved":
                gone.add(src)
                came.add(os.fsdecode(event.dest_path))
            elif event.event_type == "deleted":
                gone.add(src)
            elif event.event_type == "created":
                came.add(src)
            else:
                touched.add(src)
        for path in sorted(gone | came | touched):
            if path in gone and path in came:
                self._note(path, "modified")  # replaced: there before the poll and after it
            elif path in gone or path in came:
                self._note(path, "deleted" if path in gone else "created")
            else:
                self._note(path, "modified")

    def _relative(self, path: str) -> str | None:
        # Every file event comes here (a checkout of thousands of files too): plain string work when the path
        # starts with the root as given (inotify's case), Path's rules otherwise (FSEvents' real paths,
        # Windows' case-insensitive ones).
        prefix = self._prefix
        if path.startswith(prefix):
            parts = path[len(prefix):].split(os.sep)
            return "/".join(parts) if parts[-1] and not SKIP_DIRS.intersection(parts[:-1]) else None
        for base in (self.root, self._real_root):
            with contextlib.suppress(ValueError):
                relative = Path(path).relative_to(base)
                if relative.parts and not SKIP_DIRS.intersection(relative.parts[:-1]):
                    return relative.as_posix()
                return None
        return None

    def _note(self, path: str, change: str) -> None:
        name = os.path.basename(path)
        if name.startswith(PROBE_PREFIX):  # a barrier's own file: never reported
            if (waiter := self._probes.pop(name, None)) is not None:
                self._fire(waiter)
            return
        self.generation += 1
        relative = self._relative(path)
        if relative is None:
            return
        self._changed[relative] = self.generation
        for changes in self._active.values():
            previous = changes.get(relative)
            # created then written stays "created"; created then deleted is gone; deleted then created is "modified"
            if previous == "created" and change == "modified":
                continue
            if previous == "created" and change == "deleted":
                del changes[relative]
                continue
            changes[relative] = "modified" if previous == "deleted" and change == "created" else change

    def _incomplete(self, why: str) -> None:
        self._missed = True
        self.generation += 1
        self._structural = self.generation
        for run_id in [*self._active, *self._opening]:
            self._notes.setdefault(run_id, why)

    def _limit_reached(self, message: str) -> None:
        key = message.split(":")[0]
        if key not in self._limits_logged:  # once per kind of limit, not once per directory
            self._limits_logged.add(key)
            log.warning("file changes: %s", message)
        self._incomplete(message)

    def _overflowed(self, message: str) -> None:
        log.warning("file changes: %s", message)
        self._incomplete(f"{message}: too many changes at once")
        # A barrier sent while the queue was full was dropped with the rest: nobody waits for it (a settle
        # would wait out its SETTLE_TIMEOUT). The runs concerned already say their lists may be incomplete.
        self._let_go(self._probes)
