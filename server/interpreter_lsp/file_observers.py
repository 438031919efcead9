"""The watchdog observers behind files.py. Built in a worker thread on the first run (starting one walks the
workspace), imported only then (the server answers `initialize` without loading watchdog).

- inotify (Linux): watchdog's InotifyObserver with a watch group that places no watch inside skipped
  directories and at most `max_watches` in all. watchdog has no public way to do this (its ignore patterns
  filter events after the watches exist, gorakhargosh/watchdog#212): the group overrides the methods that
  walk the tree, found by name; a watchdog release without them (6.x on Python 3.10) gets the plain observer.
  It also says when the kernel's event queue overflowed (watchdog only logs it).
- FSEvents (macOS), ReadDirectoryChangesW (Windows): one recursive watch of the root, which costs nothing
  per directory there; files.py drops events from skipped directories.
- polling: watchdog's PollingObserverVFS, whose listing never enters skipped directories, every `interval`
  seconds: the portable path (INTERPRETER_LSP_PORTABLE=1) and the fallback when no native one can start.

Every event is handed to `ToLoop`, which crosses to the event loop with call_soon_threadsafe and nothing else;
the inotify emitter hands it over from its own thread (watchdog's dispatcher thread is not on the way).
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import logging
import os
import threading
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers.api import BaseObserver

log = logging.getLogger(__name__)

Notify = Callable[[str], None]  # thread-safe: it only schedules a call on the loop


class ToLoop(FileSystemEventHandler):
    """Runs on watchdog's dispatcher thread: every event goes to `callback` on the loop, in order."""

    def __init__(self, loop: Any, callback: Callable[[FileSystemEvent], None]) -> None:
        super().__init__()
        self._loop = loop
        self._callback = callback

    def dispatch(self, event: FileSystemEvent) -> None:
        try:
            self._loop.call_soon_threadsafe(self._callback, event)
        except RuntimeError:
            pass  # the loop is closed: the server is exiting


@dataclass
class Built:
    observer: BaseObserver
    kind: str  # "inotify" | "fsevents" | "windows" | "polling"
    # Polling only: ask for a `batch_end` event (tagged with this number) after the next poll that starts
    # from now on, even if it changed nothing (a barrier with no file in the workspace).
    request_batch_end: Callable[[int], None] | None = None


def start(
    root: str,
    handler: ToLoop,
    *,
    polling: bool,
    batch_end: str,
    skip: Collection[str],
    max_watches: int,
    interval: float,
    on_limit: Notify,
    on_overflow: Notify,
) -> Built:
    """Schedule `root` recursively and start the observer (blocking: run it in a worker thread)."""
    built: Built | None = None
    if not polling:
        try:
            built = _native(root, handler, skip, max_watches, on_limit, on_overflow)
        except Exception as exc:
            # EMFILE: the per-user inotify instance limit; ENOSPC: no watch left even for the root. Anything
            # else (a watchdog release whose internals moved) is a bug to log, but files are still watched.
            limits = isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENOSPC)
            hint = " (raise fs.inotify.max_user_instances / max_user_watches)" if limits else ""
            log.warning(
                "the native file watcher cannot start (%s)%s; polling every %.1f s instead",
                exc, hint, interval, exc_info=not isinstance(exc, OSError),
            )
    if built is None:
        built = _polling(root, handler, skip, max_watches, interval, on_limit, batch_end)
    return built


# ---- native ----------------------------------------------------------------------------------------------

# Directories too: one made, moved or removed can bring files no event names (an empty one made, one moved
# out of the workspace): files.py then has the workspace looked at whole again.
_CHANGES: list[type[FileSystemEvent]] = [
    FileCreatedEvent, FileDeletedEvent, FileMovedEvent, DirCreatedEvent, DirDeletedEvent, DirMovedEvent,
]


def _native(
    root: str, handler: ToLoop, skip: Collection[str], max_watches: int, on_limit: Notify, on_overflow: Notify
) -> Built | None:
    from watchdog.observers import Observer

    name = Observer.__name__
    if name == "InotifyObserver":
        # IN_CLOSE_WRITE ("closed") instead of IN_MODIFY: one event per written file, not one per write().
        observer = _inotify_observer(handler, skip, max_watches, on_limit, on_overflow)
        if observer is None:
            # watchdog 6 (Python 3.10) has no watch group to extend: its plain observer watches the whole
            # tree, skipped directories included (their events are dropped by files.py); a watch limit
            # still falls back to polling.
            log.info("watching the whole workspace with watchdog's inotify observer (skipped directories too)")
            observer = Observer()
        _schedule_and_start(observer, handler, root, [*_CHANGES, FileClosedEvent])
        return Built(observer, "inotify")
    if name in ("FSEventsObserver", "WindowsApiObserver"):
        native = Observer()
        _schedule_and_start(native, handler, root, [*_CHANGES, FileModifiedEvent])
        return Built(native, "fsevents" if name == "FSEventsObserver" else "windows")
    # kqueue (BSD) opens a descriptor per file, skipped directories included: polling costs less.
    return None


def _schedule_and_start(
    observer: BaseObserver, handler: ToLoop, root: str, events: list[type[FileSystemEvent]]
) -> None:
    try:
        observer.schedule(handler, root, recursive=True, event_filter=events)
        observer.start()
    except BaseException:
        observer.stop()  # nothing half-started stays behind
        raise


def _inotify_observer(
    handler: ToLoop, skip: Collection[str], max_watches: int, on_limit: Notify, on_overflow: Notify
) -> BaseObserver | None:
    try:
        from watchdog.observers.inotify import InotifyEmitter, InotifyWatchGroup
    except Exception as exc:  # UnsupportedLibcError and the like
        log.warning("watchdog's inotify observer is unavailable: %s", exc)
        return None
    fields = {f.name for f in dataclasses.fields(InotifyWatchGroup)}
    needed = {"_inotify_fd", "_active_callbacks_by_path", "_active_callbacks_by_watch", "_id", "path"}
    methods = ("_add_all_callbacks", "_add_callback", "_recursive_simulate", "on_queue_overflow")
    if not needed <= fields or not all(hasattr(InotifyWatchGroup, m) for m in methods):
        log.warning("this watchdog release has other inotify internals; skipped directories get watches too")
        return None
    skip_bytes = frozenset(os.fsencode(name) for name in skip)

    class Group(InotifyWatchGroup):
        def _add_all_callbacks(self, path: bytes) -> None:
            # watchdog's walk enters every directory; this one stops at skipped ones and at the budget.
            stack = [path]
            while stack:
                directory = stack.pop()
                if not self._add_callback(directory) or not self.is_recursive:
                    continue
                try:
                    with os.scandir(directory) as entries:
                        for entry in entries:
                            if entry.is_dir(follow_symlinks=False) and entry.name not in skip_bytes:
                                stack.append(entry.path)
                except OSError:
                    continue

        def _add_callback(self, path: bytes) -> bool:  # type: ignore[override]
            if path != self.path and os.path.basename(path) in skip_bytes:
                return False
            if len(self._active_callbacks_by_path) >= max_watches:
                on_limit(f"more than {max_watches} directories: changes below {os.fsdecode(path)} are not reported")
                return False
            try:
                wd = self._inotify_fd.add_callback(path, self.event_mask, self._callback, self._id)
            except OSError as exc:
                if path == self.path:
                    raise
                if exc.errno == errno.ENOSPC:
                    on_limit(
                        "the system's inotify watch limit is reached: changes below "
                        f"{os.fsdecode(path)} are not reported (raise fs.inotify.max_user_watches)"
                    )
                return False  # vanished or unreadable meanwhile
            self._active_callbacks_by_path[path] = wd
            self._active_callbacks_by_watch[wd] = path
            return True

        def _recursive_simulate(self, src_path: bytes) -> list[Any]:
            if os.path.basename(src_path) in skip_bytes:
                return []  # not watched: no walk through a new node_modules
            return super()._recursive_simulate(src_path)

        def on_queue_overflow(self) -> None:
            super().on_queue_overflow()  # rebuilds the watches (through the walk above)
            on_overflow("the kernel's inotify event queue overflowed")

    class Emitter(InotifyEmitter):
        def queue_event(self, event: FileSystemEvent) -> None:
            # Straight to the loop from this thread, not through the observer's queue and its dispatcher
            # thread: one thread hand-off less for every event (a run's two barriers each wait on one).
            # The filter is the watch's, as watchdog's own queue_event applies it.
            kinds = getattr(self, "_event_filter", None)
            if kinds is None or any(isinstance(event, kind) for kind in kinds):
                handler.dispatch(event)

        def on_thread_start(self) -> None:
            self._inotify = Group(
                self._inotify_fd,
                os.fsencode(self.watch.path),
                is_recursive=self.watch.is_recursive,
                event_mask=self.get_event_mask_from_filter(),
                follow_symlink=self.watch.follow_symlink,
            )

    return BaseObserver(Emitter)


# ---- polling ---------------------------------------------------------------------------------------------


def _polling(
    root: str,
    handler: ToLoop,
    skip: Collection[str],
    max_watches: int,
    interval: float,
    on_limit: Notify,
    batch_end: str,
) -> Built:
    from watchdog.observers.polling import PollingEmitter

    listed = 0

    def listdir(path: str | None) -> Iterator[os.DirEntry[str]]:
        # Called for every directory of a snapshot, the root first: skipped ones are never entered.
        nonlocal listed
        listed = 1 if path == root else listed + 1
        if listed > max_watches:
            on_limit(f"more than {max_watches} directories: changes below {path} are not reported")
            return iter(())
        with os.scandir(path) as entries:
            kept = [e for e in entries if not (e.name in skip and e.is_dir(follow_symlinks=False))]
        return iter(kept)

    asked = [0]  # the highest barrier number asked for (set from the loop's thread; an int swap is atomic)
    # A barrier asked for starts the next poll at once instead of at the end of the period: a run's `begin`
    # and `settle` wait for a poll, which took up to two periods (~1 s added to every run on this path).
    wake = threading.Event()

    class Emitter(PollingEmitter):
        """One poll's changes come out as a set, in no particular order: after a poll that changed anything,
        or one that started after a barrier was asked for, a last event on `batch_end-N` (a path that never
        exists; N the highest barrier asked for before the poll started) says the set is complete."""

        def queue_events(self, timeout: float) -> None:
            wake.wait(timeout)  # the period, or until a barrier is asked for (or the observer stops)
            wake.clear()
            wanted = asked[0]  # read after the clear, before the snapshot: that snapshot starts after the request
            self._changed = False
            super().queue_events(0)  # its own wait is the period: done above
            done = getattr(self, "_done", 0)
            if (self._changed or wanted > done) and self.should_keep_running():
                self._done = max(done, wanted)
                self.queue_event(FileModifiedEvent(f"{batch_end}-{wanted}"))

        def on_thread_stop(self) -> None:
            super().on_thread_stop()
            wake.set()  # a stop must not wait out the period

        def queue_event(self, event: FileSystemEvent) -> None:
            self._changed = True
            if isinstance(event, (FileMovedEvent, DirMovedEvent)):
                # watchdog pairs a path gone with a path come by inode, and a freed inode is reused at once:
                # a file deleted and a directory made in one poll came out as the file "moved" onto the
                # directory. To a user a move is one path gone and one come anyway; each side's kind is
                # read from its own snapshot (the new one is already `_snapshot` here).
                gone = DirDeletedEvent if event.is_directory else FileDeletedEvent
                came = DirCreatedEvent if self._snapshot.isdir(event.dest_path) else FileCreatedEvent
                super().queue_event(gone(event.src_path))
                super().queue_event(came(event.dest_path))
                return
            super().queue_event(event)

    def request(number: int) -> None:
        asked[0] = max(asked[0], number)  # before the wake: the poll it starts reads it
        wake.set()

    # lstat: a symlink to a directory is not followed (no cycles, nothing outside the workspace).
    emitter = functools.partial(Emitter, stat=os.lstat, listdir=listdir)
    observer = BaseObserver(emitter, timeout=interval)  # type: ignore[arg-type]
    _schedule_and_start(observer, handler, root, [*_CHANGES, FileModifiedEvent])
    return Built(observer, "polling", request)
