"""The pre-image store (preimages.py) and the undo plan (undo.py), without kernels: the size bound and its
message, freeing what no run needs, and a file changed through a link never followed out."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from interpreter_lsp.preimages import PreimageStore, store_dir
from interpreter_lsp.undo import FileUndo


def test_the_store_is_outside_the_workspace_and_private(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = tmp_path / "my ws"
    root.mkdir()
    (root / "a.txt").write_text("a")
    store = PreimageStore(root)
    assert root not in store.directory.parents and store.directory == store_dir(root)
    store.snapshot()
    assert oct(store.directory.stat().st_mode & 0o777) == "0o700"
    assert [p.name for p in root.iterdir()] == ["a.txt"]  # nothing of ours in the workspace


def test_past_the_limit_a_file_is_named_with_the_reason(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "small.txt").write_bytes(b"s" * 100)
    (root / "big.bin").write_bytes(b"b" * 5000)
    store = PreimageStore(root, tmp_path / "store", limit=1000)
    undo = FileUndo(root, store)
    asyncio.run(undo.before_run("r-1"))
    assert store.used == 100  # small.txt only
    (root / "big.bin").write_bytes(b"changed")
    (root / "small.txt").write_bytes(b"changed")
    undo.run_finished("r-1", [{"path": "big.bin", "change": "modified"}, {"path": "small.txt", "change": "modified"}],
                      None)
    plan = undo.plan([{"type": "run", "runId": "r-1"}], remote=False, force=False)
    assert list(plan.write) == ["small.txt"]
    assert any(item["name"] == "big.bin" and "store is full" in item["why"] for item in plan.lost)


def test_blobs_no_run_needs_are_freed(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    store = PreimageStore(root, tmp_path / "store")
    for version in range(5):
        (root / "f.txt").write_bytes(str(version).encode() * 100)
        store.snapshot()
    assert store.used == 500 and len(os.listdir(store.blobs)) == 5
    store.collect(needed=set())
    assert store.used == 100 and len(os.listdir(store.blobs)) == 1  # the current content stays


def test_removing_a_created_file_never_follows_a_link_out(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    victim = tmp_path / "outside.txt"
    victim.write_text("keep me")

    async def scenario() -> tuple[list[str], list[str], list[dict[str, str]]]:
        undo = FileUndo(root, PreimageStore(root, tmp_path / "store"))
        await undo.before_run("r-1")
        os.symlink(victim, root / "link.txt")  # the run made a link to a file outside
        undo.run_finished("r-1", [{"path": "link.txt", "change": "created"}], None)
        plan = undo.plan([{"type": "run", "runId": "r-1"}], remote=False, force=False)
        if undo._warming is not None:
            await undo._warming  # the copy run_finished starts for the next run
        return await undo.apply(plan)

    _restored, removed, failed = asyncio.run(scenario())
    assert removed == ["link.txt"] and not failed
    assert not os.path.lexists(root / "link.txt")
    assert victim.read_text() == "keep me"


def test_a_turn_of_several_runs_goes_back_to_before_its_first(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_bytes(b"v0")

    async def scenario() -> dict[str, bytes]:
        undo = FileUndo(root, PreimageStore(root, tmp_path / "store"))
        await undo.before_run("r-1")
        (root / "a.txt").write_bytes(b"v1")
        (root / "new.txt").write_bytes(b"made by r-1")
        undo.run_finished("r-1", [{"path": "a.txt", "change": "modified"}, {"path": "new.txt", "change": "created"}],
                          None)
        await undo.before_run("r-2")
        (root / "a.txt").write_bytes(b"v2")
        (root / "new.txt").write_bytes(b"changed by r-2")
        undo.run_finished("r-2", [{"path": "a.txt", "change": "modified"}, {"path": "new.txt", "change": "modified"}],
                          None)
        plan = undo.plan([{"type": "run", "runId": "r-1"}, {"type": "run", "runId": "r-2"}], remote=False, force=False)
        assert not plan.changed_since
        await undo.apply(plan)
        if undo._warming is not None:
            await undo._warming
        return {p.name: p.read_bytes() for p in root.iterdir()}

    assert asyncio.run(scenario()) == {"a.txt": b"v0"}


def test_a_file_written_again_within_a_clock_tick_is_read_again(tmp_path: Path, monkeypatch) -> None:
    """File times are coarse: a rewrite of the same size right after a walk can keep every time the walk
    saw (simulated here: mtime put back, ctime not compared). Its new content must still be the next
    pre-image."""
    from interpreter_lsp import preimages

    monkeypatch.setattr(
        preimages, "signature", lambda st: (st.st_mtime_ns, 0, st.st_size, st.st_ino, st.st_mode)
    )
    root = tmp_path / "ws"
    root.mkdir()
    target = root / "a.txt"
    target.write_bytes(b"v1")
    store = PreimageStore(root, tmp_path / "store")
    store.snapshot()
    st = os.stat(target)
    with open(target, "r+b") as f:  # same inode, same size
        f.write(b"v2")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    snapshot = store.snapshot()
    assert store.content(snapshot.files["a.txt"][1] or "") == b"v2"


async def test_a_snapshot_after_a_few_changes_looks_at_those_not_at_the_whole_workspace(tmp_path: Path) -> None:
    """With inotify seeing everything, the next run's pre-images come from the last snapshot and the files the
    tracker saw change (what the user just saved), not from a walk of the workspace: the same snapshot a walk
    makes, in O(changes). A directory made or removed, or a missed event, has the workspace walked again."""
    from interpreter_lsp.files import FileChanges

    root = tmp_path / "ws"
    for i in range(20):
        (root / f"pkg{i}").mkdir(parents=True)
        for j in range(50):
            (root / f"pkg{i}" / f"m{j}.py").write_text(f"x = {j}\n")
    changes = FileChanges(root, polling=False)
    store = PreimageStore(root, tmp_path / "store")
    undo = FileUndo(root, store, changes)
    walks = 0
    walk = store._walk

    def counted(*args):
        nonlocal walks
        walks += 1
        return walk(*args)

    store._walk = counted  # type: ignore[method-assign]
    try:
        await changes.begin("r0")  # starts the tracker
        changes.end("r0")
        assert changes.kind == "inotify"
        await undo.before_run("r1")
        assert walks == 1  # the session's first snapshot walks
        (root / "pkg3" / "m7.py").write_text("x = 'the user saved this'\n")
        (root / "pkg4" / "m1.py").unlink()
        (root / "pkg5" / "new.py").write_text("y = 1\n")
        await undo.before_run("r2")
        assert walks == 1, "a walk for three changed files"
        snapshot = undo._runs["r2"].before
        walked = store.snapshot()  # what a walk finds now
        assert snapshot.files == walked.files and snapshot.dirs == walked.dirs
        assert store.content(snapshot.files["pkg3/m7.py"][1] or "") == b"x = 'the user saved this'\n"
        assert "pkg4/m1.py" not in snapshot.files and "pkg5/new.py" in snapshot.files
        walks = 0
        (root / "empty").mkdir()  # no file says it is there: walked again
        await undo.before_run("r3")
        assert walks == 1 and "empty" in (undo._runs["r3"].before.dirs or ())
    finally:
        changes.close()


async def test_a_run_in_an_unchanged_workspace_finds_its_pre_images_in_its_own_step(tmp_path: Path) -> None:
    """The common run: nothing changed since the last snapshot. The tracker proves it at once (a barrier's
    event is queued by the system call that sends it, and read right there), so the run's pre-images are found
    without a wait: `before_run` ends at its first step, and the run's request goes to the kernel before the
    loop does anything else. A file another process wrote just before a run is never taken for unchanged."""
    from interpreter_lsp.files import FileChanges
    from interpreter_lsp.preimages import RACY_NS

    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("as it was\n")
    changes = FileChanges(root, polling=False)
    store = PreimageStore(root, tmp_path / "store")
    undo = FileUndo(root, store, changes)
    try:
        await changes.begin("r0")  # starts the tracker
        changes.end("r0")
        assert changes.kind == "inotify"
        # Past the clock tick of a.txt's write: a file written this close before a walk is read again.
        written = os.stat(root / "a.txt").st_ctime_ns
        await asyncio.sleep(max(0, written + RACY_NS - time.time_ns()) / 1e9 + 0.01)
        await undo.before_run("r1")  # the session's first snapshot: a walk
        step = undo.before_run("r2")
        with pytest.raises(StopIteration):
            step.send(None)  # done in one step: no task, no wait
        assert undo._runs["r2"].before.files == undo._runs["r1"].before.files
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "open('a.txt', 'w').write('another process wrote this')", cwd=root
        )
        assert await process.wait() == 0
        await undo.before_run("r3")
        entry = undo._runs["r3"].before.files["a.txt"]
        assert store.content(entry[1] or "") == b"another process wrote this"
    finally:
        changes.close()


def test_a_directory_swapped_for_a_link_never_has_a_file_outside_copied_as_a_pre_image(tmp_path: Path) -> None:
    """Attack: kernel code swaps a workspace directory for a link to a private folder outside, between the
    moment the server learned a file there changed (the tracker's event, or the walk's listing) and its copy.
    The copy opens each directory without following links: it fails and is named; the secret is not stored
    (an undo would otherwise write it back into the workspace, where sandboxed code could read it)."""
    root, outside = tmp_path / "ws", tmp_path / "private"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "sub" / "x").write_text("workspace\n")
    (outside / "x").write_text("SECRET\n")
    store = PreimageStore(root, tmp_path / "store")
    previous = store.snapshot()
    os.rename(root / "sub", root / "sub.old")
    os.symlink(outside, root / "sub")
    snapshot = store.update(previous, {"sub/x"})
    assert "sub/x" in snapshot.uncopied and snapshot.files["sub/x"][1] is None, snapshot
    stored = b"".join(p.read_bytes() for p in (tmp_path / "store" / "blobs").iterdir())
    assert b"SECRET" not in stored


def test_removing_and_writing_back_never_go_through_a_directory_swapped_for_a_link(tmp_path: Path) -> None:
    """What undo removes, the directories it removes and the files it writes back (with their mode) are
    reached from the workspace root one directory at a time without following links: kernel code that swaps
    a directory for a link to elsewhere (between undo's check and its act, as here for good) makes the step
    fail, never remove, empty or chmod a file elsewhere. The mode is set on the file before it takes its name."""
    from interpreter_lsp.safety.paths import remove_inside, rmdir_inside, write_inside

    root, outside = tmp_path / "ws", tmp_path / "home"
    root.mkdir()
    (outside / "empty").mkdir(parents=True)
    (outside / "victim.txt").write_text("precious\n")
    os.chmod(outside / "victim.txt", 0o600)
    os.symlink(outside, root / "sub")
    with pytest.raises(OSError):
        remove_inside(root, "sub/victim.txt")
    with pytest.raises(OSError):
        rmdir_inside(root, "sub/empty")
    with pytest.raises(Exception, match="outside the workspace"):
        write_inside(root, "sub/victim.txt", b"x", overwrite=True, mode=0o644)
    assert (outside / "victim.txt").read_text() == "precious\n" and (outside / "empty").is_dir()
    assert oct(os.stat(outside / "victim.txt").st_mode & 0o777) == "0o600"
    (root / "dir").mkdir()
    write_inside(root, "dir/private.txt", b"back\n", overwrite=True, mode=0o600)
    assert oct(os.stat(root / "dir" / "private.txt").st_mode & 0o777) == "0o600"
    remove_inside(root, "dir/private.txt")
    rmdir_inside(root, "dir")
    assert not (root / "dir").exists()
