"""Pre-images of workspace files, so undo can put back what a run wrote, created or deleted: whoever wrote it
(the code, a `!cmd`, a subprocess, a process the run started).

A pre-image must exist *before* the write, and no event from the file watcher comes before it (inotify's
IN_OPEN reaches us through watchdog's thread after the write may have happened). So at the start of every
local run the workspace is snapshot: a walk that `lstat`s every file (the watcher's skipped directories are
not entered) and copies into a content-addressed store only the files whose signature (mtime, ctime, size,
inode) changed since the previous snapshot; the first snapshot of a session copies the whole workspace once.
Which files a run changed comes from the files tracker (files.py) when the run ends; their pre-images are
the ones of the run's own snapshot.

The store lives beside the conversation's history, in the server's per-workspace state (never inside the
workspace, where code and the model could read or change it): `<state>/undo/<workspace>-<digest>/<pid>/`
(0700), one blob per distinct content, named by its sha256. It is bounded (`limit` bytes): past it a file is not copied
and undo names it as not restorable, with the reason; nearing it, blobs no run still needs are freed. It
holds this session's pre-images only: a server's store is removed by the next server that finds its
process gone (runs of an earlier session are named as not restorable).
ext4 has no reflink; where the file system has one (btrfs, XFS) the copy is a FICLONE.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .files import PROBE_PREFIX, SKIP_DIRS
from .history import history_file

log = logging.getLogger(__name__)

STORE_LIMIT = 2 * 1024**3  # bytes of pre-images kept per workspace and session
FICLONE = 0x40049409  # linux/fs.h
RACY_NS = 50_000_000  # a file changed this close before a walk is read again at the next one (> a tick)

Signature = tuple[int, int, int, int, int]  # mtime_ns, ctime_ns, size, inode, mode


def store_dir(root: Path) -> Path:
    """Beside the workspace's history file (history.py), never inside the workspace; one directory per
    server process (two editors on one folder each keep their own)."""
    history = history_file(root)
    return history.parent.parent / "undo" / history.stem / str(os.getpid())


def _remove_stale(parent: Path, mine: Path) -> None:
    """The stores of servers that ended (their pid is gone): their runs are out of reach."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            if entry.name.isdigit() and entry.path != str(mine) and not _alive(int(entry.name)):
                shutil.rmtree(entry.path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's: not ours to remove
    return True


@dataclass
class Snapshot:
    """What the workspace held when a run started: relative path -> (signature, sha256 or None when it was
    not copied), and why a file could not be copied; and its directories (None: not known), so that undo removes
    only the directories that came after."""

    files: dict[str, tuple[Signature, str | None]]
    uncopied: dict[str, str] = field(default_factory=dict)
    dirs: frozenset[str] | None = None

    def copy(self) -> Snapshot:
        """A copy whose tables can change without touching this one (a run's record; the kept one stays)."""
        return Snapshot(dict(self.files), dict(self.uncopied), self.dirs)


@dataclass
class _Look:
    """A snapshot being made: what `snapshot` or `update` found so far."""

    files: dict[str, tuple[Signature, str | None]]
    uncopied: dict[str, str]
    racy: set[str] = field(default_factory=set)
    # File times are coarse (a clock tick of some ms): a file written just before this look can be written
    # again with the same size and times. Such a file is read again next time ("racy git").
    racy_after: int = field(default_factory=lambda: time.time_ns() - RACY_NS)


def signature(st: os.stat_result) -> Signature:
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode)


class PreimageStore:
    def __init__(self, root: Path, directory: Path | None = None, *, limit: int = STORE_LIMIT) -> None:
        self.root = root
        self.directory = directory or store_dir(root)
        self.blobs = self.directory / "blobs"
        self.limit = limit
        self.used = 0
        self._index: dict[str, tuple[Signature, str | None]] = {}
        self._rehash: set[str] = set()  # read_again: hashed first, copied only if the store lacks that content
        self._racy: set[str] = set()  # changed too close to the last walk for its signature to tell
        self._prepared = False

    # ---- capture (blocking: called in a worker thread) -----------------------------------------------

    def snapshot(self) -> Snapshot:
        """Copy what changed since the last snapshot; return the workspace as it is now."""
        if not self._prepared:
            # Pre-images of an earlier session belong to runs this one does not know: start empty.
            shutil.rmtree(self.directory, ignore_errors=True)
            _remove_stale(self.directory.parent, self.directory)
            self.blobs.mkdir(parents=True, exist_ok=True, mode=0o700)
            for directory in (self.directory.parent, self.directory):
                os.chmod(directory, 0o700)
            self._prepared = True
        look = _Look({}, {})
        dirs: list[str] = []
        for relative, st in self._walk(dirs):
            self._record(look, relative, st)
        self._index, self._racy = look.files, look.racy
        return Snapshot(dict(look.files), look.uncopied, frozenset(dirs))

    def update(self, previous: Snapshot, paths: set[str]) -> Snapshot:
        """`previous`, the last snapshot, with `paths` looked at again (and the files it could not copy or read
        too close to its walk): what `snapshot` would find when only those changed since, without a walk.
        The files tracker says which (FileChanges.changed_since)."""
        look = _Look(dict(previous.files), dict(previous.uncopied))
        again = set(paths) | self._racy | set(look.uncopied) | {
            path for path, (_sig, digest) in look.files.items() if digest is None
        }
        for relative in sorted(again):
            look.files.pop(relative, None)
            look.uncopied.pop(relative, None)
            if os.path.basename(relative).startswith(PROBE_PREFIX):
                continue
            try:
                st = os.lstat(self.root / relative)
            except OSError:
                continue  # gone (or its directory is)
            if stat.S_ISREG(st.st_mode):  # as the walk: regular files only
                self._record(look, relative, st)
        self._index, self._racy = look.files, look.racy
        # A directory is never made or removed unseen here (the tracker has a walk made then), but the ones
        # holding the files looked at again are there now, whatever the last walk found.
        dirs = set(previous.dirs or ())
        for relative in again:
            parent = os.path.dirname(relative)
            while parent and parent not in dirs and os.path.isdir(self.root / parent):
                dirs.add(parent)
                parent = os.path.dirname(parent)
        return Snapshot(dict(look.files), look.uncopied, frozenset(dirs) if previous.dirs is not None else None)

    def _record(self, look: _Look, relative: str, st: os.stat_result) -> None:
        """One regular file into `look`: its copy already in the store when its signature is the one copied
        (and it was not read within a clock tick of the last look), else copied now."""
        sig = signature(st)
        known = self._index.get(relative)
        if known is not None and known[0] == sig and known[1] is not None and relative not in self._racy:
            look.files[relative] = known
            return
        digest, why = self._copy(relative, st.st_size)
        look.files[relative] = (sig, digest)
        if why:
            look.uncopied[relative] = why
        if max(st.st_mtime_ns, st.st_ctime_ns) >= look.racy_after:
            look.racy.add(relative)

    def changes_since(self, before: Snapshot) -> dict[str, str]:
        """What differs now from `before` by a stat walk, nothing copied: relative path -> created | modified |
        deleted. Net changes only (a file made and removed again is not there)."""
        now = {relative: signature(st) for relative, st in self._walk()}
        changes = {path: "deleted" for path in before.files if path not in now}
        for path, sig in now.items():
            known = before.files.get(path)
            if known is None:
                changes[path] = "created"
            elif known[0] != sig:
                changes[path] = "modified"
        return changes

    def _walk(self, dirs: list[str] | None = None) -> list[tuple[str, os.stat_result]]:
        """The workspace's files (skipped directories left out); its directories go to `dirs` if given."""
        found: list[tuple[str, os.stat_result]] = []
        stack = [""]
        while stack:
            relative_dir = stack.pop()
            try:
                with os.scandir(self.root / relative_dir if relative_dir else self.root) as entries:
                    for entry in entries:
                        relative = f"{relative_dir}/{entry.name}" if relative_dir else entry.name
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        if stat.S_ISDIR(st.st_mode):
                            if entry.name not in SKIP_DIRS:
                                stack.append(relative)
                                if dirs is not None:
                                    dirs.append(relative)
                        elif stat.S_ISREG(st.st_mode) and not entry.name.startswith(PROBE_PREFIX):
                            found.append((relative, st))
            except OSError:
                continue
        return found

    def _copy(self, relative: str, size: int) -> tuple[str | None, str | None]:
        """Hash and copy one file into the store: (sha256, None), or (None, why not)."""
        if self.used + size > self.limit:
            return None, (
                f"the undo store is full ({self.limit // 1024**2} MiB of pre-images this session): "
                f"{relative} ({size // 1024**2} MiB) was not copied before the run"
            )
        if relative in self._rehash:
            self._rehash.discard(relative)
            known = self._stored_as(relative)
            if known is not None:
                return known, None
        temporary = self.blobs / f".in-{os.getpid()}-{abs(hash(relative))}"
        digest = hashlib.sha256()
        try:
            from .safety.paths import open_inside  # here, not at the server's start (~2 ms of its imports)

            # Never through a link: kernel code may swap a directory of this path for a link to elsewhere
            # between the walk (or the tracker's event) and this open.
            source = open_inside(self.root, relative)
            try:
                with open(temporary, "wb") as out:
                    cloned = False
                    with contextlib.suppress(OSError, ImportError):
                        import fcntl

                        fcntl.ioctl(out.fileno(), FICLONE, source)
                        cloned = True
                    while chunk := os.read(source, 1 << 20):
                        digest.update(chunk)
                        if not cloned:
                            out.write(chunk)
            finally:
                os.close(source)
            name = digest.hexdigest()
            blob = self.blobs / name
            if blob.exists():
                temporary.unlink()
            else:
                os.replace(temporary, blob)
                self.used += size
            return name, None
        except OSError as exc:
            with contextlib.suppress(OSError):
                temporary.unlink()
            return None, f"{relative} could not be copied before the run ({exc.strerror or exc})"

    def _stored_as(self, relative: str) -> str | None:
        """The digest of the file's content if the store holds that content already (one read, no write)."""
        from .safety.paths import open_inside

        digest = hashlib.sha256()
        try:
            source = open_inside(self.root, relative)
            try:
                while chunk := os.read(source, 1 << 20):
                    digest.update(chunk)
            finally:
                os.close(source)
        except OSError:
            return None  # the copy says why
        name = digest.hexdigest()
        return name if (self.blobs / name).exists() else None

    def collect(self, needed: set[str]) -> None:
        """Free the blobs nothing needs: neither a kept run's pre-image nor the workspace's current content
        (the next run's pre-image)."""
        keep = needed | {digest for _sig, digest in self._index.values() if digest is not None}
        try:
            entries = list(os.scandir(self.blobs))
        except OSError:
            return
        for entry in entries:
            if entry.name not in keep and not entry.name.startswith(".in-"):
                with contextlib.suppress(OSError):
                    size = entry.stat(follow_symlinks=False).st_size
                    os.unlink(entry.path)
                    self.used -= size

    # ---- restore -------------------------------------------------------------------------------------

    def content(self, digest: str) -> bytes:
        return (self.blobs / digest).read_bytes()

    def read_again(self, paths: Iterable[str]) -> None:
        """The next look copies these files whatever their signatures say (mapped writable: a write through
        the map can leave a file's size and times as they were). Hashed before they are copied: most of the
        time their content is already in the store, and a large map is then read, not written again."""
        for relative in paths:
            self._index.pop(relative, None)
            self._rehash.add(relative)

    def current(self, relative: str) -> Signature | None:
        try:
            return signature(os.lstat(self.root / relative))
        except OSError:
            return None

    def stored_bytes(self) -> int:
        return self.used

    @property
    def racy(self) -> bool:
        """Some file changed too close to the last walk: the next one reads it again."""
        return bool(self._racy)
