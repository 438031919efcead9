"""Undo brings back the python kernel's variables: those the undone runs rebound, mutated in place or
deleted come back as they were, those they created go, and what cannot come back is named with the reason
(an open file is never re-opened: re-opening in its mode "w" would truncate the user's file). End to end over
LSP with a real kernel; values compared inside the kernel."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from harness import Session, assert_shape, needs_bwrap, start_session, stop_session
from interpreter_lsp import protocol as p
from interpreter_lsp.portable import portable_forced


async def value(s: Session, expression: str) -> object:
    run_id, status = await s.run_and_wait(f"import json as _j; print(_j.dumps({expression}))")
    assert status["state"] == "ok", s.text(run_id)
    return json.loads(s.text(run_id, ("stdout",)).strip().splitlines()[-1])


# A closure whose cell the runs change: both setups below define it.
COUNTER = """\
def make_counter():
    n = [0]
    def inc():
        n[0] += 1
        return n[0]
    return inc
"""

SETUP = """\
import numpy as np
from dataclasses import dataclass

@dataclass
class Point:
    x: int
    y: list

""" + COUNTER + """
big = np.arange(1_000_000, dtype=float)
table = {"rows": [1, 2, {"deep": [3]}], "name": "t"}
point = Point(1, [2])
counter = make_counter()
k = 3
ids = {3, 11}  # two ints whose hashes collide: a copy from pickle holds them in the other order
def f(x):
    return x + 1
with open("notes.txt", "w") as fh:
    fh.write("keep me")
"""

CHANGE = """\
big *= 2
table["rows"][2]["deep"].append(4)
point.y.append(9)
counter(); counter()
del k
ids.add(19)
def f(x):
    return x + 100
created = "by the run"
gen = (i for i in range(3))
next(gen)
"""

STATE = ('[float(big.sum()), table, [point.x, point.y], counter(), "k" in globals() and k, f(1), sorted(ids), '
         '"created" in globals(), "gen" in globals()]')


async def test_undo_brings_back_variables_mutated_rebound_deleted_and_removes_new_ones(session: Session) -> None:
    s = session
    _run, status = await s.run_and_wait(SETUP)
    assert status["state"] == "ok", s.text(_run)
    await s.run_and_wait("pass")  # an unrelated run in between: undo takes back only the last one
    before = await value(s, "[float(big.sum()), table, [point.x, point.y], 'k' in globals() and k, f(1), sorted(ids)]")
    # value() is itself a run: undo it so the next undo reaches CHANGE.
    await s.command(p.UNDO, {})
    _run, status = await s.run_and_wait(CHANGE)
    assert status["state"] == "ok", s.text(_run)

    preview = await s.command(p.UNDO, {"dryRun": True})
    assert_shape(p.UndoResult, preview)
    assert preview["variablesRestore"] == ["big", "counter", "f", "ids", "k", "point", "table"]
    assert preview["variablesRemove"] == ["created", "gen"]
    lost = {item["name"]: item["why"] for item in preview["notRestorable"]}
    assert "variable fh" in lost and "TextIOWrapper" in lost["variable fh"], lost

    result = await s.command(p.UNDO, {})
    assert_shape(p.UndoResult, result)
    assert result["variablesRestored"] == ["big", "counter", "f", "ids", "k", "point", "table"], result
    assert result["variablesRemoved"] == ["created", "gen"]
    after = await value(s, STATE)
    # counter() in STATE advances the restored closure once: it was at 0 before CHANGE.
    assert after == [*before[:3], 1, before[3], before[4], [3, 11], False, False], after
    # The open (closed) file was named, never re-opened: the user's file is intact.
    assert (s.root / "notes.txt").read_text() == "keep me"
    # The model is told what came back.
    notes = [e for e in (await s.command(p.HISTORY, {}))["messages"] if e["type"] == "note"]
    assert "Variables: restored big, counter, f, ids, k, point, table" in notes[-1]["text"]
    assert "removed created, gen" in notes[-1]["forModel"]


async def test_undo_puts_a_large_array_back_together_from_packed_snapshots(session: Session) -> None:
    """Once the next run's snapshot is forked, the one before packs itself (kernels/snapshot_pages.py: its
    variables' pickle and only the pages of large buffers that changed): undos step back through packs, and
    the array comes back exactly as each run found it."""
    await _packed_undo(session)


@needs_bwrap
async def test_snapshots_pack_inside_the_sandbox_too(workspace_root: Path, home: Path) -> None:
    """In bubblewrap (its own pid namespace, /proc of its own) a snapshot reads the next one's memory as well."""
    s = await start_session(workspace_root, home, configuration={"sandbox": "bubblewrap"}, env={"HOME": str(home)},
                            init_options={"trusted": True})
    try:
        await _packed_undo(s)
        # The calls after each run come over the kernel's socket in its runtime directory, bound in the sandbox.
        assert await value(s, "__import__('sys').modules['_interpreter_lsp_snapshots']._calls is not None")
    finally:
        await stop_session(s)


async def _packed_undo(s: Session) -> None:
    await s.run_and_wait("import numpy as np, zlib\nbig = np.random.default_rng(1).random(3_000_000)\n"
                         "whole = object()  # not small plain data: the snapshots are forks")
    first = await value(s, "zlib.crc32(big)")
    await s.command(p.UNDO, {})
    await s.run_and_wait("big[:100_000] = 0")
    second = await value(s, "zlib.crc32(big)")
    await s.command(p.UNDO, {})
    await s.run_and_wait("big[-100_000:] = 1")
    packed = await value(s, "(lambda m: (m.settle(), sorted(m._packs))[1])"
                            "(__import__('sys').modules['_interpreter_lsp_snapshots'])")
    assert len(packed) >= 2, packed
    await s.command(p.UNDO, {})  # the check above
    result = await s.command(p.UNDO, {})
    assert result["variablesRestored"] == ["big"], result
    assert await value(s, "zlib.crc32(big)") == second
    await s.command(p.UNDO, {})  # that check
    result = await s.command(p.UNDO, {})
    assert result["variablesRestored"] == ["big"], result
    assert await value(s, "zlib.crc32(big)") == first


PLAIN_SETUP = """\
import numpy as np

""" + COUNTER + """
small = np.arange(1_000, dtype=float)
# Two ints whose hashes collide: pickle's copy of the set holds them in the other order (and strings do, by
# chance of the kernel's hash seed, ~1 set of two in 8: undo once named such a table "its copy would differ").
table = {"rows": [1, 2, {"deep": [3]}], "name": "t", "tags": {"a", "b"}, "ids": {3, 11}}
alias = table["rows"]
counter = make_counter()
k = 3
def f(x, by=[1]):
    return x + by[0]
"""

PLAIN_CHANGE = """\
small *= 2
alias[2]["deep"].append(4)
counter(); counter()
del k
def f(x, by=[100]):
    return x + by[0]
created = (1, "two")
"""


async def test_a_small_plain_namespace_is_kept_not_forked_and_comes_back_the_same(session: Session) -> None:
    """Numbers, containers, a small array, a closure, functions and a module only: the snapshot is kept as a
    pickle (no process forked), and undo brings back what a fork's copy would, shared as it was shared."""
    s = session
    _run, status = await s.run_and_wait(PLAIN_SETUP)
    assert status["state"] == "ok", s.text(_run)
    before = await value(s, "[float(small.sum()), table['rows'], sorted(table['tags']), sorted(table['ids']), "
                            "'k' in globals() and k, f(1)]")
    first = await s.command(p.UNDO, {})  # value() is a run: it changed nothing the user sees
    assert first["variablesRestored"] == [] and first["variablesRemoved"] == [], first
    _run, status = await s.run_and_wait(PLAIN_CHANGE)
    assert status["state"] == "ok", s.text(_run)
    result = await s.command(p.UNDO, {})
    shown = {key: v for key, v in result.items() if key.startswith("variables") or key == "notRestorable"}
    assert result["variablesRestored"] == ["alias", "counter", "f", "k", "small", "table"], (shown, first)
    assert result["variablesRemoved"] == ["created"]
    assert result["notRestorable"] == []
    after = await value(
        s, "[float(small.sum()), table['rows'], sorted(table['tags']), sorted(table['ids']), 'k' in globals() and k, "
           "f(1), counter(), "
           "alias is table['rows'], 'created' in globals()]"
    )
    assert after == [*before, 1, True, False], after
    snapshots = "__import__('sys').modules['_interpreter_lsp_snapshots']"
    comms = "sorted(c.target_name for c in get_ipython().kernel.comm_manager.comms.values())"
    # Kept, never forked; and asked over the kernel's socket (snapshots.open_socket: the server connected), its
    # comm (snapshots.open_calls) open behind it, not by execute requests.
    asked = f"[len({snapshots}._kids), len({snapshots}._kept) > 0, {comms}, {snapshots}._calls is not None]"
    # With the portable paths forced, the kernel is on TCP: no socket, the calls go over the comm.
    assert await value(s, asked) == [0, True, ["interpreter_lsp_snapshots"], not portable_forced()]


# Code of the user's (or a model's) that shuts every unix socket of the snapshots' module it can find.
SHUT_CALLS = (
    "import gc as _gc, socket as _s\n"
    "for _o in [o for o in _gc.get_objects() if isinstance(o, _s.socket)]:\n"
    "    if _o.fileno() >= 0 and _o.family == _s.AF_UNIX and str(_o.getsockname()).endswith('calls'):\n"
    "        _o.shutdown(_s.SHUT_RDWR)\n"
)


async def _undo_brings_x_back(s: Session, within: float | None = None) -> None:
    """With x = 1 in the kernel: a run that rebinds x and creates y (within `within` seconds, if given) is undone
    with its variables."""
    started = asyncio.get_running_loop().time()
    _run, status = await s.run_and_wait("x = 2\ny = [x]")
    assert status["state"] == "ok", s.text(_run)
    if within is not None:
        assert asyncio.get_running_loop().time() - started < within, "the run waited for the socket again"
    result = await s.command(p.UNDO, {})
    assert result["variablesRestored"] == ["x"] and result["variablesRemoved"] == ["y"], result
    assert result["notRestorable"] == [], result
    assert await value(s, "[x, 'y' in globals()]") == [1, False]


@pytest.mark.skipif(portable_forced(), reason="a kernel on TCP (the portable paths) has no socket of its own")
async def test_kernel_code_that_shuts_the_snapshots_socket_leaves_undo_working(session: Session) -> None:
    """The calls after each run go over a socket of the kernel's (snapshots.open_socket); code in the kernel can
    shut it. The snapshot sent on it after that very run fails, the next run takes it again over the comm, and
    the calls go over the comm from then on: that run is still undone with its variables."""
    s = session
    _run, status = await s.run_and_wait("x = 1")
    assert status["state"] == "ok", s.text(_run)
    snapshots = "__import__('sys').modules['_interpreter_lsp_snapshots']"
    assert await value(s, f"{snapshots}._calls is not None")
    _run, status = await s.run_and_wait(SHUT_CALLS)
    assert status["state"] == "ok", s.text(_run)
    assert await value(s, f"{snapshots}._calls is None")
    await _undo_brings_x_back(s)


@pytest.mark.skipif(portable_forced(), reason="a kernel on TCP (the portable paths) has no socket of its own")
async def test_a_socket_the_kernel_stops_reading_costs_one_wait_then_the_comm_serves(session: Session) -> None:
    """Kernel code can stop the kernel's loop reading the socket (it stays open, unanswered). The next run waits
    for its snapshot once, SNAP_TIMEOUT, then the socket is closed and the calls go over the comm: that run is
    undone with its variables, and the runs after it do not wait again."""
    from interpreter_lsp.kernels.snapshots import SNAP_TIMEOUT

    s = session
    snapshots = "__import__('sys').modules['_interpreter_lsp_snapshots']"
    _run, status = await s.run_and_wait(f"import asyncio\nasyncio.get_running_loop().remove_reader({snapshots}._calls)")
    assert status["state"] == "ok", s.text(_run)
    _run, status = await s.run_and_wait("x = 1")  # waits for the snapshot the socket never answers
    assert status["state"] == "ok", s.text(_run)
    await _undo_brings_x_back(s, within=SNAP_TIMEOUT)


async def test_kernel_code_that_closes_the_snapshots_comm_leaves_undo_working(session: Session) -> None:
    """Behind the socket, the calls go over a comm (snapshots.open_calls); code of the user's (or a model's) can
    shut the one and close the other. The next snapshot finds no answer there and the calls go as execute
    requests from then on: the runs after it are still undone with their variables."""
    s = session
    _run, status = await s.run_and_wait("x = 1")
    assert status["state"] == "ok", s.text(_run)
    closing = SHUT_CALLS + "for _c in list(get_ipython().kernel.comm_manager.comms.values()):\n    _c.close()\n"
    _run, status = await s.run_and_wait(closing)
    assert status["state"] == "ok", s.text(_run)
    comms = "len(get_ipython().kernel.comm_manager.comms)"
    assert await value(s, comms) == 0
    await _undo_brings_x_back(s)


async def _undo_after(s: Session, code: str) -> tuple[dict[str, Any], dict[str, str]]:
    """`code` run, then undone: undo's answer, and what it named as not restorable (name -> why)."""
    _run, status = await s.run_and_wait(code)
    assert status["state"] == "ok", s.text(_run)
    result = await s.command(p.UNDO, {})
    return result, {item["name"]: item["why"] for item in result["notRestorable"]}


async def test_an_array_in_shared_memory_is_named_not_taken_for_unchanged(session: Session) -> None:
    """A fork does not copy memory mapped shared (multiprocessing.shared_memory, a file mapped writable): a
    fork snapshot, and a pack made from it, see such an array as it is now. Undo names it, with why, where it
    used to take the changed array for unchanged and say nothing; the private array beside it comes back."""
    s = session
    _run, status = await s.run_and_wait(
        "import numpy as np\nfrom multiprocessing import shared_memory\n"
        "shm = shared_memory.SharedMemory(create=True, size=1 << 20)\n"
        "shared = np.ndarray((1 << 17,), dtype=np.float64, buffer=shm.buf)\nshared[:] = 1\n"
        "private = np.ones(1 << 17)\nwhole = object()  # not small plain data: the snapshots are forks\n"
    )
    assert status["state"] == "ok", s.text(_run)
    try:
        result, lost = await _undo_after(s, "shared[:] = 2\nprivate[:] = 2")
        assert result["variablesRestored"] == ["private"], result
        assert "its memory is shared" in lost.get("variable shared", ""), result
        assert await value(s, "[float(shared.sum()), float(private.sum())]") == [2.0 * (1 << 17), float(1 << 17)]
    finally:
        await s.run_and_wait("del shared\nshm.close()\nshm.unlink()")


async def test_shared_memory_held_inside_other_values_is_named_too(session: Session) -> None:
    """Cases written after the code: a file mapped writable (numpy.memmap, whose pickle is a copy made in band)
    held in a container, and a pandas DataFrame over shared memory (a block pickles a copy of its values). What a
    value holds is read through its references, not through its pickle: both are named."""
    s = session
    _run, status = await s.run_and_wait(
        "import numpy as np, pandas as pd\nfrom multiprocessing import shared_memory\n"
        "mm = np.memmap('mapped.bin', dtype='float64', mode='w+', shape=(1 << 14,))\nmm[:] = 1\n"
        "box = {'inner': [mm[:100]]}\n"
        "shm = shared_memory.SharedMemory(create=True, size=1 << 20)\n"
        "frame = pd.DataFrame(np.ndarray((256, 512), dtype=np.float64, buffer=shm.buf)[:, :4], copy=False)\n"
        "frame[:] = 1.0\nwhole = object()  # not small plain data: the snapshots are forks\n"
    )
    assert status["state"] == "ok", s.text(_run)
    try:
        result, lost = await _undo_after(s, "mm[:] = 5\nnp.frombuffer(shm.buf, dtype=np.float64)[:] = 7")
        for name in ("mm", "box", "frame"):
            assert "its memory is shared" in lost.get(f"variable {name}", ""), (name, result)
    finally:
        await s.run_and_wait("del frame\nshm.close()\nshm.unlink()")


async def test_undo_of_the_run_that_created_them_removes_them(session: Session) -> None:
    s = session
    await s.run_and_wait("x = [1, 2]\ny = {'a': 1}")
    result = await s.command(p.UNDO, {})
    assert result["variablesRemoved"] == ["x", "y"] and result["variablesRestored"] == []
    assert await value(s, "['x' in globals(), 'y' in globals()]") == [False, False]


async def test_a_restart_since_the_run_is_named_not_hidden(session: Session) -> None:
    s = session
    await s.run_and_wait("z = 1")
    await s.run_and_wait("z = 2")
    await s.command(p.RESTART_KERNEL, {"language": "python"})
    result = await s.command(p.UNDO, {})
    lost = {item["name"]: item["why"] for item in result["notRestorable"]}
    assert "restarted" in lost.get("kernel variables", ""), lost
    assert result["variablesRestored"] == []


async def test_shell_runs_have_no_variables_to_undo(session: Session) -> None:
    s = session
    await s.run_and_wait("echo hi", "shell")
    result = await s.command(p.UNDO, {})
    assert result["variablesRestored"] == [] and result["variablesRemoved"] == []
    assert not [item for item in result["notRestorable"] if "variable" in item["name"]]


async def test_an_interrupt_that_lands_on_the_snapshot_stops_the_run(session: Session) -> None:
    """An interrupt the user sends while the kernel still takes the snapshot of the run before is meant for
    the next run: that run stops (it never runs: the `value` below would wait a minute for its sleep) with
    the kernel's state intact (no fallback restart). The snapshot waits for the test's release file, not a
    fixed 30 s."""
    s = session
    _run, status = await s.run_and_wait(
        "import sys, time, pathlib\n"
        "_m = sys.modules['_interpreter_lsp_snapshots']\n"
        "_snap = _m.snap\n"
        "def _slow(key):\n"
        "    if not pathlib.Path('snapping').exists():  # once: the next snapshot takes its time\n"
        "        pathlib.Path('snapping').touch()\n"
        "        deadline = time.monotonic() + 30\n"
        "        while not pathlib.Path('release').exists() and time.monotonic() < deadline:\n"
        "            time.sleep(0.01)  # until the test has seen the run end (bounded)\n"
        "    return _snap(key)\n"
        "_m.snap = _slow\n"
        "kept = 'state survives'\n"
        "not_plain = object()  # a namespace that is not small plain data: the snapshot is a fork, asked apart\n"
    )
    assert status["state"] == "ok", s.text(_run)
    run_id = await s.run("import time\ntime.sleep(60)")
    await s.wait_for(lambda: (s.root / "snapping").exists(), what="the snapshot under way")
    await s.command(p.INTERRUPT, {})
    status = await s.finished(run_id, timeout=60)
    assert status["state"] == "interrupted", status
    assert (s.root / "snapping").exists() and not (s.root / "release").exists(), "the snapshot was still under way"
    (s.root / "release").touch()
    assert await value(s, "kept") == "state survives"  # interrupted, not restarted


async def test_the_snapshots_end_with_their_kernel(session: Session) -> None:
    """A restart (or a death) of the kernel ends its snapshot processes: none is left behind."""
    s = session
    await s.run_and_wait("a = 1\nnot_plain = object()  # the snapshots are forks (not small plain data)")
    await s.run_and_wait("a = 2")

    def alive(pid: int) -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"

    # The kernel's children are its snapshot processes. An older one packs itself (snapshot_pages.py) and
    # leaves once a newer one is taken, whenever that is, and a newer one is taken after every run: looked
    # at from here, between two runs, the old one could be gone and the new one not yet there. So the kernel
    # looks during a run, when the newest (the one the run found: taken before it started) is alive.
    _run, status = await s.run_and_wait(
        "import os as _os\n"
        "def _live_children():\n"
        "    found = []\n"
        "    for entry in _os.listdir('/proc'):\n"
        "        try:\n"
        "            fields = open(f'/proc/{entry}/stat').read().rsplit(')', 1)[1].split()\n"
        "        except (OSError, IndexError):\n"
        "            continue\n"
        "        if fields[1] == str(_os.getpid()) and fields[0] != 'Z':\n"
        "            found.append(int(entry))\n"
        "    return found\n"
    )
    assert status["state"] == "ok", s.text(_run)
    pids = await value(s, "_live_children()")
    assert isinstance(pids, list) and pids
    await s.command(p.RESTART_KERNEL, {"language": "python"})
    await s.wait_for(lambda: not any(alive(pid) for pid in pids), what="the snapshots of the old kernel ending")


async def test_with_variables_undo_off_undo_names_them(workspace_root: Path, home: Path) -> None:
    """interpreter.undoVariables false: no snapshot is taken, and undo says the variables stay, and why."""
    s = await start_session(workspace_root, home, configuration={"undoVariables": False})
    try:
        await s.run_and_wait("x = 1")
        result = await s.command(p.UNDO, {})
        lost = {item["name"]: item["why"] for item in result["notRestorable"]}
        assert lost.get("kernel variables") == "variables undo is off (interpreter.undoVariables)", lost
        assert result["variablesRemoved"] == []
        assert await value(s, "'x' in globals()") is True
        assert await value(s, "len(__import__('sys').modules['_interpreter_lsp_snapshots']._order)") == 0
    finally:
        await stop_session(s)


async def test_a_kernel_that_garbles_its_answer_does_not_break_undo(session: Session) -> None:
    """The answer comes from the kernel, whose code may be hostile: one that replaces the restore with
    garbage gets an undo that still takes the run back, files and conversation, and names nothing wrongly."""
    s = session
    (s.root / "data.txt").write_text("before")
    await s.run_and_wait(
        "import sys, json\n"
        "sys.modules['_interpreter_lsp_snapshots'].restore = lambda key: json.dumps("
        "{'restored': 'xyz', 'removed': [1, None], 'lost': ['not a dict', {'why': 3}]})\n"
    )
    await s.run_and_wait("open('data.txt', 'w').write('after')")
    result = await s.command(p.UNDO, {})
    assert result["restored"] == ["data.txt"] and (s.root / "data.txt").read_text() == "before"
    assert result["variablesRestored"] == [] and result["variablesRemoved"] == []
    assert {"name": "variable None", "why": "3"} in result["notRestorable"]


def _read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def _lines(path: Path, at_least: int) -> list[str]:
    """The lines of a file the kernel appends to, once it has at_least of them (polled, bounded: the kernel
    writes it between requests, when no notification comes)."""
    for _ in range(1200):
        lines = _read_lines(path)
        if len(lines) >= at_least:
            return lines
        await asyncio.sleep(0.05)
    raise AssertionError(f"{path.name} never had {at_least} lines")


async def test_each_snapshot_is_followed_by_an_unseen_warm_up(session: Session) -> None:
    """After a run's snapshot, the kernel takes a run's path once, silently (snapshot_kernel.warm): the next run
    does not pay the fork's copy-on-write faults. It shows nothing, and a stdout the user replaced is never
    written to."""
    s = session
    first, status = await s.run_and_wait(
        "import sys\n"
        "_m = sys.modules['_interpreter_lsp_snapshots']\n"
        "_warm = _m.warm\n"
        "def _counting():\n"
        "    with open('warmed', 'a') as out:\n"
        "        out.write(type(sys.stdout).__name__ + '\\n')\n"
        "    return _warm()\n"
        "_m.warm = _counting\n"
        "class Recorder:\n"
        "    writes = []\n"
        "    def write(self, text):\n"
        "        Recorder.writes.append(text)\n"
        "        return len(text)\n"
        "    def flush(self):\n"
        "        pass\n"
    )
    assert status["state"] == "ok", s.text(first)
    warmed = await _lines(s.root / "warmed", 1)
    assert warmed == ["OutStream"]
    _run, status = await s.run_and_wait("_real = sys.stdout\nsys.stdout = Recorder()")
    assert status["state"] == "ok"
    assert (await _lines(s.root / "warmed", 2))[1] == "Recorder"  # the warm-up saw it, and left it alone
    last, status = await s.run_and_wait("sys.stdout = _real\nopen('writes', 'w').write(repr(Recorder.writes))")
    assert status["state"] == "ok"
    assert (s.root / "writes").read_text() == "[]"
    assert s.text(first) == ""
    runs = {first, _run, last}
    assert {o["runId"] for o in s.notes[p.OUTPUT]} <= runs  # no output of the warm-ups anywhere


@pytest.mark.parametrize("kept", [True, False], ids=["kept as a pickle", "forked"])
async def test_queued_runs_take_one_snapshot_each_and_undo_steps_back_through_them(
    session: Session, kept: bool
) -> None:
    """Runs queued back to back: one snapshot after each (a snapshot whose answer came in the same loop
    iteration as the next run's turn once read as failed, and the run took a second), in a silent request:
    kept as its pickle when the namespace is small plain data, else forked; undo brings back, step by step,
    the state each run found."""
    s = session
    taking = "keep" if kept else "snap"  # `snap` tries `keep` first, through the module's own name: not counted
    setup, status = await s.run_and_wait(
        "import sys\n"
        "_m = sys.modules['_interpreter_lsp_snapshots']\n"
        f"_take = _m.{taking}\n"
        "def _where(key):\n"
        "    with open('snaps', 'a') as out:\n"
        "        out.write(f'{globals().get(\"a\")}\\n')\n"
        "    return _take(key)\n"
        f"_m.{taking} = _where\n"
        + ("" if kept else "not_plain = object()\n")
    )
    assert status["state"] == "ok", s.text(setup)
    # The first run sleeps, so the others are all queued behind it when it ends.
    ids = await asyncio.gather(
        s.run("import time\ntime.sleep(1)\na = 1"), s.run("a = 2"), s.run("a = 3"), s.run("a = 4")
    )
    for run_id in ids:
        assert (await s.finished(run_id))["state"] == "ok", s.text(run_id)
    # The value each snapshot found: a second snapshot of one state would repeat it.
    where: list[str] = []
    for _ in range(1200):
        where = _read_lines(s.root / "snaps")
        if "4" in where:
            break
        await asyncio.sleep(0.05)
    assert where == ["None", "1", "2", "3", "4"], where
    for expected in ("3", "2"):  # read without a run (a run would be the next one undone)
        assert (await s.command(p.UNDO, {}))["variablesRestored"] == ["a"]
        listed = (await s.command(p.VARIABLES, {}))["variables"]
        assert [v["summary"] for v in listed if v["name"] == "a"] == [expected], listed


async def test_a_queued_run_that_fails_still_leaves_a_snapshot_for_the_run_behind(session: Session) -> None:
    """A queued run that raised leaves its state for the run behind (a snapshot after it), and undo puts
    back what each run found."""
    s = session
    ids = await asyncio.gather(
        s.run("import time\ntime.sleep(1)\na = 1"), s.run("a = 2\nraise ValueError('no')"), s.run("a = 3")
    )
    states = [(await s.finished(run_id))["state"] for run_id in ids]
    assert states == ["ok", "error", "ok"]
    for expected in ("2", "1"):
        assert (await s.command(p.UNDO, {}))["variablesRestored"] == ["a"]
        listed = (await s.command(p.VARIABLES, {}))["variables"]
        assert [v["summary"] for v in listed if v["name"] == "a"] == [expected], listed
