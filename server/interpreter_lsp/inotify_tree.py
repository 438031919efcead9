"""A workspace's files watched through inotify, read on the event loop (Linux; file_observers.py's native path).

watchdog's inotify observer reads the descriptor in a thread of its own and turns what it read into events
in a second one: every event, and so each of a run's two barriers (files.py), waited for two thread
wake-ups before it reached the loop (0.65-0.8 ms a barrier measured on a 2-core VM, against 0.2 ms read
here). Here the descriptor is on the loop's selector (`add_reader`), its events are parsed by inotify_simple
and handed to `callback` in the order the kernel queued them, as watchdog's event objects (what files.py
reads).

What watchdog did, done here:
- One watch per directory (IN_ONLYDIR, IN_DONT_FOLLOW), none inside skipped directories, at most
  `max_watches` (then `on_limit` says where changes go unreported). The walk that places them runs wherever
  `start` is called (a worker thread: it walks the whole tree) before the descriptor is attached.
- A directory made or moved in gets its watches at once, and what it already holds is reported as created
  (files can be written into it before its watch exists).
- A move inside the workspace (IN_MOVED_FROM and IN_MOVED_TO with one cookie, queued together by the kernel)
  is one moved event; a directory moved also moves what it holds (each file reported moved) and the paths of
  its watches. A IN_MOVED_FROM whose partner is not in the same read waits for the next read (or
  MOVE_WAIT seconds): then it was a move out, reported deleted, and its directory's watches are removed
  (the kernel would go on reporting it under a path that is no longer its).
- An overflow of the kernel's queue (IN_Q_OVERFLOW) is said through `on_overflow` and the tree walked again
  for directories that came meanwhile.

Only changes are asked for: created, deleted, moved, and closed after writing (one event per written
file, not one per write)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
from collections.abc import Callable, Collection
from typing import Any

from inotify_simple import INotify, parse_events
from inotify_simple import flags as F
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileSystemEvent,
)

log = logging.getLogger(__name__)

MASK = (
    F.CREATE | F.DELETE | F.MOVED_FROM | F.MOVED_TO | F.CLOSE_WRITE
    | F.ONLYDIR | F.DONT_FOLLOW | F.EXCL_UNLINK
)
READ_BYTES = 64 * 1024  # ~2,000 events
MOVE_WAIT = 0.5  # how long a IN_MOVED_FROM alone waits for its IN_MOVED_TO before it is a move out

Callback = Callable[[FileSystemEvent], None]
Notify = Callable[[str], None]


class InotifyTree:
    """`start` (blocking: the walk), then `attach` on the loop; `stop` on the loop, any number of times."""

    def __init__(
        self, root: str, callback: Callback, *, skip: Collection[str], max_watches: int,
        on_limit: Notify, on_overflow: Notify,
    ) -> None:
        self.root = root
        self._callback = callback
        self._skip = frozenset(skip)
        self._max_watches = max_watches
        self._on_limit = on_limit
        self._on_overflow = on_overflow
        self._inotify: INotify | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._paths: dict[int, str] = {}  # watch -> its directory's path now
        self._watches: dict[str, int] = {}  # the reverse
        self._moved_from: Any = None  # a IN_MOVED_FROM whose partner was not in its read, until the next one
        self._wait: asyncio.TimerHandle | None = None
        self._reading = False  # in a read's callbacks (read_now then waits for the read under way)

    # ---- life cycle -------------------------------------------------------------------------------------

    def start(self) -> None:
        """Open the descriptor and watch the tree. Raises OSError when not even the root can be watched (EMFILE:
        no inotify instance left; ENOSPC: no watch left)."""
        self._inotify = INotify(nonblocking=True)
        try:
            self._watch_tree(self.root, report=False)
            if self.root not in self._watches:
                raise OSError(errno.ENOSPC, "the workspace's root could not be watched")
        except BaseException:
            self._inotify.close()
            self._inotify = None
            raise

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._inotify is None:
            return
        self._loop = loop
        loop.add_reader(self._inotify.fileno(), self._readable)

    def stop(self) -> None:
        if self._wait is not None:
            self._wait.cancel()
            self._wait = None
        inotify, self._inotify = self._inotify, None
        if inotify is None:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(inotify.fileno())
        inotify.close()  # removes every watch with it
        self._paths.clear()
        self._watches.clear()

    # ---- watches ----------------------------------------------------------------------------------------

    def _add_watch(self, path: str) -> bool:
        assert self._inotify is not None
        # Asked of the kernel even for a path watched already: it gives the same watch for the same directory,
        # and a new one for another directory at that path (the one removed there may keep its watch until
        # whoever still holds it lets go).
        known = self._watches.get(path)
        if known is None and len(self._watches) >= self._max_watches:
            self._on_limit(f"more than {self._max_watches} directories: changes below {path} are not reported")
            return False
        try:
            wd = self._inotify.add_watch(path, MASK)
        except OSError as exc:
            if path == self.root and not self._watches:
                raise
            if exc.errno == errno.ENOSPC:
                self._on_limit(
                    "the system's inotify watch limit is reached: changes below "
                    f"{path} are not reported (raise fs.inotify.max_user_watches)"
                )
            return False  # gone or unreadable meanwhile: its parent's events still say what happens to it
        if known is not None and known != wd:
            self._paths.pop(known, None)  # the directory that had this path: gone (its IN_IGNORED comes later)
        if (stale := self._paths.get(wd)) is not None and stale != path:
            self._watches.pop(stale, None)  # the same directory under another path: moved
        self._paths[wd] = path
        self._watches[path] = wd
        return True

    def _watch_tree(self, top: str, *, report: bool) -> None:
        """Watch `top` and the directories below it (not skipped ones); `report`: say what is in them as created
        (a directory made or moved in while the run wrote into it)."""
        stack = [top]
        while stack:
            directory = stack.pop()
            if not self._add_watch(directory):
                continue
            try:
                with os.scandir(directory) as entries:
                    for entry in entries:
                        is_dir = entry.is_dir(follow_symlinks=False)
                        if is_dir and entry.name in self._skip:
                            if report:
                                self._callback(DirCreatedEvent(entry.path))
                            continue
                        if report:
                            self._callback(DirCreatedEvent(entry.path) if is_dir else FileCreatedEvent(entry.path))
                        if is_dir:
                            stack.append(entry.path)
            except OSError:
                continue  # removed or unreadable meanwhile

    def _watched_below(self, top: str) -> list[str]:
        """The watched paths of `top` and the directories under it."""
        below = os.path.join(top, "")
        return [p for p in self._watches if p == top or p.startswith(below)]

    def _unwatch_tree(self, top: str) -> None:
        assert self._inotify is not None
        for path in self._watched_below(top):
            wd = self._watches.pop(path)
            self._paths.pop(wd, None)
            with contextlib.suppress(OSError):  # already gone with its directory
                self._inotify.rm_watch(wd)

    def _move_watches(self, src: str, dest: str) -> None:
        """A directory moved inside the workspace keeps its watches (they follow the directory, not the path):
        only their paths change. Done here, not left to placing the watches again (which gives the same ones):
        a directory moved onto an empty one replaces it, whose watch still holds `dest` until its IN_IGNORED."""
        for path in self._watched_below(src):
            wd = self._watches.pop(path)
            moved = dest + path[len(src):]
            self._paths[wd] = moved
            self._watches[moved] = wd

    # ---- events (on the loop) ---------------------------------------------------------------------------

    def read_now(self) -> None:
        """Read what the descriptor holds now, as its wake-up would (on the loop's thread, once attached; a
        call from within a read's own callbacks does nothing: the read under way goes on in order)."""
        if self._loop is not None and not self._reading:
            self._readable()

    def _readable(self) -> None:
        if self._inotify is None:
            return
        self._reading = True
        try:
            self._read()
        finally:
            self._reading = False

    def _read(self) -> None:
        assert self._inotify is not None
        try:
            # At most READ_BYTES a wake-up (the kernel returns whole events only): a burst (a checkout, an
            # archive unpacked) is taken a slice per loop iteration, between the loop's other work.
            events = list(parse_events(os.read(self._inotify.fileno(), READ_BYTES)))
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EINTR):
                return
            log.warning("file changes: reading inotify failed (%s)", exc)
            self._on_overflow(f"reading inotify failed ({exc})")
            return
        if self._wait is not None:
            self._wait.cancel()
            self._wait = None
        pending, self._moved_from = self._moved_from, None
        if pending is not None:
            events.insert(0, pending)
        # A rename's IN_MOVED_TO, by cookie (each rename has its own): found in one pass, not by a scan of the
        # rest of the read for each IN_MOVED_FROM (2,000 files moved out of the workspace would be 4 M steps).
        arrivals = {e.cookie: i for i, e in enumerate(events) if e.mask & F.MOVED_TO}
        paired: set[int] = set()
        for index, event in enumerate(events):
            if index in paired:
                continue
            if event.mask & F.MOVED_FROM:
                partner = arrivals.get(event.cookie)
                if partner is not None and partner > index:
                    paired.add(partner)
                    self._moved(event, events[partner])
                elif index == len(events) - 1 and self._loop is not None:
                    # Its partner may be in the next read: wait for that read, or for MOVE_WAIT.
                    self._moved_from = event
                    self._wait = self._loop.call_later(MOVE_WAIT, self._moved_out_late)
                else:
                    self._moved(event, None)
                continue
            self._handle(event)

    def _moved_out_late(self) -> None:
        self._wait = None
        pending, self._moved_from = self._moved_from, None
        if pending is not None and self._inotify is not None:
            self._moved(pending, None)

    def _path(self, event: Any) -> str | None:
        directory = self._paths.get(event.wd)
        return None if directory is None else os.path.join(directory, event.name)

    def _handle(self, event: Any) -> None:
        mask = event.mask
        if mask & F.Q_OVERFLOW:
            self._on_overflow("the kernel's inotify event queue overflowed")
            self._watch_tree(self.root, report=False)  # directories made meanwhile get their watches
            return
        if mask & F.IGNORED:  # the watch is gone (its directory removed, or rm_watch)
            if (path := self._paths.pop(event.wd, None)) is not None and self._watches.get(path) == event.wd:
                del self._watches[path]
            return
        path = self._path(event)
        if path is None or not event.name:
            return  # an event on a watched directory itself (IN_DELETE_SELF and the like): its parent says it
        is_dir = bool(mask & F.ISDIR)
        if mask & (F.CREATE | F.MOVED_TO):  # a IN_MOVED_TO alone: moved in from outside
            if not is_dir:
                self._callback(FileCreatedEvent(path))
                return
            self._callback(DirCreatedEvent(path))
            if os.path.basename(path) not in self._skip:
                self._watch_tree(path, report=True)
        elif mask & F.DELETE:
            self._callback(DirDeletedEvent(path) if is_dir else FileDeletedEvent(path))
        elif mask & F.CLOSE_WRITE:
            self._callback(FileClosedEvent(path))

    def _moved(self, source: Any, dest_event: Any | None) -> None:
        src = self._path(source)
        if src is None:
            if dest_event is not None:
                self._handle(dest_event)  # from a directory no longer watched: as moved in
            return
        is_dir = bool(source.mask & F.ISDIR)
        dest = self._path(dest_event) if dest_event is not None else None
        if dest is None:  # moved out of the workspace
            if is_dir:
                self._unwatch_tree(src)
                self._callback(DirDeletedEvent(src))
            else:
                self._callback(FileDeletedEvent(src))
            return
        if not is_dir:
            self._callback(FileMovedEvent(src, dest))
            return
        self._callback(DirMovedEvent(src, dest))
        if os.path.basename(dest) in self._skip:
            self._unwatch_tree(src)  # into a skipped name: no longer watched, its files no longer reported
            return
        self._move_watches(src, dest)
        # What it holds moved with it (each file under its new path, from where it was); a directory that was
        # not watched (it had a skipped name) gets its watches now.
        stack = [dest]
        while stack:
            directory = stack.pop()
            self._add_watch(directory)
            try:
                with os.scandir(directory) as entries:
                    for entry in entries:
                        is_sub = entry.is_dir(follow_symlinks=False)
                        old = src + entry.path[len(dest):]
                        self._callback(DirMovedEvent(old, entry.path) if is_sub else FileMovedEvent(old, entry.path))
                        if is_sub and entry.name not in self._skip:
                            stack.append(entry.path)
            except OSError:
                continue
