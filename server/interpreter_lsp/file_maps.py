"""Workspace files a local kernel maps writable and shared (mmap, numpy.memmap): writes through such a map
raise no file event and may leave a file's size and times as they were, so neither the files tracker nor a
walk's signatures can say whether a run changed it. Undo (undo.py) reads these files again, by content,
at each of its snapshots while they are mapped, and gives a change found there to the run before.

Linux only (/proc/<pid>/maps of every process in the kernel's tree); elsewhere nothing is found, and such
writes stay unseen there (docs/architecture.md says so). Reading a kernel's maps costs ~1 ms for a kernel
with pandas loaded (~0.6 ms of it the kernel formatting ~740 lines; the lines are parsed only when some map
is shared and writable): done in a thread, after a run, never on its path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from .files import PROBE_PREFIX, SKIP_DIRS
from .kernels.launcher import children_of

# address perms offset device inode path: shared ("s") and writable ("w") mappings of a named file.
_SHARED_WRITABLE = re.compile(rb"^[0-9a-f]+-[0-9a-f]+ .w.s [0-9a-f]+ \S+ \d+ +(/.*)$", re.MULTILINE)
# What every such line holds (perms "rw-s", "-w-s", "rwxs", "-wxs"): most processes have none, and the search
# for these (memchr speed) spares them the pattern, which is tried at every offset (~0.8 ms for 740 lines).
_MARKS = (b"w-s ", b"wxs ")
_DELETED = b" (deleted)"


def _cmdline(pid: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _tree(roots: Iterable[int]) -> list[int]:
    """The processes of the kernels' trees, without the forks that run the same program as their parent
    (the variables' snapshots, kernels/snapshot_kernel.py: a copy of the kernel's maps, read once already)."""
    found: list[int] = []
    pending = [(pid, None) for pid in roots]
    seen: set[int] = set()
    while pending:
        pid, parent_cmdline = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        cmdline = _cmdline(pid)
        if cmdline is None:
            continue  # gone meanwhile
        if cmdline != parent_cmdline:
            found.append(pid)
        pending.extend((child, cmdline) for child in children_of(pid))
    return found


def mapped(roots: Iterable[int], root: Path) -> set[str]:
    """Workspace-relative paths of the regular files mapped writable and shared by the processes of the
    trees under `roots` (the kernels' pids), outside the directories the tracker skips. Blocking."""
    if not os.path.isdir("/proc/self"):
        return set()
    base = os.fsencode(os.path.realpath(root)) + b"/"
    found: set[str] = set()
    for pid in _tree(roots):
        try:
            with open(f"/proc/{pid}/maps", "rb") as handle:
                data = handle.read()
        except OSError:
            continue  # gone, or not ours to read
        if not any(mark in data for mark in _MARKS):
            continue
        for match in _SHARED_WRITABLE.finditer(data):
            path = match.group(1)
            # " (deleted)": the file was removed while mapped, unless a file of that very name is there.
            if not path.startswith(base) or (path.endswith(_DELETED) and not os.path.isfile(path)):
                continue
            parts = os.fsdecode(path[len(base):]).split("/")
            if SKIP_DIRS.intersection(parts[:-1]) or parts[-1].startswith(PROBE_PREFIX):
                continue
            found.add("/".join(parts))
    return found
