"""The observers behind files.py. Built in a worker thread on the first run (starting one walks the
workspace), imported only then (the server answers `initialize` without loading watchdog).

- inotify (Linux): inotify_tree.py, read on the event loop (no thread between an event and the loop), one
  watch per directory, none inside skipped directories, at most `max_watches` in all.
- FSEvents (macOS), ReadDirectoryChangesW (Windows): watchdog's observer, one recursive watch of the root,
  which costs nothing per directory there; files.py drops events from skipped directories.
- polling: watchdog's PollingObserverVFS, whose listing never enters skipped directories, every `interval`
  seconds: the portable path (INTERPRETER_LSP_PORTABLE=1) and the fallback when no native one can start.

watchdog's observers hand every event to `ToLoop`, which crosses to the event loop with
call_soon_threadsafe and nothing else; the inotify tree calls the loop's callback directly, once
`Built.attach` has put its descriptor on the loop.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import sys
import threading
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
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
        self.loop = loop
        self.callback = callback  # on the loop's thread only

    def dispatch(self, event: FileSystemEvent) -> None:
        try:
            self.loop.call_soon_threadsafe(self.callback, event)
        except RuntimeError:
            pass  # the loop is closed: the server is exiting


class Stoppable(Protocol):
    def stop(self) -> None: ...


@dataclass
class Built:
    observer: Stoppable  # stop() it on the loop's thread
    kind: str  # "inotify" | "fsevents" | "windows" | "polling"
    # Polling only: ask for a `batch_end` event (tagged with this number) after the next poll that starts
    # from now on, even if it changed nothing (a barrier with no file in the workspace).
    request_batch_end: Callable[[int], None] | None = None
    # inotify only: put its descriptor on the loop (call it on the loop's thread, once built).
    attach: Callable[[], None] | None = None
    # inotify only: read what its descriptor holds now (on the loop's thread, once attached): a barrier's event
    # is queued by the system call that sends it, so it can be read at once instead of on the next wake-up.
    read_now: Callable[[], None] | None = None


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
            # else is a bug to log, but files are still watched.
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
    if sys.platform.startswith("linux"):
        from .inotify_tree import InotifyTree

        tree = InotifyTree(
            root, handler.callback, skip=skip, max_watches=max_watches, on_limit=on_limit, on_overflow=on_overflow
        )
        tree.start()
        return Built(tree, "inotify", attach=lambda: tree.attach(handler.loop), read_now=tree.read_now)

    from watchdog.observers import Observer

    name = Observer.__name__
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
