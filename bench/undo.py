"""Undo of files: what capturing pre-images costs a run, and how long a restore takes.

A real ipykernel (jupyter_client) runs each cell in a temporary workspace; the baseline is the same cell
run without capture, in the same process, interleaved with the captured runs. Capture is what the server
awaits before a local run starts (undo.FileUndo.before_run: a stat walk of the workspace plus a copy of
every file changed since the previous snapshot, or none when the files tracker saw no change since the last
walk), with the tracker's start and end barriers around the run (files.FileChanges, inotify, as in the
server); restore is plan + apply of an undo of that run.

Workspaces: 1,000 files of 4 KB in 20 directories; and one 100 MB file beside 10 small ones.
"capture" is measured right after the previous run changed the files (the worst case: the copy of what it
changed is on this run's path); "after a pause" is a run's capture once the copy the server starts when a run
or an undo ends has finished (the walk only).

Cells: write 1 file; write 50 files (`open(..., "w")`); `!sed -i` one file; rewrite the 100 MB file
(its next snapshot copies it: that run's capture is reported too).

Variables (kernels/snapshot_kernel.py): a kernel holding a 100 MB float array (and 1 GB with BENCH_1GB=1)
beside smaller variables, forked; and one holding a small plain namespace, kept as its pickle.
As the server does, a snapshot (a fork) and its warm-up are taken after the run
before, off the next run's path (their time is shown apart, and what they would cost taken just before the run);
the overhead is what the captured run then takes more than the same cell without a snapshot, interleaved.
Cells: change the 100 MB array in place; change 10 MB of it;
rebind a small variable. Storage: the pages the snapshot holds once the run is over (smaps_rollup
Private_*), against the bytes the run changed; then, once the next snapshot is taken (as the server takes it
after the run), what it holds packed (kernels/snapshot_pages.py: its memfd), and how long packing took (in
the background: waited for here). Restore, from that pack (what an undo of the run finds): fingerprints of
both sides, the buffers put back together, the copy back of what differs.

Run: .venv/bin/python bench/undo.py [repeats]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))

from jupyter_client.manager import start_new_kernel

from interpreter_lsp.files import FileChanges
from interpreter_lsp.kernels.snapshots import INSTALL, MODULE, WARM
from interpreter_lsp.kernels.specs import MEMORY_HISTORY
from interpreter_lsp.preimages import PreimageStore
from interpreter_lsp.undo import FileUndo


def make_small(root: Path) -> None:
    for d in range(20):
        folder = root / f"dir {d}"
        folder.mkdir()
        for f in range(50):
            (folder / f"file{f}.txt").write_bytes(os.urandom(2048).hex().encode())


def make_big(root: Path) -> None:
    with open(root / "big.bin", "wb") as out:
        for _ in range(100):
            out.write(os.urandom(1 << 20))
    for f in range(10):
        (root / f"small{f}.txt").write_text(f"small {f}\n")


CELLS = {
    "write 1 file": ("open('dir 0/file0.txt', 'w').write('x' * 4096)", ["dir 0/file0.txt"]),
    "write 50 files": (
        "for i in range(50): open(f'dir 1/file{i}.txt', 'w').write(str(i) * 4096)",
        [f"dir 1/file{i}.txt" for i in range(50)],
    ),
    "!sed -i 1 file": ("get_ipython().system(\"sed -i 's/a/b/g' 'dir 2/file0.txt'\")", ["dir 2/file0.txt"]),
}
BIG_CELLS = {
    "write 1 small file beside 100 MB": ("open('small0.txt', 'w').write('changed')", ["small0.txt"]),
    "rewrite the 100 MB file": (
        "f = open('big.bin', 'r+b'); f.write(b'changed'); f.close()",
        ["big.bin"],
    ),
}


def run_cell(client, code: str) -> float:
    started = time.perf_counter()
    reply = client.execute_interactive(code, timeout=120, output_hook=lambda _msg: None)
    assert reply["content"]["status"] == "ok", reply["content"]
    return time.perf_counter() - started


def size_of(root: Path) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(root) for f in files)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def scenario(name: str, root: Path, cells: dict[str, tuple[str, list[str]]], repeats: int) -> None:
    store_dir = Path(tempfile.mkdtemp(prefix="undo-store-"))
    # As in the server: the files tracker (inotify) says what each run touched, and lets a run reuse the last
    # walk of the workspace when nothing changed since it began.
    changes = FileChanges(root, polling=False)
    undo = FileUndo(root, PreimageStore(root, store_dir), changes)
    live = size_of(root)
    started = time.perf_counter()
    await undo.before_run("first")
    first = time.perf_counter() - started
    print(f"\n== {name}: {live / 1e6:.1f} MB live; first snapshot of the session {first * 1000:.0f} ms, "
          f"store {undo.store.used / 1e6:.1f} MB")
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(root))
    try:
        run_cell(client, "1")
        for cell, (code, changed) in cells.items():
            bare, captured, capture, restore, idle = [], [], [], [], []
            used_before = undo.store.used
            for i in range(repeats):
                bare.append(run_cell(client, code))
                # Undo needs the run's pre-images: the file is put back between the two runs. What the run
                # waits for: its start barrier and pre-images before its code, its end barrier after.
                t0 = time.perf_counter()
                await changes.begin(f"r{i}")
                await undo.before_run(f"r{i}")
                t1 = time.perf_counter()
                ran = run_cell(client, code)
                t2 = time.perf_counter()
                await changes.settle()
                touched = changes.end(f"r{i}")
                waited = t1 - t0 + time.perf_counter() - t2
                capture.append(waited)
                captured.append(waited + ran)
                files = undo.run_finished(f"r{i}", touched.files, touched.note)
                assert sorted(f["path"] for f in files) == sorted(changed), (files, changed)
                t3 = time.perf_counter()
                plan = undo.plan([{"type": "run", "runId": f"r{i}"}], remote=False, force=True)
                restored, _removed, failed = await undo.apply(plan)
                restore.append(time.perf_counter() - t3)
                assert not failed and sorted(restored) == sorted(changed), (restored, failed)
                # The server copies what changed as soon as a run or an undo ends (FileUndo.warm): a run
                # that comes after a pause finds it done.
                undo.warm()
                if undo._warming is not None:
                    await undo._warming
                t4 = time.perf_counter()
                await changes.begin(f"idle{i}")
                await undo.before_run(f"idle{i}")
                await changes.settle()
                changes.end(f"idle{i}")
                idle.append(time.perf_counter() - t4)
            overhead = [c / b - 1 for c, b in zip(captured, bare, strict=True)]
            print(
                f"{cell:34s} run {statistics.median(bare) * 1000:7.1f} ms | capture p50 "
                f"{statistics.median(capture) * 1000:6.1f} ms p95 {pct(capture, 0.95) * 1000:6.1f} ms | "
                f"overhead p50 {statistics.median(overhead) * 100:+6.1f} % | after a pause "
                f"{statistics.median(idle) * 1000:5.1f} ms | restore p50 "
                f"{statistics.median(restore) * 1000:6.1f} ms p95 {pct(restore, 0.95) * 1000:6.1f} ms | "
                f"store +{(undo.store.used - used_before) / 1e6:.1f} MB"
            )
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
        changes.close()
    print(f"store after {name}: {undo.store.used / 1e6:.1f} MB for {live / 1e6:.1f} MB live "
          f"({undo.store.used / live:.2f}x)")


def call(client, function: str, argument: object) -> dict:
    import ast
    import json

    expression = f"__import__({MODULE!r}).{function}({json.dumps(argument)})"
    reply = client.execute_interactive("", silent=True, user_expressions={"r": expression}, timeout=300,
                                       output_hook=lambda _msg: None)
    result = reply["content"]["user_expressions"]["r"]
    assert result["status"] == "ok", result
    answer = json.loads(ast.literal_eval(result["data"]["text/plain"]))
    assert "error" not in answer, answer
    return answer


VARIABLE_CELLS = {
    "100 MB array changed in place": ("big *= 1.0001", 100e6),
    "10 MB of it changed": ("big[:1_250_000] += 1", 10e6),
    "a small variable rebound": ("small = [small[0] + 1]", 0),
}


PLAIN_CELLS = {
    "a small variable rebound": ("small = [small[0] + 1]", 0),
    "an entry of the dict changed": ("table[0] += 'x'", 0),
}


def variables(repeats: int, megabytes: int) -> None:
    """`megabytes` 0: a small plain namespace (a list, a 100-entry dict), which is kept as its pickle."""
    # As the server starts its kernels (kernels/specs.py): IPython's history in memory, not in a sqlite file.
    manager, client = start_new_kernel(kernel_name="python3", extra_arguments=[MEMORY_HISTORY])
    try:
        run_cell(client, INSTALL)
        if megabytes:
            run_cell(client, f"import numpy as np\nbig = np.random.rand({megabytes} * 125_000)\nsmall = [0]\n"
                             "table = {i: str(i) for i in range(10_000)}")
            print(f"\n== variables: a {megabytes} MB array, a 10,000-entry dict, a list (forked)")
        else:
            run_cell(client, "small = [0]\ntable = {i: str(i) for i in range(100)}")
            print("\n== variables: a list and a 100-entry dict (small plain data: kept as its pickle, no fork)")
        for cell, (code, changed) in (VARIABLE_CELLS if megabytes else PLAIN_CELLS).items():
            if megabytes != 100 and changed == 100e6:  # the whole array, whatever its size
                cell, changed = f"{megabytes} MB array changed in place", megabytes * 1e6
            bare, captured, inline, snap, restore, held, packed, packing = [], [], [], [], [], [], [], []
            for i in range(repeats):
                bare.append(run_cell(client, code))
                t0 = time.perf_counter()
                call(client, "snap", f"r{i}")
                t1 = time.perf_counter()
                # As the server does: the snapshot and its warm-up go after the run before, while the user
                # reads; the next run pays the copy-on-write of the pages it changes.
                client.execute_interactive(WARM, silent=True, timeout=60, output_hook=lambda _msg: None)
                ran = run_cell(client, code)
                snap.append(t1 - t0)
                captured.append(ran)
                inline.append(t1 - t0 + ran)
                kids = call(client, "sizes", 0)
                held.append(kids.get(f"r{i}", 0))
                # As the server does after the run: the next snapshot, whereupon this one packs itself (in
                # the background; waited for here to read what it then holds). An undo of the run restores
                # from that pack.
                call(client, "snap", f"n{i}")
                t3 = time.perf_counter()
                call(client, "settle", 0)
                packing.append(time.perf_counter() - t3)
                kids = call(client, "sizes", 0)
                packed.append(kids.get(f"r{i}", 0))
                t2 = time.perf_counter()
                answer = call(client, "restore", f"r{i}")
                restore.append(time.perf_counter() - t2)
                assert answer["restored"], answer
                call(client, "drop", [f"r{i}", f"n{i}"])
            overhead = [c - b for c, b in zip(captured, bare, strict=True)]
            ratio = [c / b - 1 for c, b in zip(captured, bare, strict=True)]
            def storage(kept: float, changed: float = changed) -> str:
                return f"{kept / changed:.2f}x the bytes changed" if changed else (
                    f"{kept / 1e6:.1f} MB" if kept >= 1e5 else f"{kept / 1e3:.1f} KB")
            inline_overhead = [c - b for c, b in zip(inline, bare, strict=True)]
            print(
                f"{cell:34s} run {statistics.median(bare) * 1000:7.1f} ms | snapshot p50 "
                f"{statistics.median(snap) * 1000:5.1f} ms | overhead p50 {statistics.median(overhead) * 1000:6.1f} ms "
                f"({statistics.median(ratio) * 100:+.1f} %; were it taken just before the run "
                f"{statistics.median(inline_overhead) * 1000:.1f} ms) | restore p50 "
                f"{statistics.median(restore) * 1000:6.1f} ms "
                f"p95 {pct(restore, 0.95) * 1000:6.1f} ms | held as a fork {storage(statistics.median(held))}, "
                f"packed {storage(statistics.median(packed))} (packing {statistics.median(packing) * 1000:.0f} ms)"
            )
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


async def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    with tempfile.TemporaryDirectory(prefix="undo bench ") as tmp:
        small = Path(tmp) / "1000 files"
        small.mkdir()
        make_small(small)
        await scenario("1,000 files of 4 KB", small, CELLS, repeats)
        big = Path(tmp) / "100 MB"
        big.mkdir()
        make_big(big)
        await scenario("one 100 MB file + 10 small", big, BIG_CELLS, max(3, repeats // 3))
    variables(repeats, 0)
    variables(repeats, 100)
    if os.environ.get("BENCH_1GB"):
        variables(max(3, repeats // 3), 1000)


if __name__ == "__main__":
    asyncio.run(main())
