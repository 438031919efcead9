"""Kernel side of variables undo: this file's source is executed inside a python kernel (never imported by the
server), as the module `_interpreter_lsp_snapshots` (snapshots.py installs it and calls it silently).

When the server asks (`snap(key)`: when the kernel is ready, and after each run), the kernel forks.
The child is the kernel's memory as it was, kept by the operating system copy-on-write: it costs the page
tables at fork time and, later, one copy of each page the kernel writes (what the run changed, ~1x the
bytes changed, plus ~7 MB of pages the kernel's own request cycle writes). It runs no code of the user's: it
waits on a socket for its parent. A namespace of plain data only (an allowlist of exact types whose pickle
runs no code of the user's: numbers, strings, bytes, None, lists, tuples, dicts and sets of them, numpy
arrays of a plain dtype, modules, functions defined in the kernel), small (KEEP_BYTES, KEEP_OBJECTS), is
kept instead as its pickle, in the kernel (`_keep`): no fork, no copy-on-write faults after it, and it
answers what a child would (the same fingerprints, the same values), as it was when taken.
`restore(key)` asks the snapshot for fingerprints of its variables (pickle protocol 5, with large buffers
out of band, hashed), compares them with the kernel's own, and takes back, as pickles, only
the variables that differ; names the run created are removed. Whatever cannot be brought back is named with
the reason: an object pickle refuses (open files and sockets, generators, threads, locks) is never rebuilt by
re-opening or re-running anything (dill re-opens a file in its recorded mode and truncates it).

Once the next fork is taken, an older one packs itself (snapshot_pages.py, Linux): the forks form a chain,
oldest first (`_chain`), and each pack keeps of its large buffers only the pages that differ from the next
link's; the others are found further along. `_settle` collects a pack that ended and starts the next, one at a
time in the chain's order, whenever the kernel is called (never waiting, but for a restore); a link dropped
while the pack before it needs it is kept, not restorable (`_held`), until that pack goes (`_prune`).

Functions and lambdas defined in the kernel travel by value (their code object), not by name (by name the
kernel's *current* function of that name would come back). Modules come back by import. A class defined in
the kernel travels by name: if a run redefined it, the old one is named as not restorable.

The child is in a process group of its own (ipykernel's shutdown waits for the children of the kernel's
group, and interrupts go to it), ignores SIGINT all the same, dies with the kernel (PDEATHSIG on Linux;
elsewhere its socket's end of file), closes every descriptor but its socket (the kernel's zmq connections,
pipes), never writes to the kernel's streams, and leaves with os._exit (no atexit, no zmq context
teardown in a forked copy). At most MAX_SNAPSHOTS are kept, and at most MAX_BYTES between them.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import marshal
import os
import pickle
import select
import signal
import socket
import struct
import sys
import time
import types
import warnings
import zlib
from typing import Any

MAX_SNAPSHOTS = 8
MAX_BYTES = 2 * 1024**3  # memory the snapshots may hold between them (pages the kernel wrote since each fork)
_HIDDEN = frozenset({"In", "Out", "exit", "quit", "get_ipython"})
_kids: dict[str, tuple[int, socket.socket]] = {}  # key -> (pid, the kernel's end of its socket)
_LIBC: Any = None
if sys.platform.startswith("linux"):  # loaded here, once: a snapshot's first moments compete with the kernel
    import ctypes

    _LIBC = ctypes.CDLL(None, use_errno=True)
KEEP_BYTES = 256 * 1024  # a plain namespace up to this size is kept as its pickle (bytes copy: ~0.2 ms)
KEEP_OBJECTS = 1_000  # the walk stops here: keeping 1,000 small objects costs ~0.6 ms
_kept: dict[str, tuple[dict[str, Any], bytes]] = {}  # key -> ({prints, ids, classes}, the namespace's pickle)
_order: dict[str, None] = {}  # every snapshot's key, oldest first (forks and kept ones alike)
_ending: list[int] = []  # dropped snapshots not reaped yet
_resident: dict[str, int] = {}  # key -> the kernel's resident bytes when it was taken (what it can hold at most)
# Packing (snapshot_pages.py, Linux): every fork that still holds pages, oldest first; a pack's pages it did not
# keep are found in the links after it. A link may no longer be restorable (dropped) and still be kept for an
# older pack that needs it (its predecessor is packed): `_held` for such a live fork.
_pages: Any = sys.modules.get("_interpreter_lsp_snapshot_pages")  # None where packing is not available
_chain: list[str] = []
_packs: dict[str, Any] = {}  # key -> snapshot_pages.Packed
_held: dict[str, tuple[int, socket.socket]] = {}  # key -> a live fork kept for older packs only
_declined: set[str] = set()  # forks that found packing would not pay (they stay forks)
_packing: list[str] = []  # the fork packing itself now (at most one: packs go in the chain's order)
_reader: dict[str, str] = {}  # key -> the fork allowed to read its memory (the newest when it was forked)
PACK_SECONDS = 30  # a pack taking longer is given up (the snapshot stays a fork)
PACK_WAIT = 60.0  # seconds a restore waits for a pack under way
_calls: socket.socket | None = None  # the server's connection to `listen`'s socket, while it is open


def _rss() -> int:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return MAX_BYTES  # unknown: measure


def _shell() -> Any:
    return sys.modules["IPython"].get_ipython()


def _names() -> dict[str, Any]:
    """The user's variables: what `%who` shows (no `_` names, nothing IPython put there itself)."""
    shell = _shell()
    hidden = shell.user_ns_hidden
    return {k: v for k, v in shell.user_ns.items() if not k.startswith("_") and k not in hidden and k not in _HIDDEN}


# ---- pickling: functions by value, modules by import ------------------------------------------------------


def _make_function(code: bytes, name: str, qualname: str, defaults: Any, kwdefaults: Any, cells: Any,
                   attrs: dict[str, Any]) -> types.FunctionType:
    closure = None if cells is None else tuple(types.CellType(c) for c in cells)
    function = types.FunctionType(marshal.loads(code), _shell().user_ns, name, defaults, closure)
    function.__qualname__, function.__kwdefaults__ = qualname, kwdefaults
    function.__dict__.update(attrs)
    return function


def _import(name: str) -> types.ModuleType:
    import importlib

    return importlib.import_module(name)


def _code_key(code: types.CodeType) -> tuple[Any, ...]:
    """What a code object is, for a fingerprint (marshal's bytes depend on reference counts)."""
    consts = tuple(_code_key(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.co_code, consts, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars


# Not followed when looking for shared memory: what a value refers to without holding it (a function's module
# globals are reached through the function: its closure and defaults are followed instead).
_OPAQUE = (type, types.ModuleType, types.CodeType, types.FrameType, types.BuiltinFunctionType)


def _reaches_shared(value: Any, shared: list[tuple[int, int]]) -> bool:
    """Whether `value` or anything it holds (containers, instances' attributes, a function's closure and
    defaults) exposes memory in `shared` runs. Read through references, not through the value's pickle: a
    pickle may be made of a copy (a pandas block pickles one), which would hide the memory it holds."""
    pending, seen = [value], set()
    while pending:
        obj = pending.pop()
        if id(obj) in seen or isinstance(obj, _OPAQUE):
            continue
        seen.add(id(obj))
        if _in_shared(obj, shared):
            return True
        if isinstance(obj, types.FunctionType):
            for cell in obj.__closure__ or ():
                with contextlib.suppress(ValueError):  # a cell not filled yet
                    pending.append(cell.cell_contents)
            pending.extend([*(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values()])
        else:
            pending.extend(gc.get_referents(obj))
    return False


def _in_shared(obj: Any, shared: list[tuple[int, int]]) -> bool:
    """Whether memory `obj` itself exposes (a numpy array, a memmap, a view of either, any other contiguous
    buffer of a type not built in) lies in `shared` runs."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(obj, numpy.ndarray):
        bounds = getattr(numpy, "byte_bounds", None) or numpy.lib.array_utils.byte_bounds
        low, high = bounds(obj)
    elif type(obj).__module__ == "builtins":  # their memory is the process's own (a memoryview: pickle refuses it)
        return False
    else:
        try:
            view = memoryview(obj)
        except TypeError:
            return False
        with view:
            low = _pages.address(view) if view.c_contiguous else None
            if low is None:
                return False
            high = low + view.nbytes
    return high > low and bool(_pages.intersect(_pages.page_runs([(low, high - low)]), shared))


class _Pickler(pickle.Pickler):
    fingerprinting = False

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.FunctionType) and obj.__module__ == "__main__":
            cells = None if obj.__closure__ is None else [c.cell_contents for c in obj.__closure__]
            code = _code_key(obj.__code__) if self.fingerprinting else marshal.dumps(obj.__code__)
            return _make_function, (code, obj.__name__, obj.__qualname__, obj.__defaults__, obj.__kwdefaults__,
                                    cells, dict(obj.__dict__))
        if isinstance(obj, types.ModuleType):
            return _import, (obj.__name__,)
        return NotImplemented


class _SetsByContents(_Pickler):
    """Fingerprints that read a set by what it holds. A plain pickle writes a set in its hash table's order,
    which depends on the set's history, not on its contents: two elements that collide come back from a round
    trip swapped, and swapped again from the next (with string hashes, a set of two in about one kernel in
    eight). Here a set is written as its elements' pickles, sorted. persistent_id is a call for every object
    (the C pickler skips reducer_override for a set): ~5x a plain pickle on object-heavy data, so used only
    where a plain fingerprint already differed (_faithful)."""

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) is set or type(obj) is frozenset:  # by identity: a metaclass's == is the user's code
            return type(obj).__name__, sorted(_dumps(item, fingerprinting=True, sets=True)[0] for item in obj)
        return None


def _dumps(value: Any, *, fingerprinting: bool = False, sets: bool = False) -> tuple[bytes, list[pickle.PickleBuffer]]:
    """The value's pickle and its out-of-band buffers; `fingerprinting`: as _fingerprint reads it, `sets`: with
    sets by contents (_SetsByContents)."""
    buffers: list[pickle.PickleBuffer] = []
    out = io.BytesIO()
    kind = _SetsByContents if sets else _Pickler
    pickler = kind(out, protocol=5, buffer_callback=buffers.append)
    pickler.fingerprinting = fingerprinting
    if fingerprinting:
        # No memo: the bytes then depend on what the value holds, not on which of its parts happen to be one
        # object (an interned string, a shared dtype): a copy that pickle brings back holds the same, but
        # shares differently. A value that refers to itself cannot be pickled so: memo as usual.
        pickler.fast = True
        try:
            pickler.dump(value)
            return out.getvalue(), buffers
        except (ValueError, RecursionError):
            buffers.clear()
            out = io.BytesIO()
            pickler = kind(out, protocol=5, buffer_callback=buffers.append)
            pickler.fingerprinting = True
    pickler.dump(value)
    return out.getvalue(), buffers


def _fingerprint(
    value: Any, *, sets: bool = False, crcs: dict[tuple[int, int], int] | None = None,
    shared: list[tuple[int, int]] | None = None,
) -> str:
    """A digest of the value's pickle (crc32 of each part and its length), or 'unpicklable: why'. `sets`: sets
    read by their contents, not their order (_SetsByContents). `crcs`: large buffers' crc32s by (address,
    length), kept for a pack (which checks the buffers it puts back together against them). `shared`: address
    ranges of memory mapped shared and writable: a buffer in one makes the answer SHARED."""
    if shared and _reaches_shared(value, shared):  # only where something is mapped shared (most kernels: nothing)
        return SHARED
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data, buffers = _dumps(value, fingerprinting=True, sets=sets)
    except Exception as exc:  # what pickle refuses: named, never rebuilt another way
        return f"unpicklable: {type(value).__name__} ({str(exc)[:120] or type(exc).__name__})"
    parts = [f"{len(data)}:{zlib.crc32(data):08x}"]
    for buffer in buffers:
        raw = buffer.raw()
        where = _pages.address(raw) if crcs is not None and raw.nbytes >= _pages.INLINE_BELOW else None
        crc = crcs.get((where, raw.nbytes)) if where is not None and crcs is not None else None
        if crc is None:
            crc = zlib.crc32(raw)
            if where is not None and crcs is not None:
                crcs[(where, raw.nbytes)] = crc
        parts.append(f"{raw.nbytes}:{crc:08x}")
    return ",".join(parts)


SHARED = "shared"  # _fingerprint's answer for a value whose memory is mapped shared (snapshot_pages.shared_writable)


def _main_class_of(value: Any) -> type | None:
    """The class defined in the kernel that pickle would name for this value (it travels by name)."""
    cls = value if isinstance(value, type) else type(value)
    return cls if getattr(cls, "__module__", None) == "__main__" else None


# ---- a small plain namespace, kept as its pickle -------------------------------------------------------------

# By identity (`id(type)`): `type(x) in (int, ...)` would compare with ==, which a metaclass of the user's can
# define (its code would run in the snapshot).
_ATOMS = frozenset(map(id, (int, float, complex, bool, str, bytes, bytearray, type(None))))
_SIZED = frozenset(map(id, (str, bytes, bytearray)))
_SEQUENCES = frozenset(map(id, (list, tuple, set, frozenset)))


def _plain(ns: dict[str, Any]) -> bool:
    """Whether every value is plain data (the allowlist above, exact types: a subclass may pickle through code
    of the user's), and the whole within KEEP_OBJECTS objects and about KEEP_BYTES. Anything else forks."""
    numpy = sys.modules.get("numpy")
    ndarray = numpy.ndarray if numpy is not None else None
    stack: list[Any] = list(ns.values())
    seen: set[int] = set()
    objects, size = 0, 0
    while stack:
        value = stack.pop()
        objects += 1
        if objects > KEEP_OBJECTS or size > KEEP_BYTES:
            return False
        kind = type(value)
        if id(kind) in _ATOMS:
            size += len(value) if id(kind) in _SIZED else 8
            continue
        if id(value) in seen:  # shared, or a container that holds itself
            continue
        seen.add(id(value))
        # Bounded before the walk takes a container's items: taking them writes each one's reference count,
        # and a fork snapshot then holds a copy of every page they are on (a list of 3 million numbers:
        # ~100 MB held, for a snapshot that forks anyway).
        if id(kind) in _SEQUENCES:
            if objects + len(value) > KEEP_OBJECTS:
                return False
            stack.extend(value)
            size += 8 * len(value)
        elif kind is dict:
            if objects + 2 * len(value) > KEEP_OBJECTS:
                return False
            stack.extend(value.keys())
            stack.extend(value.values())
            size += 16 * len(value)
        elif kind is types.ModuleType:
            continue  # by import, as a fork's copy travels
        elif ndarray is not None and kind is ndarray and not value.dtype.hasobject:
            size += value.nbytes
        elif kind is types.FunctionType and type(value.__module__) is str and value.__module__ == "__main__":
            # (`__module__` can be any object the user set, whose == is theirs: its type first.)
            # What _Pickler sends of it (its code is marshalled): defaults, closure cells, attributes.
            try:
                cells = [c.cell_contents for c in value.__closure__ or ()]
            except ValueError:  # an empty cell
                return False
            stack.extend([*(value.__defaults__ or ()), *(value.__kwdefaults__ or {}).values(), *cells,
                          *value.__dict__.values()])
        else:
            return False
    return size <= KEEP_BYTES


def _keep(ns: dict[str, Any]) -> tuple[dict[str, Any], bytes] | None:
    """The namespace as a fork's copy would answer for it later, taken now: None when it is not plain."""
    if not _plain(ns):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            facts = {
                "prints": {name: _fingerprint(value) for name, value in ns.items()},
                "ids": {name: id(value) for name, value in ns.items()},
                "classes": {},  # no class is plain data (and no instance of one defined in the kernel)
            }
            # In band (no buffer_callback): an array's buffer is copied now, not read later after the
            # kernel changed it in place.
            out = io.BytesIO()
            _Pickler(out, protocol=5).dump(ns)
    except Exception:  # what the walk let through and pickle still refused: a fork keeps it
        return None
    return facts, out.getvalue()


# ---- the socket between the kernel and a snapshot ----------------------------------------------------------


def _send(sock: socket.socket, parts: list[Any]) -> None:
    """Parts: bytes-like objects, sent as a count, their lengths, then each (no copy of large buffers)."""
    views = [memoryview(p).cast("B") for p in parts]
    sock.sendall(struct.pack(f"!I{len(views)}Q", len(views), *[v.nbytes for v in views]))
    for view in views:
        sock.sendall(view)


def _recv_into(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < view.nbytes:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise EOFError("the snapshot's process is gone")
        got += n


def _recv_exact(sock: socket.socket, size: int) -> bytearray:
    data = bytearray(size)
    _recv_into(sock, memoryview(data))
    return data


def _recv(sock: socket.socket) -> list[bytearray]:
    (count,) = struct.unpack("!I", _recv_exact(sock, 4))
    sizes = struct.unpack(f"!{count}Q", _recv_exact(sock, 8 * count))
    return [_recv_exact(sock, size) for size in sizes]


def _facts(ns: dict[str, Any], crcs: dict[tuple[int, int], int] | None = None) -> dict[str, Any]:
    """What undo compares, in a snapshot (a fork, or its pack): each variable's fingerprint (SHARED for one in
    memory mapped shared, which the fork did not copy), identity, and class defined in the kernel."""
    shared = _pages.shared_writable() if _pages is not None else None
    prints = {name: _fingerprint(value, crcs=crcs, shared=shared) for name, value in ns.items()}
    classes = {name: [cls.__qualname__, id(cls)] for name, value in ns.items()
               if (cls := _main_class_of(value)) is not None}
    return {"prints": prints, "ids": {name: id(value) for name, value in ns.items()}, "classes": classes}


def _pack(sock: socket.socket, ns: dict[str, Any], request: dict[str, Any]) -> bool:
    """Pack this snapshot (snapshot_pages.pack) and hand the memfd to the kernel: True (then leave), or say
    b"D" (declined: it stays a fork) and False. The work is done in a fork of this snapshot, at a lower
    priority: pickling every variable writes reference counts all over its memory, whose copies then go with
    that process, and a snapshot that stays a fork stays as it was."""
    limit = _private_of("self")  # what packing must beat: measured before anything here writes a page
    fd, pid = -1, -1
    try:
        fd = os.memfd_create("interpreter-lsp snapshot", os.MFD_CLOEXEC)
        pid = os.fork()
    except OSError:  # no descriptor or process to spare (kernel.processLimit): the snapshot stays a fork
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            sock.sendall(b"D")
        return False
    if pid == 0:
        code = 1
        try:
            if _LIBC is not None:
                _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: not worth finishing for nobody
            # A pickle that never ends (an object's __reduce__ waiting on a lock a thread of the kernel held
            # at the fork) ends here: the snapshot stays a fork, and the packs after it go on.
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(PACK_SECONDS)
            os.nice(10)  # behind the kernel and its next run: nothing waits for a pack but memory
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _pages.pack(fd, ns, lambda crcs: _facts(ns, crcs), _Pickler, int(request["against"]),
                            [tuple(run) for run in request["inflow"]], limit)
            code = 0
        finally:
            os._exit(code)  # Declined, or anything pickling raised: the snapshot serves as a fork
    if _given_up(sock, pid):
        status = 1
    else:
        _pid, status = os.waitpid(pid, 0)
    if status != 0:
        os.close(fd)
        with contextlib.suppress(OSError):
            sock.sendall(b"D")
        return False
    socket.send_fds(sock, [b"P"], [fd])
    return True


def _given_up(sock: socket.socket, pid: int) -> bool:
    """Wait for the pack's process `pid` to end, or for the kernel to give the pack up (_make_way: a message on
    the socket, which waits there even if sent before this began; or the socket closed): then end it, and
    True. Without pidfd_open (Linux < 5.3), just the wait."""
    try:
        ended = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return False
    try:
        while True:
            ready, _, _ = select.select([sock, ended], [], [])
            if ended in ready:
                return False
            try:
                request = json.loads(bytes(_recv(sock)[0]))
            except (EOFError, OSError, ValueError):
                request = {"op": "abort"}  # the kernel closed the socket: nobody waits for the pack
            if request.get("op") == "sealed":  # (see _serve) and the pack goes on
                _pages.allow_reader(0)
                continue
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return True
    finally:
        os.close(ended)


def _serve(sock: socket.socket) -> None:
    """The snapshot's loop: answer the kernel until it closes the socket (or this snapshot packed itself)."""
    ns = _names()
    while True:
        try:
            request = json.loads(bytes(_recv(sock)[0]))
        except EOFError:
            return
        if request["op"] == "fingerprints":
            _send(sock, [json.dumps(_facts(ns)).encode()])
        elif request["op"] == "values" and request.get("where") and _pages is not None:
            # Large buffers by where they are: the kernel reads them from this process's memory itself.
            data, buffers = _dumps({name: ns[name] for name in request["names"]})
            places = _pages.places([b.raw() for b in buffers])
            _send(sock, [json.dumps(places).encode(), data,
                         *[b.raw() for b, place in zip(buffers, places, strict=True) if place is None]])
        elif request["op"] == "values":
            data, buffers = _dumps({name: ns[name] for name in request["names"]})
            _send(sock, [data, *[b.raw() for b in buffers]])
        elif request["op"] == "read":  # pages a pack before this one left here
            try:
                parts = _pages.own([(int(a), int(n)) for a, n in request["ranges"]])
            except OSError as exc:
                _send(sock, [json.dumps({"error": str(exc)}).encode()])
                continue
            _send(sock, [b"{}", *parts])
        elif request["op"] == "pack":
            if _pack(sock, ns, request):
                return
        elif request["op"] == "sealed":  # the fork that could read this one's memory is done with it (no answer)
            _pages.allow_reader(0)
        elif request["op"] == "abort":  # a pack given up after it had ended by itself (no answer)
            continue
        else:
            return


def _max_fd() -> int:
    try:
        return max(int(name) for name in os.listdir("/proc/self/fd")) + 1
    except (OSError, ValueError):
        return 65536


def _child(sock: socket.socket, parent: int, reader: int | None) -> None:
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt of the kernel's group is not for us
        if _LIBC is not None:
            _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the kernel
        if os.getppid() != parent:
            return
        if reader is not None and _pages is not None:
            _pages.allow_reader(reader)  # the fork before this one packs by comparing its pages with ours
        # A process group of its own: ipykernel's shutdown terminates and waits for the children in the
        # kernel's group (up to ~30 s for one that is not reaped), and an interrupt goes to that group.
        os.setpgid(0, 0)
        # Every descriptor but its own socket is closed: no copy of the kernel's zmq connections or pipes
        # outlives the kernel here, and the other snapshots' ends go (theirs see end of file when the kernel
        # goes). Python objects that held them are never used here.
        keep = sock.fileno()
        os.closerange(0, keep)
        os.closerange(keep + 1, _max_fd())
        gc.disable()  # a collection would touch every object, copying pages for nothing
        devnull = open(os.devnull, "w")  # the child never writes to the kernel's streams
        sys.stdout = sys.stderr = devnull
        _serve(sock)
    finally:
        os._exit(0)


# ---- what the server calls (silently, through user expressions) -------------------------------------------


def snap(key: str) -> str:
    """Take snapshot `key`: kept as a pickle when the namespace is small plain data (the answer says
    `kept`: no fork, so no warm-up either), else a fork."""
    started = time.perf_counter()
    if keep(key):
        return json.dumps({"ms": round((time.perf_counter() - started) * 1000, 2), "kept": True})
    _settle(block=False)
    mine, theirs = socket.socketpair()
    parent = os.getpid()
    newest = _live(_chain[-1]) if _chain else None
    pid = 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # "this process is multi-threaded": see _child
            pid = os.fork()
        if pid == 0:
            mine.close()
            _child(theirs, parent, newest[0] if newest is not None else None)
        theirs.close()
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # as the child does: whichever runs first
        _kids[key] = (pid, mine)
    except BaseException:  # an interrupt meanwhile: no half-kept snapshot
        mine.close()
        theirs.close()
        if pid:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            _ending.append(pid)
        raise
    _resident[key] = _rss()
    _order[key] = None
    if _pages is not None:
        if _chain:
            _reader[key] = _chain[-1]
        _chain.append(key)
    _bound()
    _settle(block=False)  # the fork before this one can pack itself now
    return json.dumps({"ms": round((time.perf_counter() - started) * 1000, 2)})


def keep(key: str) -> bool:
    """Take snapshot `key` as its pickle if the namespace is small plain data (`snap` asks first); False else."""
    drop([key])
    kept = _keep(_names())
    if kept is None:
        return False
    _kept[key] = kept
    _order[key] = None
    _bound()
    return True


def _bound() -> None:
    while len(_order) > MAX_SNAPSHOTS:
        drop([next(iter(_order))])  # the oldest first: an undo of the last steps needs the newest
    # A snapshot holds at most what the kernel held when it was taken: only when those add up past the bound
    # is what each really holds measured (smaps_rollup walks its page tables: ~0.5 ms each). A kept one holds
    # at most KEEP_BYTES-ish: not counted.
    if sum(_resident.values()) > MAX_BYTES:
        while len(_kids) > 1 and sum(map(_private, _kids.values())) > MAX_BYTES:
            drop([next(iter(_kids))])


_VARIABLES: Any = None  # kernels/introspect.py's expression, compiled (set by snapshots.INSTALL)


def variables(_: Any = None) -> str:
    """The variables a chat tells the model: introspect.py's expression, compiled once."""
    return str(eval(_VARIABLES, _shell().user_ns))


def warm() -> None:
    """Sent as a run's code, silently, right after each snapshot: it takes the path a run takes through the
    kernel (the request, the cell, a write to the kernel's stdout, the reply), so that the copy-on-write
    faults the fork left on that path are paid now, while the user reads, not by the next run (print(1):
    ~600 page faults in the run without this, ~100 with it). A write of nothing sends no message; a stdout the
    user replaced is not touched."""
    stream = sys.stdout
    if type(stream).__module__.startswith("ipykernel."):
        stream.write("")


def _private(kid: tuple[int, socket.socket]) -> int:
    """Bytes only this snapshot holds: the pages the kernel wrote since its fork (Linux; elsewhere 0, and
    only MAX_SNAPSHOTS bounds them)."""
    return _private_of(kid[0])


def _private_of(pid: int | str) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            return sum(int(line.split()[1]) * 1024 for line in rollup if line.startswith(("Private_Clean",
                                                                                          "Private_Dirty")))
    except (OSError, ValueError, IndexError):
        return 0


def _end(kid: tuple[int, socket.socket]) -> None:
    pid, sock = kid
    sock.close()  # the child sees end of file and leaves
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    _ending.append(pid)  # reaped later, without waiting here (a run's snapshot is on its way)


def drop(keys: list[str]) -> str:
    for key in keys:
        _order.pop(key, None)
        _kept.pop(key, None)
        kid = _kids.pop(key, None)
        _resident.pop(key, None)
        if kid is not None and key in _chain:
            _held[key] = kid  # an older pack may need its pages: _prune decides
        elif kid is not None:
            _end(kid)
    _prune()
    _reap()
    return "{}"


# ---- packing: the chain of forks ------------------------------------------------------------------------


def _live(key: str) -> tuple[int, socket.socket] | None:
    return _kids.get(key) or _held.get(key)


def _seal(reader: str) -> None:
    """`reader` reads no snapshot's memory any more (it packed, declined, or ended): the forks that allowed it
    to (Yama's PR_SET_PTRACER, which a process that later takes its pid would inherit) take that back."""
    for key in [k for k, r in _reader.items() if r == reader]:
        del _reader[key]
        kid = _live(key)
        if kid is not None:
            with contextlib.suppress(OSError):
                _send(kid[1], [b'{"op": "sealed"}'])


def _forget(key: str) -> None:
    """A link no pack needs any more, and no undo: its pages go."""
    _seal(key)
    _reader.pop(key, None)
    _chain.remove(key)
    _declined.discard(key)
    pack = _packs.pop(key, None)
    if pack is not None:
        pack.close()
    kid = _held.pop(key, None)
    if kid is not None:
        _end(kid)


def _prune() -> None:
    """Forget the links that are not restorable and that no pack needs (a pack needs the link after it)."""
    changed = True
    while changed:
        changed = False
        for index, key in enumerate(_chain):
            if key in _order or key in _packing:
                continue
            before = _chain[index - 1] if index else None
            if before not in _packs and before not in _packing:  # (a pack under way reads this one)
                _forget(key)
                changed = True
                break


def _outcome(key: str, block: bool) -> bool:
    """Read how the pack under way ended (False: not yet). Packed: the link is its memfd from now on."""
    kid = _live(key)
    if kid is None:
        _packing.clear()
        return True
    pid, sock = kid
    try:
        if block:
            sock.settimeout(PACK_WAIT)
        # recvmsg itself: socket.recv_fds ignores its flags (CPython 3.10-3.12), so it would block here.
        data, ancillary, _flags, _address = sock.recvmsg(1, socket.CMSG_LEN(4), 0 if block else socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError as exc:  # timed out: still packing
        if block:
            raise LookupError(f"a snapshot was still packing itself after {PACK_WAIT:g} s: try again") from exc
        return False
    finally:
        with contextlib.suppress(OSError):
            sock.settimeout(None)
    _packing.clear()
    _seal(key)  # whatever came of it, it reads no more
    fds = [int.from_bytes(payload[i:i + 4], sys.byteorder, signed=True)
           for level, kind, payload in ancillary if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
           for i in range(0, len(payload) - len(payload) % 4, 4)]
    if data == b"D":
        _declined.add(key)
        for fd in fds:
            os.close(fd)
        return True
    pack = None
    if data == b"P" and len(fds) == 1:
        try:
            pack = _pages.Packed(fds[0])
        except (OSError, ValueError):
            os.close(fds[0])
    # Packed (the process leaves by itself), or gone: its pages are no longer a fork's.
    _kids.pop(key, None)
    _held.pop(key, None)
    sock.close()
    _ending.append(pid)
    if pack is not None:
        _packs[key] = pack
    else:  # the fork died: what older packs left to it is gone with it (their restore says so)
        _order.pop(key, None)
        _resident.pop(key, None)
        _reader.pop(key, None)
        _chain.remove(key)
    _prune()
    return True


def _settle(block: bool) -> None:
    """Collect the pack under way, if it ended, and start the next one: the first link that is still a fork
    (and can pack) and has a fork after it, whose pages it compares. With `block`, wait for the pack under way
    (not for the ones after it)."""
    if _pages is None:
        return
    if _packing and not _outcome(_packing[0], block):
        return
    if block:
        return
    for index, key in enumerate(_chain[:-1]):
        if key in _packs or key in _declined:
            continue
        kid, successor = _live(key), _live(_chain[index + 1])
        if kid is None or successor is None:
            return
        before = _chain[index - 1] if index else None
        inflow = _packs[before].passed if before in _packs else []
        try:
            _send(kid[1], [json.dumps({"op": "pack", "against": successor[0], "inflow": inflow}).encode()])
        except OSError:
            return
        _packing.append(key)
        return


def _make_way(key: str) -> None:
    """Before an undo asks snapshot `key` (or the links after it) anything: a pack under way there is given up
    (its process ended: the snapshot stays a fork, which answers at once), rather than waited for (packing
    1 GB takes seconds). A pack of an older link goes on: nothing of it is asked."""
    if not _packing:
        return
    packing = _packing[0]
    if key not in _chain or _chain.index(packing) < _chain.index(key):  # (a kept snapshot is not in the chain)
        return
    kid = _live(packing)
    if kid is not None:
        with contextlib.suppress(OSError):
            _send(kid[1], [b'{"op": "abort"}'])  # read by the snapshot while its pack runs (_given_up)
    _settle(block=True)


def settle(_: Any = None) -> str:
    """Wait until every fork that can pack has packed (tests and benchmarks: the server never waits)."""
    while True:
        _settle(block=True)
        _settle(block=False)
        if not _packing:
            return "{}"


def _reap() -> None:
    for pid in list(_ending):
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _ending.remove(pid)


def _size(key: str) -> int:
    if key in _kept:
        return len(_kept[key][1])
    if key in _packs:
        return int(_packs[key].size)
    kid = _live(key)
    return _private(kid) if kid is not None else 0


def sizes(_: Any = None) -> str:
    """{key: bytes only that snapshot holds}, oldest first (a fork's: Linux; 0 elsewhere), and under "" what
    the links kept only for older packs hold."""
    _settle(block=False)
    held = {key: _size(key) for key in _order}
    held[""] = sum(_size(key) for key in _chain if key not in _order)
    return json.dumps(held)


def _compare(key: str) -> tuple[dict[str, str], list[str], list[str], list[dict[str, str]]]:
    """(the snapshot's fingerprints, names to bring back, names to remove, [{name, why}] not restorable)."""
    _make_way(key)
    kid = _kids.get(key)
    if kid is None and key not in _kept and key not in _packs:
        raise LookupError("no snapshot of the kernel before this run is kept (the kernel restarted since, or it "
                          f"was one of more than the {MAX_SNAPSHOTS} last runs)")
    if kid is not None:
        _send(kid[1], [json.dumps({"op": "fingerprints"}).encode()])
    now = _names()
    # A fork shares what is mapped shared with the kernel (and a pack took it from the fork later): it holds no
    # copy of a value living there, whose fingerprints would agree whatever the runs did to it.
    shared = _pages.shared_writable() if _pages is not None and (kid is not None or key in _packs) else None
    mine = {name: _fingerprint(value, shared=shared) for name, value in now.items()}  # the snapshot computes its own
    if kid is not None:
        theirs = json.loads(bytes(_recv(kid[1])[0]))
    else:
        theirs = _packs[key].facts if key in _packs else _kept[key][0]
    back, lost = [], []
    remove = sorted(set(now) - set(theirs["prints"]))
    for name, before in sorted(theirs["prints"].items()):
        if before == SHARED or (name in now and mine[name] == SHARED):
            lost.append({"name": name, "why": "its memory is shared (a shared-memory array, a file mapped writable): "
                         "the snapshot holds no copy of it, so what it was before the run cannot come back; it "
                         + ("stays as it is now" if name in now else "stays deleted")})
            continue
        if name in now and before == mine[name] and not before.startswith("unpicklable"):
            continue  # unchanged (or another object of the same value)
        if (cls := theirs["classes"].get(name)) is not None:
            current = _shell().user_ns.get(cls[0])
            if current is None or id(current) != cls[1]:
                lost.append({"name": name, "why": "its class was defined in the kernel and redefined or removed "
                             "since: the old definition cannot be brought back (run its cell again)"})
                continue
        if before.startswith("unpicklable"):
            same = name in now and theirs["ids"][name] == id(now[name])
            why = before.split(": ", 1)[1]
            lost.append({"name": name, "why": f"{why}: its state cannot be captured; "
                         + ("the same object is kept, as the runs left it" if same else "it stays as it is now")})
            continue
        back.append(name)
    return theirs["prints"], back, remove, lost


def _read_from(kid: tuple[int, socket.socket], ranges: list[tuple[int, int]], into: list[memoryview]) -> None:
    """A live fork's bytes at `ranges`, read straight into the views `into`: from its /proc/<pid>/mem (the
    kernel is its parent, which ptrace rules allow everywhere but under Yama's admin-only mode: one copy,
    ~3x faster than the socket's two), else asked over its socket."""
    try:
        fd = os.open(f"/proc/{kid[0]}/mem", os.O_RDONLY)
    except OSError:
        fd = -1
    if fd >= 0:
        try:
            if all(os.preadv(fd, [view], start) == view.nbytes for (start, _n), view in zip(ranges, into,
                                                                                               strict=True)):
                return
        except OSError:
            pass
        finally:
            os.close(fd)
    _send(kid[1], [json.dumps({"op": "read", "ranges": ranges}).encode()])
    (count,) = struct.unpack("!I", _recv_exact(kid[1], 4))
    sizes = struct.unpack(f"!{count}Q", _recv_exact(kid[1], 8 * count))
    answer = json.loads(bytes(_recv_exact(kid[1], sizes[0])))
    if answer.get("error"):
        raise ValueError(f"a snapshot could not read its pages: {answer['error']}")
    if list(sizes[1:]) != [view.nbytes for view in into]:
        raise ValueError("a snapshot answered other pages than those asked for")
    for view in into:
        _recv_into(kid[1], view)


def _unpack(key: str, names: list[str], lazily: bool) -> tuple[dict[str, Any], bool]:
    """`names` as a pack holds them: the variables are loaded in order up to the last of them, their large
    buffers put back together from the packs after it and the first fork after them (snapshot_pages.assemble,
    each checked against the crc32 taken before packing). `lazily`: only the buffers of `names` themselves;
    the others are zero pages of the same size, so a value that shares one with a variable not asked for
    comes back wrong, which its fingerprint shows (restore then asks again, not lazily). Returns the values
    and whether any buffer was left out."""
    packs, live = [], None
    for link in _chain[_chain.index(key):]:
        if link in _packs:
            packs.append(_packs[link])
            continue
        kid = _live(link)
        if kid is not None:
            live = lambda ranges, into, kid=kid: _read_from(kid, ranges, into)  # noqa: E731
        break
    pack = packs[0]
    asked = set(names)
    last = max(index for index, (name, _first, _end) in enumerate(pack.names) if name in asked)
    wanted = {i for name, first, end in pack.names if name in asked for i in range(first, end)} if lazily else None
    buffers = _pages.assemble(packs, live, wanted)
    left_out = any(b is None for b in buffers[:pack.names[last][2]])
    # (Only large buffers are left out: never empty. An anonymous mapping costs no memory until written.)
    supply = (b if b is not None else _pages.private_memory(pack.buffers[i][2]) for i, b in enumerate(buffers))
    start, end = pack.pickle
    loading = pickle.Unpickler(io.BytesIO(pack.data[start:end]), buffers=supply)
    values = {}
    for name, _first, _end in pack.names[:last + 1]:
        values[name] = loading.load()
    return {name: values[name] for name in names}, left_out


_EXACT = (int, float, complex, bool, str, bytes, bytearray, type(None))


def _exact(copy: Any) -> bool:
    """A type whose pickle round trip is exact by construction (its bytes, or a numpy array of plain dtype:
    its buffer, dtype and shape): its copy needs no check (for 100 MB, a fingerprint is ~25 ms)."""
    if type(copy) in _EXACT:
        return True
    numpy = sys.modules.get("numpy")
    return numpy is not None and type(copy) is numpy.ndarray and not copy.dtype.hasobject


def _faithful(copy: Any, original: str) -> bool:
    """Whether the copy pickle brought back holds what the original held. An exact type (above): yes. The
    same fingerprint: yes. Else a copy that pickle leaves as it is (a second round trip changes nothing) is
    taken as faithful: the first one only settled what the original had left lazy (a masked array's fill
    value, a figure's canvas); one that changes at every round trip is losing something. A set's order is not
    what it holds: the copy and its own copy are compared with sets by contents (a set can come back in another
    order at every round trip)."""
    if _exact(copy):
        return True
    first = _fingerprint(copy)
    if first == original:
        return True
    if first.startswith("unpicklable"):
        return False
    try:
        data, buffers = _dumps(copy)
        again = pickle.loads(data, buffers=[b.raw() for b in buffers])
    except Exception:
        return False
    return _fingerprint(again, sets=True) == _fingerprint(copy, sets=True)


def plan(key: str) -> str:
    try:
        _prints, back, remove, lost = _compare(key)
    except Exception as exc:
        return json.dumps({"error": str(exc)})
    return json.dumps({"restore": back, "remove": remove, "lost": lost})


def restore(key: str) -> str:
    started = time.perf_counter()
    try:
        prints, back, remove, lost = _compare(key)
        values: dict[str, Any] = {}
        if back and key in _kept:
            kept = pickle.loads(_kept[key][1])
            values = {name: kept[name] for name in back}
        elif back and key in _packs:
            values, left_out = _unpack(key, back, lazily=True)
            if left_out and any(_fingerprint(values[name]) != prints[name] for name in back):
                values, _ = _unpack(key, back, lazily=False)  # (see _unpack) or a copy _faithful judges below
        elif back and _pages is not None:
            kid = _kids[key]
            _send(kid[1], [json.dumps({"op": "values", "names": back, "where": True}).encode()])
            places, data, *inline = _recv(kid[1])
            located = json.loads(bytes(places))
            large = [_pages.private_memory(place[1]) for place in located if place is not None]
            _read_from(kid, [tuple(place) for place in located if place is not None],
                       [memoryview(memory) for memory in large])
            supply, inline_parts, large_parts = [], iter(inline), iter(large)
            for place in located:
                supply.append(next(inline_parts) if place is None else next(large_parts))
            values = pickle.loads(data, buffers=supply)
        elif back:
            _send(_kids[key][1], [json.dumps({"op": "values", "names": back}).encode()])
            data, *buffers = _recv(_kids[key][1])
            values = pickle.loads(data, buffers=buffers)
    except Exception as exc:
        return json.dumps({"error": f"{type(exc).__name__}: {exc}"})
    ns = _shell().user_ns
    for name in remove:
        ns.pop(name, None)
    restored = []
    for name in back:
        if not _faithful(values[name], prints[name]):
            lost.append({"name": name, "why": "its copy would differ from what it was (its pickle round trip "
                         "changes it): it stays as it is now"})
            continue
        ns[name] = values[name]
        restored.append(name)
    return json.dumps({"restored": restored, "removed": remove, "lost": lost,
                       "ms": round((time.perf_counter() - started) * 1000, 2)})


# ---- the same calls over a comm: what the server asks after each run, without an execute request ----------

TARGET = "interpreter_lsp_snapshots"
# What a call may name: looked up when called (a test replaces `snap` to slow it down), never anything else.
_CALLABLE = frozenset({"snap", "variables"})


def _answer(function: str, argument: Any) -> dict[str, Any]:
    """One call's answer in the shape ipykernel gives a user expression's (snapshots.answer reads both)."""
    try:
        if function not in _CALLABLE:
            raise LookupError(f"no call {function!r}")
        value = globals()[function](argument)
    except BaseException as exc:  # an interrupt that lands here too: answered, and the call says it failed
        return {"status": "error", "ename": type(exc).__name__, "evalue": str(exc)}
    return {"status": "ok", "data": {"text/plain": repr(value)}, "metadata": {}}


def _opened(comm: Any, _message: Any) -> None:
    @comm.on_msg
    def _calls(message: dict[str, Any]) -> None:
        calls = message["content"]["data"].get("calls", [])
        comm.send({"user_expressions": {name: _answer(function, argument) for name, function, argument in calls}})

    comm.send({"opened": True})


def serve() -> None:
    """Answer the server's calls on comms of TARGET (ipykernel's comm manager): ~1.5 ms of the kernel's time
    a call, against ~3.8 for a silent execute request, which takes the path of a cell."""
    _shell().kernel.comm_manager.register_target(TARGET, _opened)


def listen(path: str) -> str:
    """Answer the server's calls on a unix socket at `path` as well (a local kernel: its runtime directory), read
    by the kernel's own event loop in its main thread, between requests, as a comm message is: the call does not
    wait for ipykernel's dispatch of a shell message (~2-3 ms of latency on a 2-core machine, while the call
    itself takes ~0.1 ms), which back to back the next run waited for. One client, the server, which connects
    right after this call and before any run: the path is removed once it has. Frames: a 4-byte length, then
    JSON ([[name, function, argument], ...] in, {name: answer} out, answers as `_answer` gives them)."""
    import asyncio

    loop = asyncio.get_running_loop()  # the kernel's loop: this runs as a (silent) cell
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a kernel before a restart left it
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
        listener.listen(1)
    except OSError:
        listener.close()
        raise
    listener.setblocking(False)

    def accept() -> None:
        global _calls
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return
        _calls = conn
        loop.remove_reader(listener)
        listener.close()
        with contextlib.suppress(OSError):
            os.unlink(path)
        conn.setblocking(False)
        pending = bytearray()

        def ended() -> None:
            global _calls
            with contextlib.suppress(Exception):  # kernel code may have closed it already
                loop.remove_reader(conn)
            conn.close()
            _calls = None

        def readable() -> None:
            try:
                data = conn.recv(1 << 16)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:  # the server closed it (a restart of its side): the comm stays
                ended()
                return
            pending.extend(data)
            while len(pending) >= 4 and len(pending) >= 4 + (size := int.from_bytes(pending[:4], "big")):
                request = json.loads(bytes(pending[4 : 4 + size]))
                del pending[: 4 + size]
                answer = json.dumps({name: _answer(function, argument) for name, function, argument in request})
                body = answer.encode()
                conn.settimeout(10.0)  # a server that reads nothing for this long has gone: not waited for
                try:
                    conn.sendall(len(body).to_bytes(4, "big") + body)
                except OSError:
                    ended()
                    return
                finally:
                    with contextlib.suppress(OSError):
                        conn.setblocking(False)

        loop.add_reader(conn, readable)

    try:
        loop.add_reader(listener, accept)
    except BaseException:  # a loop that cannot watch a descriptor (Windows' proactor): the comm only
        listener.close()
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    return "listening"
