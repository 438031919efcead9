"""The paths macOS and Windows take, run here on Linux: process death seen by pidfd, kqueue or bounded
polling; kernels over TCP with the connection file's key; files a run touched through watchdog (inotify with
its barrier, the probe barrier FSEvents and Windows use, the polling observer) with the system's own inotify
limits hit for real in a user namespace; a shell kernel without bash; `~` in kernel.python.
INTERPRETER_LSP_PORTABLE=1 forces all of them at once (scripts/test.d/25-portable.sh runs the end-to-end
tests of kernels and runs again with it)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from fakes import TextSink
from harness import start_session, stop_session
from interpreter_lsp import files as files_module
from interpreter_lsp.files import PROBE_PREFIX, FileChanges
from interpreter_lsp.kernels import process_watch
from interpreter_lsp.kernels.kernel import Kernel
from interpreter_lsp.kernels.process_watch import ProcessWatch
from interpreter_lsp.kernels.specs import UnknownLanguage, choose_kernel
from interpreter_lsp.portable import PORTABLE_ENV

WAIT = 30.0

# ---- process death -----------------------------------------------------------------------------------------


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdin=subprocess.DEVNULL)


async def _exit_seen(mode: process_watch.Mode | None) -> tuple[ProcessWatch, float]:
    process = _sleeper()
    exited = asyncio.Event()
    calls: list[int] = []

    def on_exit() -> None:
        calls.append(1)
        exited.set()

    watch = ProcessWatch(process, on_exit, mode)
    try:
        await asyncio.sleep(0)
        assert not exited.is_set()
        started = time.monotonic()
        process.kill()
        await asyncio.wait_for(exited.wait(), WAIT)
        latency = time.monotonic() - started
    finally:
        watch.close()
        process.kill()
        process.wait()
    assert calls == [1]
    return watch, latency


@pytest.mark.parametrize("mode", ["pidfd", "kqueue", "poll"])
async def test_process_exit_is_seen(mode: process_watch.Mode) -> None:
    if mode not in process_watch.available_modes():
        pytest.skip(f"{mode} is not offered by this OS ({sys.platform})")
    watch, latency = await _exit_seen(mode)
    assert watch.mode == mode
    if mode == "poll":
        # Bounded: a few periods at most, even on a busy machine.
        assert latency < process_watch.POLL_INTERVAL * 20, latency


async def test_without_pidfd_or_kqueue_the_process_is_polled(monkeypatch: pytest.MonkeyPatch) -> None:
    # What macOS without kqueue access and Windows have: neither call exists.
    monkeypatch.delattr(os, "pidfd_open", raising=False)
    monkeypatch.delattr("select.kqueue", raising=False)
    assert process_watch.available_modes() == ["poll"]
    watch, _latency = await _exit_seen(None)
    assert watch.mode == "poll"


async def test_the_portable_switch_forces_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PORTABLE_ENV, "1")
    watch, _latency = await _exit_seen(None)
    assert watch.mode == "poll"


def _gone() -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process


async def test_a_process_already_gone_is_reported_once() -> None:
    process = _gone()
    exited = asyncio.Event()
    calls: list[int] = []
    watch = ProcessWatch(process, lambda: (calls.append(1), exited.set()))
    await asyncio.wait_for(exited.wait(), WAIT)
    watch.close()
    assert calls == [1]


# ---- kernels over TCP ------------------------------------------------------------------------------------


@pytest.fixture
async def tcp_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Kernel, list[str]]]:
    monkeypatch.setenv(PORTABLE_ENV, "1")
    root, runtime, specs = tmp_path / "ws", tmp_path / "rt", tmp_path / "specs"
    for d in (root, runtime, specs):
        d.mkdir()
    runtime.chmod(0o700)
    deaths: list[str] = []

    async def on_death(kernel: Kernel) -> None:
        deaths.append(kernel.language)

    kernel = Kernel(
        choose_kernel("python", root, specs),
        cwd=root,
        runtime_dir=runtime,
        env=dict(os.environ),
        on_state=lambda state, message: None,
        on_death=on_death,
    )
    await kernel.start()
    try:
        yield kernel, deaths
    finally:
        await kernel.shutdown()


def _connection_file(kernel: Kernel) -> tuple[dict[str, Any], int]:
    path = Path(kernel._km.connection_file)
    return json.loads(path.read_text()), path.stat().st_mode


async def test_tcp_kernel_uses_loopback_and_a_signing_key(tcp_kernel: tuple[Kernel, list[str]]) -> None:
    kernel, _deaths = tcp_kernel
    assert kernel.transport == "tcp"
    info, mode = _connection_file(kernel)
    assert info["transport"] == "tcp" and info["ip"] == "127.0.0.1"
    assert len(info["key"]) >= 32 and info["signature_scheme"] == "hmac-sha256"
    assert mode & 0o077 == 0  # only we can read the key
    sink = TextSink()
    reply = await kernel.execute("print(6 * 7)", sink)
    assert reply.status == "ok" and sink.text == "42\n"


async def test_tcp_kernel_ignores_a_client_without_the_key(tcp_kernel: tuple[Kernel, list[str]]) -> None:
    """A local process that can reach the ports but lacks the connection file's key gets nothing done."""
    import queue

    from jupyter_client import BlockingKernelClient

    kernel, _deaths = tcp_kernel
    info, _mode = _connection_file(kernel)

    def ask(key: bytes) -> bool:
        client = BlockingKernelClient()
        client.load_connection_info({**info, "key": key.decode()})
        client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        try:
            client.kernel_info()
            client.get_shell_msg(timeout=5)
            return True
        except queue.Empty:
            return False
        finally:
            client.stop_channels()

    assert await asyncio.to_thread(ask, info["key"].encode())
    assert not await asyncio.to_thread(ask, b"not-the-key")


async def test_tcp_kernel_death_is_seen_by_polling(tcp_kernel: tuple[Kernel, list[str]]) -> None:
    kernel, deaths = tcp_kernel
    assert kernel._process_watch is not None and kernel._process_watch.mode == "poll"
    running = kernel.submit("import time; time.sleep(600)", TextSink())
    pid = kernel.pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    reply = await asyncio.wait_for(running, WAIT)
    assert reply.status == "died"
    # The pool hears of the death in a task of its own, started with the run's reply.
    assert kernel._death_task is not None
    await asyncio.wait_for(kernel._death_task, WAIT)
    assert deaths == ["python"]


# ---- files a run touched -----------------------------------------------------------------------------------

BACKENDS = {
    "native": {"polling": False},  # inotify here; FSEvents and ReadDirectoryChangesW deliver in order too
    "polling": {"polling": True},  # the portable observer
}


@pytest.fixture(params=list(BACKENDS))
async def changes(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[FileChanges]:
    root = tmp_path / "work space"
    root.mkdir()
    watcher = FileChanges(root, **BACKENDS[request.param])
    try:
        yield watcher
    finally:
        watcher.close()


async def test_attribution_per_run_with_skip_lists(changes: FileChanges) -> None:
    root = changes.root
    (root / "old.txt").write_text("old")
    (root / "gone.txt").write_text("bye")
    (root / "sub").mkdir()
    (root / "sub" / "a.py").write_text("a")
    for skipped in (".git", ".venv", "node_modules", "build", "dist", "__pycache__"):
        (root / skipped).mkdir()
    await changes.begin("r1")
    assert changes.kind == ("polling" if changes._polling else "inotify")
    (root / "out" / "deep").mkdir(parents=True)
    (root / "out" / "deep" / "new.csv").write_text("a,b")
    (root / "old.txt").write_text("new")
    (root / "gone.txt").unlink()
    (root / "sub" / "a.py").rename(root / "sub" / "b.py")
    (root / "tmp.txt").write_text("x")
    (root / "tmp.txt").unlink()  # created and deleted within the run: not reported
    for skipped in (".git", ".venv", "node_modules", "build", "dist", "__pycache__"):
        (root / skipped / "ignored.txt").write_text("x")
    (root / "src" / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "src" / "pkg" / "__pycache__" / "m.pyc").write_bytes(b"x")
    await changes.settle()
    touched = changes.end("r1")
    assert touched.files == [
        {"path": "gone.txt", "change": "deleted"},
        {"path": "old.txt", "change": "modified"},
        {"path": "out/deep/new.csv", "change": "created"},
        {"path": "sub/a.py", "change": "deleted"},
        {"path": "sub/b.py", "change": "created"},
    ]
    assert touched.note is None
    # A run that touches nothing reports nothing, and no barrier file is left behind.
    await changes.begin("r2")
    await changes.settle()
    assert changes.end("r2").files == []
    assert not [p for p in root.iterdir() if p.name.startswith(PROBE_PREFIX)]


async def test_a_reused_inode_is_not_taken_for_a_move(changes: FileChanges) -> None:
    """A freed inode is handed out again at once (ext4, tmpfs): watchdog's polling diff, which pairs a path
    gone with a path come by inode, took a deleted file and a directory made in the same poll for a move of
    the file onto the directory, and reported the directory as a created file (CI, under load)."""
    root = changes.root
    (root / "gone.txt").write_text("bye")
    (root / "kept.csv").write_text("v1")
    await changes.begin("r1")
    inode = (root / "gone.txt").stat().st_ino
    (root / "gone.txt").unlink()
    (root / "made").mkdir()  # most likely gets gone.txt's inode
    reused = (root / "made").stat().st_ino == inode
    # An editor's or a library's safe save: a new file renamed over the old one, whose inode a new file takes.
    old_inode = (root / "kept.csv").stat().st_ino
    (root / "kept.csv.tmp").write_text("v2")
    os.replace(root / "kept.csv.tmp", root / "kept.csv")
    (root / "new.csv").write_text("n")
    reused_again = (root / "new.csv").stat().st_ino == old_inode
    await changes.settle()
    # A poll sees kept.csv there before and after: modified. inotify sees a rename onto it: created (the run
    # manager names it modified from the run's pre-image snapshot: test_runs).
    kept = "modified" if changes.kind == "polling" else "created"
    assert changes.end("r1").files == [
        {"path": "gone.txt", "change": "deleted"},
        {"path": "kept.csv", "change": kept},
        {"path": "new.csv", "change": "created"},
    ], f"inodes reused: {reused}, {reused_again}"


async def test_overlapping_runs_each_see_what_happened_while_they_ran(changes: FileChanges) -> None:
    root = changes.root
    await changes.begin("r1")
    (root / "a.txt").write_text("a")
    await changes.settle()
    await changes.begin("r2")
    (root / "b.txt").write_text("b")
    await changes.settle()
    assert [f["path"] for f in changes.end("r1").files] == ["a.txt", "b.txt"]
    (root / "c.txt").write_text("c")
    await changes.settle()
    assert [f["path"] for f in changes.end("r2").files] == ["b.txt", "c.txt"]


async def test_what_changed_just_before_a_run_is_not_its_doing(changes: FileChanges) -> None:
    """The user saves a file and runs at once: the save's event is still on its way when the run starts."""
    root = changes.root
    await changes.begin("r0")  # the observer is running from here on
    await changes.settle()
    changes.end("r0")
    for i in range(20):
        (root / f"saved{i}.txt").write_text("by the user")
    await changes.begin("r1")
    (root / "mine.txt").write_text("by the run")
    await changes.settle()
    files = [f["path"] for f in changes.end("r1").files]
    assert "mine.txt" in files
    if changes.kind != "polling":
        # In order: exact. A poll's changes come as a set: one in the same poll as the start counts for the run.
        assert files == ["mine.txt"]


async def test_the_list_is_bounded_and_says_so(changes: FileChanges, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files_module, "MAX_REPORTED", 5)
    await changes.begin("r1")
    for i in range(8):
        (changes.root / f"f{i}.txt").write_text("x")
    await changes.settle()
    touched = changes.end("r1")
    assert [f["path"] for f in touched.files] == [f"f{i}.txt" for i in range(5)]
    assert touched.note is not None and "3 more files" in touched.note


def _inotify_watches() -> int:
    """Watches this process holds, as the kernel counts them (/proc/self/fdinfo)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify":
                count += Path(f"/proc/self/fdinfo/{fd}").read_text().count("inotify wd:")
        except OSError:
            continue
    return count


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
async def test_no_inotify_watch_inside_skipped_directories(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    for i in range(3):
        (root / "src" / f"pkg{i}").mkdir(parents=True)
    for heavy in (".venv/lib/site-packages", "node_modules/a/b", ".git/objects"):
        for i in range(30):
            (root / heavy / f"d{i}").mkdir(parents=True)
    before = _inotify_watches()
    watcher = FileChanges(root, polling=False)
    try:
        await watcher.begin("r1")
        assert watcher.kind == "inotify"
        # root, src, src/pkg0..2: nothing below .venv, node_modules or .git.
        assert _inotify_watches() - before == 5
    finally:
        watcher.close()
    watcher.end("r1")


# The system's own limits, hit for real: a user namespace has limits of its own (/proc/sys/user).
_LIMITED = textwrap.dedent(
    """
    import asyncio, logging, sys
    from pathlib import Path
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    Path("/proc/sys/user/max_inotify_watches").write_text(sys.argv[2])
    Path("/proc/sys/user/max_inotify_instances").write_text(sys.argv[3])
    from interpreter_lsp.files import FileChanges

    async def main():
        root = Path(sys.argv[1])
        watcher = FileChanges(root, polling=False)
        await watcher.begin("r1")
        (root / "a" / "new.txt").write_text("x")
        (root / "z" / "new.txt").write_text("x")
        await watcher.settle()
        touched = watcher.end("r1")
        print("KIND", watcher.kind)
        print("FILES", sorted(f["path"] for f in touched.files))
        watcher.close()

    asyncio.run(main())
    """
)


def _run_limited(root: Path, watches: int, instances: int) -> subprocess.CompletedProcess[str]:
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-Ur", "true"], capture_output=True).returncode:
        pytest.skip("unshare -Ur (user namespaces) is not available here")
    for name in ("a", "b", "c", "z"):
        (root / name).mkdir(parents=True)
    server = str(Path(files_module.__file__).parents[1])
    return subprocess.run(
        ["unshare", "-Ur", sys.executable, "-c", _LIMITED, str(root), str(watches), str(instances)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": server},
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_inotify_watch_limit_is_said_plainly_and_watching_goes_on(tmp_path: Path) -> None:
    result = _run_limited(tmp_path / "ws", watches=3, instances=8)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "KIND inotify" in result.stdout
    assert "inotify watch limit is reached" in result.stderr and "max_user_watches" in result.stderr
    assert "Traceback" not in result.stderr
    # Three watches: the root and two of its four directories; what is watched is still reported.
    files = json.loads(result.stdout.split("FILES ", 1)[1].strip().replace("'", '"'))
    assert 1 <= len(files) <= 2 and set(files) <= {"a/new.txt", "z/new.txt"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_no_inotify_instance_left_falls_back_to_polling(tmp_path: Path) -> None:
    result = _run_limited(tmp_path / "ws", watches=100, instances=0)
    assert result.returncode == 0, result.stderr
    assert "KIND polling" in result.stdout
    assert "polling every" in result.stderr and "max_user_instances" in result.stderr
    assert "Traceback" not in result.stderr
    assert "FILES ['a/new.txt', 'z/new.txt']" in result.stdout


async def test_a_file_system_without_links_has_file_barriers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On Linux a run's barriers are links (two inotify events, not three); a workspace on a file system
    without links (FAT, exFAT, some network mounts) refuses them: barriers are files there, found once, and
    the run's files are listed in full, never "may be incomplete"."""
    import errno

    refused: list[str] = []

    def no_links(_target: str, link: Any, *_args: Any, **_kwargs: Any) -> None:
        refused.append(str(link))
        raise OSError(errno.EPERM, "Operation not permitted", str(link))

    monkeypatch.setattr(files_module.os, "symlink", no_links)
    watcher = FileChanges(tmp_path, polling=False)
    try:
        for run in ("r1", "r2"):
            await watcher.begin(run)
            assert watcher.kind == "inotify"
            (tmp_path / f"{run}.txt").write_text("x")
            await watcher.settle()
            assert watcher.end(run) == files_module.Touched([{"path": f"{run}.txt", "change": "created"}], None)
        assert len(refused) == 1 and watcher.sees_everything  # tried once, then files
        assert not [p for p in os.listdir(tmp_path) if p.startswith(PROBE_PREFIX)]
    finally:
        watcher.close()


async def test_the_portable_switch_forces_the_polling_observer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PORTABLE_ENV, "1")
    watcher = FileChanges(tmp_path)
    try:
        await watcher.begin("r1")
        assert watcher.kind == "polling"
        (tmp_path / "x.txt").write_text("x")
        await watcher.settle()
        assert watcher.end("r1").files == [{"path": "x.txt", "change": "created"}]
    finally:
        watcher.close()


# ---- the shell kernel without bash; kernel.python with ~ ---------------------------------------------------


def test_shell_without_bash_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UnknownLanguage) as info:
        choose_kernel("shell", tmp_path, tmp_path / "specs")
    assert "needs bash, which is not on PATH" in str(info.value)
    assert "install bash" in str(info.value)


async def test_shell_without_bash_end_to_end(workspace_root: Path, home: Path, tmp_path: Path) -> None:
    """The user's editor gets the sentence, not a traceback; python still runs."""
    empty = tmp_path / "no-bash"
    empty.mkdir()
    session = await start_session(workspace_root, home, env={"PATH": str(empty)})
    try:
        with pytest.raises(JsonRpcException) as info:
            await session.run("echo hi", "shell")
        message = str(info.value)
        assert "The shell kernel needs bash, which is not on PATH" in message
        assert "Traceback" not in message
        run_id, status = await session.run_and_wait("print('python is fine')")
        assert status["state"] == "ok" and session.text(run_id) == "python is fine\n"
    finally:
        await stop_session(session)


def test_kernel_python_expands_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    python = home / "venvs" / "data" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    monkeypatch.setenv("HOME", str(home))
    root = tmp_path / "ws"
    root.mkdir()
    choice = choose_kernel("python", root, tmp_path / "specs", "~/venvs/data/bin/python")
    assert choice.interpreter == str(python)
    spec = json.loads((tmp_path / "specs" / choice.name / "kernel.json").read_text())
    assert spec["argv"][0] == str(python)
