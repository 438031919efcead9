"""Kernel side of variables undo, continued: a fork snapshot packed down to what only it holds. This file's
source is executed inside a python kernel (never imported by the server), as the module
`_interpreter_lsp_snapshot_pages`, before snapshot_kernel.py, which uses it (snapshots.INSTALL).

Why: a fork snapshot holds ~1x the bytes the run changed, plus the ~6-7 MB of pages the kernel's own request
cycle writes (pymalloc pools whose reference counts moved, allocator state): 1.7x for 10 MB changed. Once
the next snapshot is forked, an older one waits for nothing: it writes into a memfd the pickle of its
variables (large buffers out of band), its small buffers, and, of its large buffers' pages, only those whose
bytes differ from the next snapshot's (read from that frozen fork's /proc/<pid>/mem, compared byte for
byte), hands the memfd to the kernel and exits. A page it did not keep was the same in the next snapshot,
which keeps it in turn when it packs (the pages the one before passed on are among those it compares: its
`inflow`), or still holds it (a live fork): walking forward finds every page. Restore puts each buffer back
together from that walk and checks it against the crc32 the snapshot took before packing: a page missing
or different is an error, never a wrong value.

Why bytes and not the page tables: /proc/self/pagemap's "exclusively mapped" bit is kept per folio on Linux
6.x (a page the kernel rewrote inside a transparent huge page still reads as shared: measured), any process
the kernel forked (multiprocessing) shares pages too, and soft-dirty bits are not built into every kernel.
Compared bytes hold whatever the kernel does. The price: reading the next fork's copy, ~0.8 ms per MB of
large buffers (plus the crc32, ~0.4 ms per MB), in the packing process, at a lower priority.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import struct
import sys
import zlib
from collections.abc import Callable, Iterable
from typing import Any

PAGE = mmap.PAGESIZE
INLINE_BELOW = 64 * 1024  # a buffer smaller than this is copied into the pack (its pages are not tracked)
CHUNK = 1 << 20  # bytes compared at a time
# Packing reads every page of the large buffers (~1 ms of CPU per MB, niced) to free at most what the fork
# holds alone: it is done when the buffers are at most this many times that (~32 ms a MB freed, at worst).
# A 1 GB array beside a small change (the fork holding ~7 MB) stays a fork.
COST_LIMIT = 32
MAGIC = b"ilsp-pk1"
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.memcmp.restype = ctypes.c_int
_LIBC.memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
PR_SET_PTRACER = 0x59616D61  # Yama: let this process read our memory (ptrace_scope 1 allows only ancestors)

Runs = list[tuple[int, int]]  # sorted, disjoint [start, end) byte ranges, page aligned


class Declined(Exception):
    """Packing would not pay or cannot be done here (the snapshot stays a fork)."""


# ---- page ranges ------------------------------------------------------------------------------------------


def page_runs(ranges: Iterable[tuple[int, int]]) -> Runs:
    """(address, length) byte ranges -> the pages they touch, merged."""
    spans = sorted((a - a % PAGE, -(-(a + n) // PAGE) * PAGE) for a, n in ranges if n > 0)
    return _merge(spans)


def _merge(spans: list[tuple[int, int]]) -> Runs:
    out: Runs = []
    for start, end in spans:
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def union(a: Runs, b: Runs) -> Runs:
    return _merge(sorted(a + b))


def intersect(a: Runs, b: Runs) -> Runs:
    out: Runs = []
    i = j = 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a: Runs, b: Runs) -> Runs:
    out: Runs = []
    j = 0
    for start, end in a:
        while j < len(b) and b[j][1] <= start:
            j += 1
        k, pos = j, start
        while k < len(b) and b[k][0] < end:
            if b[k][0] > pos:
                out.append((pos, b[k][0]))
            pos = max(pos, b[k][1])
            k += 1
        if pos < end:
            out.append((pos, end))
    return out


def total(runs: Runs) -> int:
    return sum(end - start for start, end in runs)


# ---- memory ---------------------------------------------------------------------------------------------


def address(view: memoryview) -> int | None:
    """Where a contiguous buffer's bytes are (None if that cannot be told without copying them)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(view))
    except (TypeError, ValueError):  # read-only: numpy tells it without writing
        numpy = sys.modules.get("numpy")
        if numpy is None:
            return None
        try:
            return int(numpy.frombuffer(view, dtype=numpy.uint8).ctypes.data)
        except Exception:
            return None


def _mappings(pid: int | str, wanted: Callable[[list[str]], bool]) -> Runs:
    """A process's mappings whose /proc/<pid>/maps fields (address, perms, offset, device, inode...) `wanted`
    takes."""
    spans = []
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            if wanted(fields):
                low, high = fields[0].split("-")
                spans.append((int(low, 16), int(high, 16)))
    return _merge(sorted(spans))


def _private_anonymous(pid: int | str = "self") -> Runs:
    """A process's readable, private, anonymous mappings: the memory a fork copies on write. A buffer
    elsewhere (a file mapped by numpy.memmap: shared, the same in every fork) is copied into the pack."""
    return _mappings(pid, lambda fields: fields[1][0] == "r" and fields[1][3] == "p" and fields[4] == "0")


def shared_writable() -> Runs:
    """This process's shared, writable mappings (a shared-memory array, a file mapped writable): a fork does not
    copy them, so a fork (and a pack made from it) sees what lives there as it is now; none if unreadable."""
    try:
        return _mappings("self", lambda fields: fields[1][1] == "w" and fields[1][3] == "s")
    except OSError:
        return []


def places(views: list[memoryview]) -> list[list[int] | None]:
    """For each buffer, [address, length] when it is large and in this process's private memory (the kernel,
    its parent, can read it there: one copy instead of two through a socket), else None (sent as bytes)."""
    private = _private_anonymous()
    return [None if (where := _place(view, private)) is None else [where, view.nbytes] for view in views]


def _place(view: memoryview, private: Runs) -> int | None:
    """The address of a large buffer that lies in `private` memory; None for any other (copied as bytes)."""
    where = address(view) if view.nbytes >= INLINE_BELOW else None
    if where is None or subtract(page_runs([(where, view.nbytes)]), private):
        return None
    return where


def allow_reader(pid: int) -> None:
    """Let process `pid` (the snapshot forked before this one) read this one's memory where Yama restricts
    that to ancestors; elsewhere the call fails harmlessly."""
    _LIBC.prctl(PR_SET_PTRACER, pid, 0, 0, 0)


def own(ranges: list[tuple[int, int]]) -> list[memoryview]:
    """This process's bytes at (address, length) ranges, without a copy; OSError for a range outside its
    private memory (where a pack before it left nothing: reading there could fault)."""
    if subtract(page_runs(ranges), _private_anonymous()):
        raise OSError("pages asked for are not in this snapshot's memory")
    return [memoryview((ctypes.c_char * length).from_address(start)).cast("B") for start, length in ranges]


# ---- packing (in the snapshot's own process) ------------------------------------------------------------


class _Bounded:
    """A file for pickle that refuses to grow past `limit` (packing would hold more than the fork does)."""

    def __init__(self, fd: int, limit: int) -> None:
        self.fd, self.limit, self.size = fd, limit, 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.size += view.nbytes
        if self.size > self.limit:
            raise Declined(f"its pickle passed {self.limit} bytes")
        _write(self.fd, view)
        return view.nbytes


def _write(fd: int, data: Any) -> None:
    view = memoryview(data).cast("B")
    written = 0
    while written < view.nbytes:
        written += os.write(fd, view[written:])


def pack(
    fd: int,
    namespace: dict[str, Any],
    facts: Callable[[dict[tuple[int, int], int]], dict[str, Any]],
    pickler: Callable[..., Any],
    successor: int,
    inflow: Runs,
    limit: int,
) -> None:
    """Write the namespace packed into the empty memfd `fd`, or raise Declined. `facts`: what undo compares,
    taken once packing is decided (given a dict to keep the crc32s of large buffers in, by (address,
    length)); `pickler`: snapshot_kernel's (functions by value, modules by import); `successor`: the pid of
    the fork taken after this one, which must not change while this runs (a snapshot never writes its own
    buffers); `inflow`: the pages the snapshot before this one passed on to it; `limit`: the bytes this fork
    holds alone (packing past that would not pay)."""
    _write(fd, MAGIC + bytes(8))  # the header's offset goes in the 8 bytes, once written
    out = _Bounded(fd, limit)
    buffers: list[Any] = []
    # One pickle per variable, one memo across them (what two variables share stays shared): a restore loads
    # the variables up to the last it needs, and puts together only the large buffers of those it needs.
    dumping = pickler(out, protocol=5, buffer_callback=buffers.append)
    names: list[list[Any]] = []
    for name, value in namespace.items():
        first = len(buffers)
        dumping.dump(value)
        names.append([name, first, len(buffers)])
    pickled = out.size
    layout: list[list[int]] = []  # per buffer: [0, offset in the pack, length, crc] or [1, address, length, crc]
    offset = 16 + pickled
    private = _private_anonymous()
    places = [_place(buffer.raw(), private) for buffer in buffers]
    tracked = union(page_runs((where, b.raw().nbytes) for where, b in zip(places, buffers, strict=True)
                              if where is not None),
                    inflow)
    if total(tracked) > COST_LIMIT * limit:
        raise Declined("comparing its large buffers would cost more than the memory it frees")
    crcs: dict[tuple[int, int], int] = {}
    facts_now = facts(crcs)
    for buffer, where in zip(buffers, places, strict=True):
        raw = buffer.raw()
        crc = crcs.get((where, raw.nbytes)) if where is not None else None
        crc = zlib.crc32(raw) if crc is None else crc
        if where is None:
            out.write(raw)
            layout.append([0, offset, raw.nbytes, crc])
            offset += raw.nbytes
        else:
            layout.append([1, where, raw.nbytes, crc])
    if subtract(tracked, private):
        raise Declined("a page passed on to it is not in its private memory")
    kept, offset = _differing(fd, tracked, successor, offset, limit - out.size)
    header = json.dumps({
        "facts": facts_now, "pickle": [16, 16 + pickled], "names": names,
        "buffers": layout, "kept": kept, "passed": subtract(tracked, [(s, e) for s, e, _ in kept]),
    }).encode()
    _write(fd, header)
    os.pwrite(fd, struct.pack("<Q", offset), len(MAGIC))


def _differing(fd: int, tracked: Runs, successor: int, offset: int, room: int) -> tuple[list[list[int]], int]:
    """Append to the pack this process's pages of `tracked` whose bytes differ from the successor's (or that
    the successor does not have): [[start, end, offset in the pack], ...] and the pack's new end."""
    try:
        theirs = os.open(f"/proc/{successor}/mem", os.O_RDONLY)
        shared = _private_anonymous(successor)
    except OSError as exc:
        raise Declined(f"the next snapshot's memory cannot be read ({exc.strerror})") from exc
    buffer = bytearray(CHUNK)
    base = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    kept: list[list[int]] = []

    def keep(start: int, end: int) -> None:
        nonlocal offset, room
        room -= end - start
        if room < 0:
            raise Declined("its changed pages passed what the fork holds")
        _write(fd, (ctypes.c_char * (end - start)).from_address(start))
        if kept and kept[-1][1] == start:
            kept[-1][1] = end
        else:
            kept.append([start, end, offset])
        offset += end - start

    try:
        for start, end in subtract(tracked, shared):  # not in the successor's memory at all (freed since)
            keep(start, end)
        for start, end in intersect(tracked, shared):
            for chunk in range(start, end, CHUNK):
                size = min(CHUNK, end - chunk)
                try:
                    got = os.preadv(theirs, [memoryview(buffer)[:size]], chunk)
                except OSError:
                    got = 0
                if got == size and _LIBC.memcmp(base, chunk, size) == 0:
                    continue
                for page in range(chunk, chunk + size, PAGE):
                    if page + PAGE > chunk + got:  # not read in one go: this page alone
                        try:
                            same = os.preadv(theirs, [memoryview(buffer)[page - chunk:page - chunk + PAGE]], page)
                        except OSError:
                            same = 0
                        if same != PAGE:
                            keep(page, page + PAGE)
                            continue
                    if _LIBC.memcmp(base + page - chunk, page, PAGE) != 0:
                        keep(page, page + PAGE)
    finally:
        os.close(theirs)
    return sorted(kept), offset


def private_memory(length: int) -> mmap.mmap:
    """Zero-filled memory of `length` bytes that a fork copies on write (pages cost nothing until written)."""
    # No MADV_HUGEPAGE (numpy asks it for its own arrays): where THP's defrag is "madvise" (this VM), the
    # faults then compact memory on the spot: restore of 100 MB p50 121-144 ms but p95 305-545, against
    # 147-202 and 208-229 ms without (20 restores each way).
    return mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


# ---- a pack, read back in the kernel ------------------------------------------------------------------


class Packed:
    """A packed snapshot, held by the kernel as its memfd (mapped read-only)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.size = os.fstat(fd).st_size
        self.data = mmap.mmap(fd, self.size, prot=mmap.PROT_READ)
        if self.data[:len(MAGIC)] != MAGIC:
            raise ValueError("not a snapshot's pack")
        (start,) = struct.unpack_from("<Q", self.data, len(MAGIC))
        header = json.loads(self.data[start:])
        self.facts: dict[str, Any] = header["facts"]
        self.pickle: tuple[int, int] = tuple(header["pickle"])
        self.names: list[list[Any]] = header["names"]  # [name, its first buffer, the one after its last]
        self.buffers: list[list[int]] = header["buffers"]
        self.kept: list[list[int]] = header["kept"]  # [start, end, offset]
        self.passed: Runs = [tuple(run) for run in header["passed"]]

    def close(self) -> None:
        self.data.close()
        os.close(self.fd)

    def copy_kept(self, wanted: Runs, out: memoryview, origin: int) -> Runs:
        """Copy the bytes this pack kept within `wanted` into `out` (which holds the bytes from `origin`); the
        ranges copied."""
        done: Runs = []
        data = memoryview(self.data)
        try:
            for start, end, offset in self.kept:
                for low, high in intersect(wanted, [(start, end)]):
                    out[low - origin:high - origin] = data[offset + low - start:offset + high - start]
                    done.append((low, high))
        finally:
            data.release()  # (a view left open would keep the mapping from closing)
        return done


def assemble(
    packs: list[Packed],
    live: Callable[[list[tuple[int, int]], list[memoryview]], None] | None,
    wanted: set[int] | None = None,
) -> list[Any]:
    """The first pack's buffers, put back together: its inline ones as they are, its large ones from the packs
    in order and then `live` (the first live fork after them: reads (address, length) ranges into the views
    given); a large one not `wanted` (by index) is None. Each is checked against its crc32; ValueError when a
    page was found nowhere or a buffer's bytes differ."""
    first = packs[0]
    out: list[Any] = []
    for index, (kind, where, length, crc) in enumerate(first.buffers):
        if kind == 1 and wanted is not None and index not in wanted:
            out.append(None)
            continue
        if kind == 0:
            part = first.data[where:where + length]
        else:
            # An anonymous mapping, not a bytearray: no zeroing of pages that are written next anyway. Private:
            # a shared one (mmap's default) would be the same memory in every fork after it, which a
            # snapshot must not be.
            part = private_memory(length)
            view = memoryview(part)
            low, high = where, where + length
            needed = page_runs([(where, length)])
            for pack in packs:
                if not needed:
                    break
                done = pack.copy_kept([(max(s, low), min(e, high)) for s, e in needed], view, low)
                needed = subtract(needed, page_runs((s, e - s) for s, e in done))
            if needed:
                if live is None:
                    raise ValueError(f"{total(needed)} bytes of a buffer were kept by no snapshot")
                ranges = [(max(s, low), min(e, high) - max(s, low)) for s, e in needed]
                live(ranges, [view[start - low:start - low + size] for start, size in ranges])
        if zlib.crc32(part) != crc:
            raise ValueError("a buffer put back together differs from the one the snapshot took")
        out.append(part)
    return out
