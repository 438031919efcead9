"""Which workspace files a run touched: inotify (Linux) read on the event loop, no threads, no polling.

Watches are set up on the first run (one per directory, skipping .git, virtualenvs, node_modules and
caches, at most MAX_WATCHES). While runs execute, every created, written, deleted or moved file is
collected; when a run ends its changes are read (the kernel wrote them before it said it was idle) and
reported with its final status. Where inotify is unavailable, nothing is reported."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import logging
import os
import struct
import sys
from pathlib import Path

log = logging.getLogger(__name__)

MAX_WATCHES = 4000
MAX_REPORTED = 200
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", ".venv", "venv", "env", ".env", "node_modules", "__pycache__", ".mypy_cache",
     ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints", ".tox", ".cache", "dist", "build"}
)

_IN_MODIFY, _IN_CLOSE_WRITE, _IN_MOVED_FROM, _IN_MOVED_TO = 0x2, 0x8, 0x40, 0x80
_IN_CREATE, _IN_DELETE, _IN_Q_OVERFLOW, _IN_ISDIR, _IN_IGNORED = 0x100, 0x200, 0x4000, 0x40000000, 0x8000
_MASK = _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
_EVENT = struct.Struct("iIII")


class FileChanges:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._fd: int | None = None
        self._dirs: dict[int, Path] = {}
        self._active: dict[str, dict[str, str]] = {}  # run id -> {relative path: change}
        self._started = False
        self.unavailable: str | None = None

    # ---- life cycle -------------------------------------------------------------------------------------

    def _start(self) -> None:
        self._started = True
        if not sys.platform.startswith("linux"):
            self.unavailable = "file changes are only watched on Linux"
            return
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError) as exc:
            self.unavailable = f"inotify is unavailable: {exc}"
            return
        if fd < 0:
            self.unavailable = f"inotify is unavailable: {os.strerror(ctypes.get_errno())}"
            return
        self._libc, self._fd = libc, fd
        self._watch_tree(self.root)
        asyncio.get_running_loop().add_reader(fd, self._read)

    def _watch(self, directory: Path) -> bool:
        if self._fd is None or len(self._dirs) >= MAX_WATCHES:
            return False
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(directory), _MASK)
        if wd < 0:
            if ctypes.get_errno() == errno.ENOSPC:
                log.warning("inotify watch limit reached: file changes under %s are not all reported", directory)
            return False
        self._dirs[wd] = directory
        return True

    def _watch_tree(self, top: Path) -> list[Path]:
        """Watch `top` and the directories below it; returns the files found there."""
        stack, files = [top], []
        while stack and len(self._dirs) < MAX_WATCHES:
            directory = stack.pop()
            if not self._watch(directory):
                continue
            with contextlib.suppress(OSError), os.scandir(directory) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name not in SKIP_DIRS:
                            stack.append(Path(entry.path))
                    else:
                        files.append(Path(entry.path))
        return files

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._fd)
            os.close(self._fd)
            self._fd = None

    # ---- runs ------------------------------------------------------------------------------------------

    def begin(self, run_id: str) -> None:
        if not self._started:
            self._start()
        self._read()  # what happened before this run is not its doing
        self._active[run_id] = {}

    def end(self, run_id: str) -> list[dict[str, str]]:
        """The files this run created, modified, deleted or moved: [{path, change}], workspace-relative."""
        self._read()
        changes = self._active.pop(run_id, {})
        return [{"path": path, "change": change} for path, change in sorted(changes.items())[:MAX_REPORTED]]

    def _read(self) -> None:
        if self._fd is None:
            return
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                return
            if not data:
                return
            self._parse(data)

    def _parse(self, data: bytes) -> None:
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
            raw = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
            offset += _EVENT.size + length
            if mask & _IN_IGNORED:
                self._dirs.pop(wd, None)
                continue
            directory = self._dirs.get(wd)
            if directory is None or not raw:
                continue
            path = directory / os.fsdecode(raw)
            if mask & _IN_ISDIR:
                if mask & (_IN_CREATE | _IN_MOVED_TO) and path.name not in SKIP_DIRS:
                    # Files written into a new directory before its watch existed: found by the scan.
                    for found in self._watch_tree(path):
                        self._note(found, _IN_CREATE)
                continue
            self._note(path, mask)

    def _note(self, path: Path, mask: int) -> None:
        if not self._active:
            return
        try:
            relative = str(path.relative_to(self.root))
        except ValueError:
            return
        if mask & (_IN_DELETE | _IN_MOVED_FROM):
            change = "deleted"
        elif mask & (_IN_CREATE | _IN_MOVED_TO):
            change = "created"
        else:
            change = "modified"
        for changes in self._active.values():
            previous = changes.get(relative)
            # created then written stays "created"; created then deleted is gone; deleted then created is "modified"
            if previous == "created" and change == "modified":
                continue
            if previous == "created" and change == "deleted":
                del changes[relative]
                continue
            if previous == "deleted" and change == "created":
                change = "modified"
            changes[relative] = change
