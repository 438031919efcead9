"""Linux's file watching on the event loop (inotify_tree.py), through what a run reports (files.FileChanges):
directories made, moved inside, moved out and moved in, renamed to a skipped name, and the kernel's queue
overflowing, for real."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from interpreter_lsp import inotify_tree
from interpreter_lsp.files import FileChanges

WAIT = 30.0  # bound on what a busy machine may take

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


@pytest.fixture
async def changes(tmp_path: Path) -> AsyncIterator[FileChanges]:
    root = tmp_path / "work space"
    root.mkdir()
    watcher = FileChanges(root, polling=False)
    await watcher.begin("start")  # the observer runs from here on
    await watcher.settle()
    watcher.end("start")
    assert watcher.kind == "inotify"
    try:
        yield watcher
    finally:
        watcher.close()


async def run(changes: FileChanges, run_id: str, act) -> list[dict[str, str]]:  # type: ignore[no-untyped-def]
    await changes.begin(run_id)
    act()
    await changes.settle()
    touched = changes.end(run_id)
    assert touched.note is None, touched.note
    return touched.files


async def another_process(cwd: Path, code: str) -> None:
    """`code` run by another Python process (as a kernel writes files), to its end."""
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", code, cwd=cwd)
    assert await asyncio.wait_for(process.wait(), WAIT) == 0


def watched(changes: FileChanges) -> set[str]:
    """The directories watched now, relative to the root (the kernel's own count: /proc/self/fdinfo)."""
    tree = changes._built.observer  # type: ignore[union-attr]
    fd = tree._inotify.fileno()  # type: ignore[attr-defined]
    assert Path(f"/proc/self/fdinfo/{fd}").read_text().count("inotify wd:") == len(tree._watches)  # type: ignore[attr-defined]
    return {os.path.relpath(p, changes.root) for p in tree._watches}  # type: ignore[attr-defined]


async def test_a_directory_the_run_makes_and_fills_at_once_is_reported_whole(changes: FileChanges) -> None:
    """A shell makes a tree and writes into it faster than a watch can be placed on each new directory:
    what is already in a directory when its watch comes is reported from a listing."""
    root = changes.root

    def make() -> None:
        subprocess.run(
            ["sh", "-c", "mkdir -p 'out/a b/c' && for i in 1 2 3 4 5; do echo $i > \"out/a b/c/f$i.txt\"; done"
             " && echo top > out/top.txt"],
            cwd=root, check=True,
        )

    files = await run(changes, "r1", make)
    assert files == [
        {"path": "out/a b/c/f1.txt", "change": "created"},
        {"path": "out/a b/c/f2.txt", "change": "created"},
        {"path": "out/a b/c/f3.txt", "change": "created"},
        {"path": "out/a b/c/f4.txt", "change": "created"},
        {"path": "out/a b/c/f5.txt", "change": "created"},
        {"path": "out/top.txt", "change": "created"},
    ]
    assert {".", "out", "out/a b", "out/a b/c"} <= watched(changes)
    # And what is written there later is seen through its watch.
    files = await run(changes, "r2", lambda: (root / "out" / "a b" / "c" / "f1.txt").write_text("again"))
    assert files == [{"path": "out/a b/c/f1.txt", "change": "modified"}]


async def test_a_directory_moved_inside_the_workspace_is_followed_under_its_new_name(changes: FileChanges) -> None:
    root = changes.root
    (root / "data" / "raw").mkdir(parents=True)
    (root / "data" / "raw" / "x.csv").write_text("1")
    (root / "data" / "y.csv").write_text("2")
    await run(changes, "made", lambda: None)
    files = await run(changes, "r1", lambda: (root / "data").rename(root / "archive"))
    assert files == [
        {"path": "archive/raw/x.csv", "change": "created"},
        {"path": "archive/y.csv", "change": "created"},
        {"path": "data/raw/x.csv", "change": "deleted"},
        {"path": "data/y.csv", "change": "deleted"},
    ]
    assert "data" not in watched(changes) and {"archive", "archive/raw"} <= watched(changes)
    # Its watches moved with it: a write there is reported under the path it has now, not the old one.
    files = await run(changes, "r2", lambda: (root / "archive" / "raw" / "x.csv").write_text("3"))
    assert files == [{"path": "archive/raw/x.csv", "change": "modified"}]


async def test_a_directory_moved_out_is_no_longer_reported(changes: FileChanges, tmp_path: Path) -> None:
    root = changes.root
    (root / "old" / "deep").mkdir(parents=True)
    (root / "old" / "deep" / "f.txt").write_text("1")
    await run(changes, "made", lambda: None)
    before = changes.generation
    outside = tmp_path / "outside"
    await run(changes, "r1", lambda: (root / "old").rename(outside))
    # A directory gone: what it held is looked at again by the next snapshot (files.changed_since says so).
    assert changes.changed_since(before) is None
    assert not {"old", "old/deep"} & watched(changes)
    files = await run(changes, "r2", lambda: (outside / "deep" / "f.txt").write_text("written outside"))
    assert files == []


async def test_a_directory_moved_in_is_reported_and_watched(changes: FileChanges, tmp_path: Path) -> None:
    root = changes.root
    outside = tmp_path / "incoming"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "a.txt").write_text("a")
    (outside / "b.txt").write_text("b")
    files = await run(changes, "r1", lambda: outside.rename(root / "incoming"))
    assert files == [
        {"path": "incoming/b.txt", "change": "created"},
        {"path": "incoming/sub/a.txt", "change": "created"},
    ]
    files = await run(changes, "r2", lambda: (root / "incoming" / "sub" / "a.txt").write_text("changed"))
    assert files == [{"path": "incoming/sub/a.txt", "change": "modified"}]


async def test_a_directory_renamed_to_a_skipped_name_is_no_longer_watched(changes: FileChanges) -> None:
    root = changes.root
    (root / "out" / "lib").mkdir(parents=True)
    (root / "out" / "lib" / "m.py").write_text("x")
    await run(changes, "made", lambda: None)
    await run(changes, "r1", lambda: (root / "out").rename(root / "build"))
    assert not {w for w in watched(changes) if w.startswith(("out", "build"))}
    files = await run(changes, "r2", lambda: (root / "build" / "lib" / "m.py").write_text("y"))
    assert files == []
    # And back: watched again, its files under their new names.
    files = await run(changes, "r3", lambda: (root / "build").rename(root / "dist2"))
    assert files == [{"path": "dist2/lib/m.py", "change": "created"}]
    assert {"dist2", "dist2/lib"} <= watched(changes)


async def test_a_removed_tree_leaves_no_watch_behind(changes: FileChanges) -> None:
    root = changes.root
    for i in range(5):
        (root / "tmp" / f"d{i}").mkdir(parents=True)
        (root / "tmp" / f"d{i}" / "f.txt").write_text("x")
    await run(changes, "made", lambda: None)
    assert len([w for w in watched(changes) if w.startswith("tmp")]) == 6
    files = await run(changes, "r1", lambda: shutil.rmtree(root / "tmp"))
    assert files == [{"path": f"tmp/d{i}/f.txt", "change": "deleted"} for i in range(5)]
    assert watched(changes) == {"."}
    # The same path made again is watched anew.
    files = await run(changes, "r2", lambda: ((root / "tmp").mkdir(), (root / "tmp" / "n.txt").write_text("n")))
    assert files == [{"path": "tmp/n.txt", "change": "created"}]


def _max_queued_events() -> int:
    return int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())


async def test_an_overflowing_queue_is_said_and_watching_goes_on(
    changes: FileChanges, caplog: pytest.LogCaptureFixture
) -> None:
    """More events than the kernel queues (fs.inotify.max_queued_events) while the loop does not read: the
    run's list says it may be incomplete, and changes after it are reported again."""
    limit = _max_queued_events()
    if limit > 50_000:
        pytest.skip(f"max_queued_events is {limit}: too many files to make here")
    root = changes.root
    await run(changes, "made", lambda: (root / "many").mkdir())  # watched before the queue fills
    await changes.begin("r1")
    for i in range(limit // 2 + 100):  # two events each (created, closed), none read meanwhile
        (root / f"f{i}").write_bytes(b"")
    (root / "many" / "made during the overflow").mkdir()
    await changes.settle()
    touched = changes.end("r1")
    assert touched.note is not None and "overflowed" in touched.note
    # The settle's barrier, dropped with the queue's overflow, was not waited for (SETTLE_TIMEOUT).
    assert not [r for r in caplog.records if "did not arrive" in r.getMessage()]
    assert {"many", "many/made during the overflow"} <= watched(changes)
    await changes.begin("r2")
    (root / "many" / "made during the overflow" / "after.txt").write_text("x")
    await changes.settle()
    assert changes.end("r2").files == [{"path": "many/made during the overflow/after.txt", "change": "created"}]


async def test_a_barrier_read_at_once_never_comes_before_an_overflow_ahead_of_it(changes: FileChanges) -> None:
    """`caught_up_now` reads the queue at once (no loop iteration). When the queue overflowed, the overflow is
    counted in that same read, before any barrier behind it: the moment it says caught up, it no longer
    claims to see everything (a run's pre-images then come from a walk, not from the tracker's list)."""
    limit = _max_queued_events()
    if limit > 50_000:
        pytest.skip(f"max_queued_events is {limit}: too many files to make here")
    root = changes.root
    assert changes.sees_everything
    for i in range(limit // 2 + 100):  # two events each (created, closed), none read meanwhile
        (root / f"f{i}").write_bytes(b"")
    for _ in range(limit):  # a slice of the queue per call, as the run's start reads it
        if changes.caught_up_now():
            break
    else:
        pytest.fail("the queue was read through without a barrier coming out")
    assert not changes.sees_everything


async def test_changes_another_process_made_are_read_with_the_barrier_in_one_step(changes: FileChanges) -> None:
    """A file written by another process (as a kernel writes) before a barrier is sent is in the same read as
    the barrier: `caught_up_now` and the run's settle find it without waiting for the loop."""
    before = changes.generation
    await another_process(changes.root, "open('made.txt', 'w').write('x')")
    assert changes.caught_up_now()
    assert changes.changed_since(before) == {"made.txt"}
    await changes.begin("r1")
    await another_process(changes.root, "open('made.txt', 'a').write('y')")
    assert changes.start_settle() is None  # nothing to wait for: the barrier came out
    assert changes.end("r1").files == [{"path": "made.txt", "change": "modified"}]


async def test_a_move_whose_two_halves_come_in_two_reads_is_still_one_move(
    changes: FileChanges, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel queues a rename's IN_MOVED_FROM and IN_MOVED_TO together, but a read can come between them:
    the first half waits for the next read. Here the real events of a real rename are read by hand and handed
    over in two reads."""
    root = changes.root
    tree = changes._built.observer  # type: ignore[union-attr]
    (root / "a" / "in").mkdir(parents=True)
    await run(changes, "made", lambda: None)
    loop = asyncio.get_running_loop()
    fd = tree._inotify.fileno()
    loop.remove_reader(fd)
    await changes.begin("r1")
    (root / "a").rename(root / "b")
    events = list(tree._inotify.read(timeout=0))
    split = next(i for i, e in enumerate(events) if e.cookie) + 1  # after the IN_MOVED_FROM
    reads = [events[:split], events[split:]]
    monkeypatch.setattr(inotify_tree, "parse_events", lambda _data: reads.pop(0))
    monkeypatch.setattr(inotify_tree.os, "read", lambda _fd, _n: b"")
    tree._readable()
    assert tree._moved_from is not None  # waiting for its other half
    tree._readable()
    assert tree._moved_from is None and {"b", "b/in"} <= watched(changes) and "a" not in watched(changes)
    monkeypatch.undo()
    loop.add_reader(fd, tree._readable)
    await changes.settle()
    assert changes.end("r1").note is None
    files = await run(changes, "r2", lambda: (root / "b" / "in" / "f.txt").write_text("x"))
    assert files == [{"path": "b/in/f.txt", "change": "created"}]


async def test_a_move_out_with_nothing_after_it_is_taken_for_one_in_a_moment(
    changes: FileChanges, tmp_path: Path
) -> None:
    root = changes.root
    tree = changes._built.observer  # type: ignore[union-attr]
    (root / "leaving").mkdir()
    await run(changes, "made", lambda: None)
    (root / "leaving").rename(tmp_path / "left")
    deadline = time.monotonic() + WAIT
    while tree._moved_from is None:  # read alone, it waits for a partner
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    assert "leaving" in watched(changes)
    while tree._moved_from is not None:  # none comes: a move out (MOVE_WAIT)
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    assert watched(changes) == {"."}


async def test_a_burst_is_read_a_slice_at_a_time_and_whole(changes: FileChanges) -> None:
    root = changes.root
    before = changes.generation
    await changes.begin("r1")
    for i in range(3000):  # two events each: ~190 KB of them, read READ_BYTES at a time
        (root / f"file number {i}.txt").write_bytes(b"x")
    await changes.settle()
    touched = changes.end("r1")
    assert touched.note is not None and "2800 more files" in touched.note  # the list is bounded, not the count
    assert changes.changed_since(before) == {f"file number {i}.txt" for i in range(3000)}


async def test_a_directory_moved_onto_an_empty_one_is_followed(changes: FileChanges) -> None:
    """rename() may replace an empty directory: the one replaced still holds the path's watch until the kernel
    says it is gone, after the move."""
    root = changes.root
    (root / "a" / "in").mkdir(parents=True)
    (root / "b").mkdir()
    await run(changes, "made", lambda: None)
    await run(changes, "r1", lambda: os.rename(root / "a", root / "b"))
    assert {"b", "b/in"} <= watched(changes) and not {"a", "a/in"} & watched(changes)
    files = await run(changes, "r2", lambda: (root / "b" / "in" / "f.txt").write_text("x"))
    assert files == [{"path": "b/in/f.txt", "change": "created"}]


async def test_a_directory_made_again_while_the_old_one_is_still_open_is_watched(changes: FileChanges) -> None:
    """A directory removed while a process still holds it (its working directory, an open descriptor) keeps
    its watch until that process lets go; one made at the same path meanwhile is another directory."""
    root = changes.root
    (root / "out").mkdir()
    await run(changes, "made", lambda: None)
    held = os.open(root / "out", os.O_RDONLY)
    try:

        def again() -> None:
            (root / "out").rmdir()
            (root / "out").mkdir()

        await run(changes, "r1", again)
        files = await run(changes, "r2", lambda: (root / "out" / "f.txt").write_text("x"))
        assert files == [{"path": "out/f.txt", "change": "created"}]
    finally:
        os.close(held)


async def test_names_that_are_not_utf8_are_reported(changes: FileChanges) -> None:
    root = os.fsencode(changes.root)
    raw = b"caf\xe9 " + b"\xff.txt"  # Latin-1 bytes, as an old archive may hold them

    def make() -> None:
        os.mkdir(os.path.join(root, b"d\xe9"))
        with open(os.path.join(root, b"d\xe9", raw), "wb") as handle:
            handle.write(b"x")

    files = await run(changes, "r1", make)
    assert files == [{"path": os.fsdecode(b"d\xe9/" + raw), "change": "created"}]
    files = await run(changes, "r2", lambda: os.rename(os.path.join(root, b"d\xe9"), os.path.join(root, b"e")))
    assert [f["path"] for f in files] == [os.fsdecode(b"d\xe9/" + raw), os.fsdecode(b"e/" + raw)]
