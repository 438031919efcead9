"""Workspace files a local kernel maps writable and shared (mmap, numpy.memmap): writes through such a map
raise no file event and may leave a file's size and times as they were, so neither the files tracker nor a
walk's signatures can say whether a run changed it. Undo (undo.py) reads these files again, by content,
at each of its snapshots while they are mapped, and gives a change found there to the run before.

Linux only (/proc/<pid>/maps of every process in the kernel's tree); elsewhere nothing is found, and such
writes stay unseen there (docs/architecture.md says so). Where the kernel answers PROCMAP_QUERY (Linux 6.11 and
later), it is asked for exactly those maps (shared, writable, of a file): it filters its own list, ~0.04 ms a
process, against ~1.7 ms to have a kernel with pandas loaded format its ~720 lines of maps and read them
(measured on a 2-core VM). Elsewhere, and whenever the query fails, the maps are read (the lines are parsed
only when some map is shared and writable). After each run (undo.py), and a run sent right behind that one
waits for it: on the event loop where the query works and the trees are small (`mapped_quickly`), else in a
thread.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
from collections.abc import Iterable
from pathlib import Path

from .files import PROBE_PREFIX, SKIP_DIRS
from .kernels.launcher import children_of, read_whole

try:
    import fcntl
except ImportError:  # Windows: nothing is read there (mapped)
    fcntl = None  # type: ignore[assignment]

# address perms offset device inode path: shared ("s") and writable ("w") mappings of a named file.
_SHARED_WRITABLE = re.compile(rb"^[0-9a-f]+-[0-9a-f]+ .w.s [0-9a-f]+ \S+ \d+ +(/.*)$", re.MULTILINE)
# What every such line holds (perms "rw-s", "-w-s", "rwxs", "-wxs"): most processes have none, and the search
# for these (memchr speed) spares them the pattern, which is tried at every offset (~0.8 ms for 740 lines).
_MARKS = (b"w-s ", b"wxs ")
_DELETED = b" (deleted)"


class _Query(ctypes.Structure):
    """struct procmap_query (linux/fs.h)."""

    _fields_ = [
        ("size", ctypes.c_uint64), ("query_flags", ctypes.c_uint64), ("query_addr", ctypes.c_uint64),
        ("vma_start", ctypes.c_uint64), ("vma_end", ctypes.c_uint64), ("vma_flags", ctypes.c_uint64),
        ("vma_page_size", ctypes.c_uint64), ("vma_offset", ctypes.c_uint64), ("inode", ctypes.c_uint64),
        ("dev_major", ctypes.c_uint32), ("dev_minor", ctypes.c_uint32), ("vma_name_size", ctypes.c_uint32),
        ("build_id_size", ctypes.c_uint32), ("vma_name_addr", ctypes.c_uint64), ("build_id_addr", ctypes.c_uint64),
    ]


# _IOWR('f', 17, struct procmap_query)
_PROCMAP_QUERY = (3 << 30) | (ctypes.sizeof(_Query) << 16) | (ord("f") << 8) | 17
# Writable, shared, backed by a file; the first such map at or after the address asked.
_WANTED = 0x02 | 0x08 | 0x20 | 0x10
_NAME_MAX = 4096 + len(_DELETED) + 1  # a path (PATH_MAX), its " (deleted)", its NUL
# False once the kernel said it has no such query (ENOTTY, EINVAL): the maps are read from then on.
query_maps = fcntl is not None
QUICK_PROCESSES = 12  # a tree of at most this many processes is asked on the event loop (mapped_quickly)


def _cmdline(pid: int) -> bytes | None:
    return read_whole(f"/proc/{pid}/cmdline")


def _tree(roots: Iterable[int], limit: int | None = None) -> list[int] | None:
    """The processes of the kernels' trees, without the forks that run the same program as their parent
    (the variables' snapshots, kernels/snapshot_kernel.py: a copy of the kernel's maps, read once already).
    None as soon as more than `limit` processes are in them."""
    found: list[int] = []
    pending = [(pid, None) for pid in roots]
    seen: set[int] = set()
    while pending:
        pid, parent_cmdline = pending.pop()
        if pid in seen:
            continue
        if limit is not None and len(seen) >= limit:
            return None
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
    return _found(_tree(roots) or [], root)


def mapped_quickly(roots: Iterable[int], root: Path) -> set[str] | None:
    """`mapped`, where that is quick enough for the event loop: the kernel answers PROCMAP_QUERY and the trees
    hold at most QUICK_PROCESSES processes (a kernel, its launcher, its snapshots: ~0.6 ms, most of it the
    children lists of a kernel's ~12 threads, against ~1 ms in a thread on an idle loop and ~3 ms beside an
    editor's messages). None else: the caller asks `mapped` in a thread."""
    if not query_maps or not os.path.isdir("/proc/self"):
        return None
    pids = _tree(roots, QUICK_PROCESSES)
    if pids is None:
        return None
    found = _found(pids, root)
    return found if query_maps else None  # a kernel that turned out to have no such query: read in a thread


def _found(pids: list[int], root: Path) -> set[str]:
    base = os.fsencode(os.path.realpath(root)) + b"/"
    found: set[str] = set()
    for pid in pids:
        for path in _shared_writable(pid):
            # " (deleted)": the file was removed while mapped, unless a file of that very name is there.
            if not path.startswith(base) or (path.endswith(_DELETED) and not os.path.isfile(path)):
                continue
            parts = os.fsdecode(path[len(base):]).split("/")
            if SKIP_DIRS.intersection(parts[:-1]) or parts[-1].startswith(PROBE_PREFIX):
                continue
            found.add("/".join(parts))
    return found


def _shared_writable(pid: int) -> list[bytes]:
    """The paths of the files `pid` maps writable and shared, as its maps name them (a file removed while
    mapped ends with " (deleted)"); none when it is gone or not ours to read."""
    global query_maps
    try:
        fd = os.open(f"/proc/{pid}/maps", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return []  # gone, or not ours to read
    try:
        if query_maps:
            try:
                return _queried(fd)
            except OSError as exc:
                if exc.errno in (errno.ENOTTY, errno.EINVAL, errno.EOPNOTSUPP):
                    query_maps = False  # a kernel before 6.11: not asked again
                elif exc.errno in (errno.ESRCH, errno.EACCES, errno.EPERM):
                    return []
                # Anything else (a name too long for the buffer): this process's maps are read instead.
        data = b""
        while chunk := os.read(fd, 1 << 16):
            data += chunk
    except OSError:
        return []
    finally:
        os.close(fd)
    if not any(mark in data for mark in _MARKS):
        return []
    return [match.group(1) for match in _SHARED_WRITABLE.finditer(data)]


def _queried(fd: int) -> list[bytes]:
    """PROCMAP_QUERY on an open /proc/<pid>/maps: each map that is writable, shared and of a file, in order."""
    name = ctypes.create_string_buffer(_NAME_MAX)
    paths: list[bytes] = []
    address = 0
    while True:
        query = _Query(
            size=ctypes.sizeof(_Query), query_flags=_WANTED, query_addr=address,
            vma_name_size=_NAME_MAX, vma_name_addr=ctypes.addressof(name),
        )
        try:
            fcntl.ioctl(fd, _PROCMAP_QUERY, query)
        except OSError as exc:
            if exc.errno == errno.ENOENT:  # no such map at or after `address`
                return paths
            raise
        if query.vma_name_size:  # a name (anonymous shared memory of a file has one too)
            paths.append(name.raw[: query.vma_name_size].rstrip(b"\0"))
        address = query.vma_end
