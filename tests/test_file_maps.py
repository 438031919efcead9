"""file_maps.py: which workspace files a kernel's processes map writable and shared, read from /proc as the
server reads them after a run, with a real process holding real maps."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from interpreter_lsp import file_maps

pytestmark = pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="Linux /proc only")

HOLDER = textwrap.dedent(
    """
    import mmap, os, sys
    maps = []
    def shared(path, access=mmap.ACCESS_WRITE):
        f = open(path, "r+b")
        maps.append(mmap.mmap(f.fileno(), 0, access=access))
        f.close()  # the map keeps its own descriptor, as numpy.memmap's does
    root, outside = sys.argv[1], sys.argv[2]
    shared(os.path.join(root, "data dir", "table.bin"))  # a space in the path
    shared(os.path.join(root, ".venv", "cache.bin"))  # a directory the tracker skips
    shared(os.path.join(outside, "elsewhere.bin"))  # outside the workspace
    shared(os.path.join(root, "read.bin"), mmap.ACCESS_READ)  # shared, not writable
    shared(os.path.join(root, "private.bin"), mmap.ACCESS_COPY)  # writable, not shared: the file never changes
    shared(os.path.join(root, "gone.bin"))
    os.remove(os.path.join(root, "gone.bin"))  # mapped still, but no longer in the workspace
    shared(os.path.join(root, "named (deleted)"))  # a file really named so: found
    if os.fork() == 0:  # a fork running the same program (as a variables snapshot is): its maps are the same
        sys.stdin.read()
        os._exit(0)
    print("ready", flush=True)
    sys.stdin.read()
    """
)


def _end(process: subprocess.Popen[bytes]) -> None:
    """Its stdin closed first: the children reading it (a fork, a grandchild) end too."""
    assert process.stdin is not None and process.stdout is not None
    process.stdin.close()
    process.wait(timeout=60)
    process.stdout.close()


@pytest.fixture(params=["queried", "read"])
def how(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of finding the maps: asked of the kernel (PROCMAP_QUERY, Linux 6.11+), and read from
    /proc/<pid>/maps (older kernels; forced here)."""
    if request.param == "read":
        monkeypatch.setattr(file_maps, "query_maps", False)
    elif not file_maps.query_maps or not _kernel_answers_queries():
        pytest.skip("this kernel has no PROCMAP_QUERY (Linux 6.11+)")
    return str(request.param)


def _kernel_answers_queries() -> bool:
    fd = os.open("/proc/self/maps", os.O_RDONLY)
    try:
        file_maps._queried(fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def test_only_shared_writable_maps_of_workspace_files_are_found(tmp_path: Path, how: str) -> None:
    root, outside = tmp_path / "work space", tmp_path / "outside"
    for path in (root / "data dir" / "table.bin", root / ".venv" / "cache.bin", outside / "elsewhere.bin",
                 root / "read.bin", root / "private.bin", root / "gone.bin", root / "named (deleted)"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\0" * 4096)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root), str(outside)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"ready\n"
        assert file_maps.mapped([holder.pid], root) == {"data dir/table.bin", "named (deleted)"}
        assert file_maps.query_maps is (how == "queried")  # the way asked for is the way taken
        # The tree is walked from the kernel's launcher down: a parent's pid finds its child's maps.
        shell = subprocess.Popen(["sleep", "60"])
        try:
            assert file_maps.mapped([shell.pid], root) == set()  # a process that maps nothing
        finally:
            shell.kill()
            shell.wait()
    finally:
        _end(holder)
    assert file_maps.mapped([holder.pid], root) == set()  # gone: nothing, no error


def _a_launcher_whose_child_maps(tmp_path: Path) -> tuple[Path, subprocess.Popen[bytes]]:
    """A workspace with m.bin, and a process (the kernel's launcher, as the pool knows it) whose child maps
    m.bin writable and shared; once the child is ready."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "m.bin").write_bytes(b"\0" * 4096)
    code = (
        "import mmap, sys; f = open(sys.argv[1], 'r+b'); m = mmap.mmap(f.fileno(), 0); "
        "print('ready', flush=True); sys.stdin.read()"
    )
    launcher = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {code!r}, sys.argv[1]])",
         str(root / "m.bin")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    assert launcher.stdout is not None and launcher.stdout.readline() == b"ready\n"
    return root, launcher


def test_a_launcher_s_tree_is_read_below_it(tmp_path: Path, how: str) -> None:
    """The pool knows the launcher's pid, not the kernel's: the maps of its descendants are read."""
    root, launcher = _a_launcher_whose_child_maps(tmp_path)
    try:
        assert file_maps.mapped([launcher.pid], root) == {"m.bin"}
    finally:
        _end(launcher)


def test_a_small_tree_is_asked_quickly_and_a_large_one_left_to_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """undo.py asks on the event loop only where that is quick: the kernel answers PROCMAP_QUERY and the trees
    hold at most QUICK_PROCESSES processes. Then it finds what `mapped` finds; else it answers None (asked in
    a thread instead), never a partial list."""
    if not file_maps.query_maps or not _kernel_answers_queries():
        pytest.skip("this kernel has no PROCMAP_QUERY (Linux 6.11+)")
    root, launcher = _a_launcher_whose_child_maps(tmp_path)
    try:
        assert file_maps.mapped_quickly([launcher.pid], root) == {"m.bin"} == file_maps.mapped([launcher.pid], root)
        monkeypatch.setattr(file_maps, "QUICK_PROCESSES", 1)  # the launcher alone fits; its child does not
        assert file_maps.mapped_quickly([launcher.pid], root) is None
        monkeypatch.setattr(file_maps, "QUICK_PROCESSES", 12)
        monkeypatch.setattr(file_maps, "query_maps", False)  # a kernel before 6.11: its maps are read in a thread
        assert file_maps.mapped_quickly([launcher.pid], root) is None
    finally:
        _end(launcher)


async def test_the_maps_read_as_a_run_ends_serve_its_warm_up_and_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workspace reads the kernels' maps once a run's final status has left and before the kernel forks
    for its variables' snapshot (FileUndo.look_at_maps: a fork holds the lock a read of the kernel's maps
    takes). The warm-up after the run and a run sent right behind use that read: one read a run, not three."""
    if not file_maps.query_maps or not _kernel_answers_queries():
        pytest.skip("this kernel has no PROCMAP_QUERY (Linux 6.11+)")
    from interpreter_lsp.preimages import PreimageStore
    from interpreter_lsp.undo import FileUndo

    root, launcher = _a_launcher_whose_child_maps(tmp_path)
    reads: list[set[str] | None] = []
    quickly = file_maps.mapped_quickly

    def counted(pids: list[int], where: Path) -> set[str] | None:
        reads.append(found := quickly(pids, where))
        return found

    monkeypatch.setattr(file_maps, "mapped_quickly", counted)
    monkeypatch.setattr(file_maps, "mapped", lambda *_: pytest.fail("read again in a thread"))
    try:
        undo = FileUndo(root, PreimageStore(root, tmp_path / "store"), kernel_pids=lambda: [launcher.pid])
        await undo.before_run("r1")
        assert reads == []  # no run has ended yet: nothing to look for
        undo.run_finished("r1", [], None)
        undo.look_at_maps()  # as Workspace._after_code does, right after the final status
        assert reads == [{"m.bin"}]
        await undo.before_run("r2")  # sent right behind: the warm-up is under way
        await undo.settled()
        assert reads == [{"m.bin"}]
        undo.run_finished("r2", [], None)
        undo.look_at_maps()
        assert reads == [{"m.bin"}, {"m.bin"}]  # each run's end is read anew
    finally:
        _end(launcher)
