"""Hostile kernel code, through the real server (real kernels, real bubblewrap): it cannot reach another
kernel, cannot loosen its sandbox or plant code that runs outside it later, leaves no process behind, and
meets its resource limits as a sentence the user can act on."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest

from harness import DEFAULT_WAIT, needs_bwrap, start_session, stop_session, wait_exited
from interpreter_lsp import protocol as p
from interpreter_lsp.kernels.launcher import Limits
from interpreter_lsp.kernels.sandbox import SandboxConfig, wrap_command

SANDBOX = {"sandbox": "bubblewrap"}


def _command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def _pids_with(argument: str) -> list[int]:
    """Host pids of the processes whose command line holds `argument` (a unique marker)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if argument in _command_line(int(entry)) and Path(f"/proc/{entry}/stat").read_text().split()[2] != "Z":
                    found.append(int(entry))
            except OSError:
                continue
    return found


async def _exited(pids: list[int], timeout: float = DEFAULT_WAIT) -> None:
    await wait_exited(pids, timeout, lambda pid: f"process {pid} {_command_line(pid)} still runs {timeout:g} s later")


async def _kernel(session, language: str) -> dict:
    status = await session.command(p.STATUS, {})
    return next(k for k in status["kernels"] if k["language"] == language)


# ---- 1. the sandbox cannot be loosened from inside ---------------------------------------------------------


@needs_bwrap
async def test_a_sandboxed_kernel_cannot_reach_another_kernel(workspace_root: Path, home: Path) -> None:
    """Even given the other kernel's key and socket paths (read here, on the host), the python kernel finds
    neither its connection file nor its sockets: it sees only its own runtime directory."""
    s = await start_session(workspace_root, home, configuration=SANDBOX, env={"HOME": str(home)})
    try:
        run_id, status = await s.run_and_wait("echo shell-is-up", "shell")
        assert status["state"] == "ok", s.text(run_id)
        shell = await _kernel(s, "shell")
        argv = _command_line(shell["pid"])
        connection_file = argv[argv.index("-f") + 1]
        info = json.loads(Path(connection_file).read_text())  # noqa: ASYNC240 (the host sees it)
        shell_socket = f"{info['ip']}-{info['shell_port']}"
        assert Path(shell_socket).exists()  # noqa: ASYNC240
        attack = textwrap.dedent(f"""
            import os, socket
            from ipykernel import get_connection_file
            own = get_connection_file()
            try:
                open({connection_file!r}).read()
                print("READ the other kernel's connection file")
            except OSError as error:
                print(type(error).__name__)
            client = socket.socket(socket.AF_UNIX)
            try:
                client.connect({shell_socket!r})
                print("CONNECTED to the other kernel")
            except OSError as error:
                print(type(error).__name__)
            print(sorted(os.listdir(os.path.dirname(os.path.dirname(own)))) == [os.path.basename(os.path.dirname(own))])
        """)
        run_id, status = await s.run_and_wait(attack)
        assert status["state"] == "ok", s.text(run_id)
        assert s.text(run_id).split() == ["FileNotFoundError", "FileNotFoundError", "True"]
        run_id, status = await s.run_and_wait("echo shell-still-mine", "shell")
        assert s.text(run_id).strip() == "shell-still-mine"
    finally:
        await stop_session(s)


@needs_bwrap
async def test_kernel_code_cannot_plant_code_or_rewrite_settings(workspace_root: Path, home: Path) -> None:
    site = workspace_root / ".venv" / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    (workspace_root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    subprocess.run(["git", "init", "-q", str(workspace_root)], check=True)  # noqa: ASYNC221
    git_config = (workspace_root / ".git" / "config").read_text()
    settings_file = workspace_root / ".interpreter-lsp.toml"
    settings_file.write_text("maxSteps = 7\n")
    user_config = home / "config" / "interpreter-lsp" / "config.toml"
    user_config.parent.mkdir(parents=True)
    user_config.write_text('sandbox = "bubblewrap"\n')
    s = await start_session(workspace_root, home, env={"HOME": str(home)})  # the sandbox from the user file
    try:
        attack = textwrap.dedent(f"""
            import json, os
            results = {{}}
            def attempt(name, action):
                try:
                    action()
                    results[name] = "DONE"
                except OSError as error:
                    results[name] = error.strerror
            def write(path, text, mode="w"):
                with open(path, mode) as handle:
                    handle.write(text)
            attempt("pth", lambda: write({str(site / "evil.pth")!r}, "import os; os.system('touch /tmp/pwned')"))
            attempt("hook", lambda: write(".git/hooks/pre-commit", "#!/bin/sh\\ntouch pwned\\n"))
            attempt("git-config", lambda: write(".git/config", "[core]\\n\\thooksPath = evil\\n", "a"))
            attempt("settings", lambda: write(".interpreter-lsp.toml", 'sandbox = "off"\\n'))
            attempt("move-git", lambda: os.rename(".git", ".git-aside"))
            attempt("move-venv", lambda: os.rename(".venv", ".venv-aside"))
            attempt("move-settings", lambda: os.rename(".interpreter-lsp.toml", "aside.toml"))
            attempt("user-config", lambda: write({str(user_config)!r}, 'sandbox = "off"\\n'))
            write("ordinary.txt", "kernel code may still write the workspace")
            print(json.dumps(results))
        """)
        run_id, status = await s.run_and_wait(attack)
        assert status["state"] == "ok", s.text(run_id)
        results = json.loads(s.text(run_id))
        refused = ("Read-only file system", "Device or resource busy")
        for name in ("pth", "hook", "git-config", "settings", "move-git", "move-venv", "move-settings"):
            assert results[name] in refused, (name, results)
        # The user's file is out of the sandbox's sight (in a hidden home): a write lands in a private tmpfs.
        assert results["user-config"] in ("DONE", *refused, "No such file or directory")
        assert user_config.read_text() == 'sandbox = "bubblewrap"\n'
        assert not (site / "evil.pth").exists()
        assert not (workspace_root / ".git" / "hooks" / "pre-commit").exists()
        assert (workspace_root / ".git" / "config").read_text() == git_config
        assert settings_file.read_text() == "maxSteps = 7\n"
        assert (workspace_root / "ordinary.txt").exists()
        kernel = await _kernel(s, "python")
        assert kernel["sandbox"] == "bubblewrap (no network)"
    finally:
        await stop_session(s)


# ---- 2. every process a kernel starts ends with it ----------------------------------------------------------

# The kernel waits until both sleeps run (exec'ed, visible in /proc), so the test can look for them once:
# nothing the test waits on would tell it when they appear.
DETACH = """
import os, subprocess, time
subprocess.Popen(["setsid", "sleep", "{marker}1"])
subprocess.run(["sh", "-c", "(setsid sleep {marker}2 &) ; exit 0"], check=True)

def running(argument):
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{{entry}}/cmdline", "rb") as f:
                if f.read() == b"sleep\\0" + argument.encode() + b"\\0":
                    return True
        except OSError:
            pass
    return False

deadline = time.monotonic() + 60
while not (running("{marker}1") and running("{marker}2")) and time.monotonic() < deadline:
    time.sleep(0.05)
print("detached")
"""


async def _detached(session, marker: str) -> list[int]:
    run_id, status = await session.run_and_wait(DETACH.format(marker=marker))
    assert status["state"] == "ok", session.text(run_id)
    pids = []
    for suffix in ("1", "2"):
        found = _pids_with(f"{marker}{suffix}")
        assert found, f"the detached sleep {marker}{suffix} is not running"
        pids += found
    return pids


@pytest.mark.parametrize("sandbox", [False, pytest.param(True, marks=needs_bwrap)], ids=["plain", "sandboxed"])
async def test_detached_processes_end_with_a_restart_and_a_shutdown(
    workspace_root: Path, home: Path, sandbox: bool
) -> None:
    s = await start_session(workspace_root, home, configuration=SANDBOX if sandbox else {}, env={"HOME": str(home)})
    try:
        marker = f"{1000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6:06d}"
        pids = await _detached(s, marker)
        await s.command(p.RESTART_KERNEL, {"language": "python"})
        await _exited(pids)
        run_id, status = await s.run_and_wait("print('after restart')")
        assert (status["state"], s.text(run_id).strip()) == ("ok", "after restart")
        marker = f"{1000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6:06d}"
        pids = await _detached(s, marker)
    finally:
        await stop_session(s)
    await _exited(pids)


async def test_detached_processes_end_when_the_server_is_killed(workspace_root: Path, home: Path) -> None:
    s = await start_session(workspace_root, home)
    marker = f"{1000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6:06d}"
    try:
        pids = await _detached(s, marker)
        server = s.client._server
        assert server is not None
        server.send_signal(signal.SIGKILL)
        await server.wait()
        await _exited(pids)
    finally:
        await s.client.stop()


# ---- 3. resource limits -------------------------------------------------------------------------------------


@pytest.mark.parametrize("sandbox", [False, pytest.param(True, marks=needs_bwrap)], ids=["plain", "sandboxed"])
async def test_memory_limit_is_said_and_the_next_run_works(workspace_root: Path, home: Path, sandbox: bool) -> None:
    configuration = {"kernel": {"memoryLimit": 512}, **(SANDBOX if sandbox else {})}
    s = await start_session(workspace_root, home, configuration=configuration, env={"HOME": str(home)})
    try:
        run_id, status = await s.run_and_wait("x = bytearray(3 * 1024**3)")
        assert status["state"] == "error", s.text(run_id)
        assert status["message"] == "the kernel ran out of memory (limit 512 MiB, kernel.memoryLimit)"
        assert "MemoryError" in s.text(run_id)
        run_id, status = await s.run_and_wait("y = bytearray(100 * 1024**2)\nprint('fine', len(y) // 1024**2)")
        assert (status["state"], s.text(run_id).strip()) == ("ok", "fine 100")
    finally:
        await stop_session(s)


async def test_a_kernel_killed_with_sigkill_under_a_memory_limit_is_said_to_have_run_out(
    workspace_root: Path, home: Path
) -> None:
    """What the kernel's OOM killer does (SIGKILL), done by the code itself: the run says so, names the limit,
    and the kernel is restarted."""
    s = await start_session(workspace_root, home, configuration={"kernel": {"memoryLimit": 600}})
    try:
        run_id, status = await s.run_and_wait("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
        assert status["state"] == "died"
        assert (
            "killed (SIGKILL), most likely it ran out of memory (limit 600 MiB, kernel.memoryLimit)"
            in (status["message"])
        )
        assert "restarted" in status["message"]
        run_id, status = await s.run_and_wait("print('back')")
        assert (status["state"], s.text(run_id).strip()) == ("ok", "back")
    finally:
        await stop_session(s)


async def test_cpu_time_limit_ends_the_kernel_and_says_why(workspace_root: Path, home: Path) -> None:
    s = await start_session(workspace_root, home, configuration={"kernel": {"cpuTimeLimit": 4}})
    try:
        run_id, status = await s.run_and_wait("print('warm')")
        assert status["state"] == "ok", s.text(run_id)
        run_id, status = await s.run_and_wait("while True:\n    pass", timeout=DEFAULT_WAIT * 2)
        assert status["state"] == "died"
        assert "used up its CPU time (limit 4 s, kernel.cpuTimeLimit)" in status["message"]
        run_id, status = await s.run_and_wait("print('restarted')")
        assert (status["state"], s.text(run_id).strip()) == ("ok", "restarted")
    finally:
        await stop_session(s)


def _as_unprivileged_user(*paths: Path) -> tuple[tuple[str, ...], int]:
    """What runs the server as an unprivileged user when the tests run as root (CI does), and its uid: Linux
    ignores RLIMIT_NPROC for root, so a root server cannot show what a user sees. The uid is a fresh one of
    this run (no account needed): RLIMIT_NPROC counts per user, and another suite running at the same time
    must not share the count. `paths` (its workspace, its home) are handed to it. It keeps one capability,
    CAP_DAC_READ_SEARCH, only to reach the interpreter (pyenv under /root) and the tests' directories: it
    is not CAP_SYS_RESOURCE, so the limit holds."""
    if os.geteuid() != 0:
        return (), os.getuid()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv (util-linux) to start the server as another user")
    uid = 200_000 + secrets.randbelow(800_000)
    for path in paths:
        for item in [path, *path.rglob("*")]:
            os.chown(item, uid, uid)
    caps = "+dac_read_search"
    return (
        setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", f"--inh-caps={caps}", f"--ambient-caps={caps}",
    ), uid  # fmt: skip


FORK_A_LOT = textwrap.dedent("""
    import subprocess
    children = []
    try:
        while len(children) < 200:
            children.append(subprocess.Popen(["sleep", "60"]))
    finally:
        print("started", len(children))
        for child in children:
            child.kill()
            child.wait()
""")

THREAD_A_LOT = textwrap.dedent("""
    import threading
    stop, threads = threading.Event(), []
    try:
        while len(threads) < 200:
            thread = threading.Thread(target=stop.wait)
            thread.start()
            threads.append(thread)
    finally:
        print("started", len(threads))
        stop.set()
        for thread in threads:
            thread.join()
""")


async def test_process_limit_stops_a_fork_bomb(workspace_root: Path, home: Path) -> None:
    """Code that starts processes past kernel.processLimit fails with a sentence naming the setting; the
    kernel keeps its state and starts processes again once they ended; the code cannot raise the limit.
    (The kernel's own threads, a dozen, and the server's count too: RLIMIT_NPROC counts per user.)"""
    prefix, uid = _as_unprivileged_user(workspace_root, home)
    s = await start_session(
        workspace_root,
        home,
        configuration={"kernel": {"processLimit": 60}},
        env={"HOME": str(home)},
        command_prefix=prefix,
    )
    try:
        run_id, status = await s.run_and_wait("kept = 'state'")
        assert status["state"] == "ok", s.text(run_id)
        kernel = await _kernel(s, "python")
        assert "processes +60" in kernel["limits"], kernel
        owner = Path(f"/proc/{kernel['pid']}").stat().st_uid  # noqa: ASYNC240
        assert owner == uid
        run_id, status = await s.run_and_wait(FORK_A_LOT)
        assert status["state"] == "error", s.text(run_id)
        assert status["message"] == (
            "the kernel could not start another process: it reached its process limit "
            "(60 more than you ran when it started, kernel.processLimit)"
        )
        assert "BlockingIOError" in s.text(run_id)
        started = int(s.text(run_id, ("stdout",)).split()[1])
        assert 0 < started < 60, s.text(run_id)
        # The kernel and the server are fine: the state is kept, and processes start again.
        code = (
            "import subprocess\nprint(kept, subprocess.run(['echo', 'again'], capture_output=True, text=True).stdout)"
        )
        run_id, status = await s.run_and_wait(code)
        assert (status["state"], s.text(run_id).strip()) == ("ok", "state again")
        # Threads count too.
        run_id, status = await s.run_and_wait(THREAD_A_LOT)
        assert status["state"] == "error", s.text(run_id)
        assert status["message"] == (
            "the kernel could not start another thread: it reached its process limit "
            "(60 more than you ran when it started, kernel.processLimit)"
        )
        assert 0 < int(s.text(run_id, ("stdout",)).split()[1]) < 60, s.text(run_id)
        # The hard limit was lowered too: kernel code cannot lift the limit it is under.
        code = textwrap.dedent("""
            import resource
            soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
            try:
                resource.setrlimit(resource.RLIMIT_NPROC, (hard + 1000, hard + 1000))
                print("raised")
            except ValueError as error:
                print("refused:", error, soft == hard)
        """)
        run_id, status = await s.run_and_wait(code)
        assert s.text(run_id).strip() == "refused: not allowed to raise maximum limit True"
    finally:
        await stop_session(s)


def _python_for_anyone() -> str | None:
    """An interpreter another user can run (the tests' own may sit under /root): for the launcher, which
    needs the standard library only."""
    for candidate in (os.path.realpath(sys.executable), "/usr/bin/python3"):
        parts = Path(candidate).parents
        if os.path.exists(candidate) and all(os.stat(d).st_mode & 0o001 for d in parts):
            return candidate
    return None


SPAWN_A_LOT = textwrap.dedent("""
    import subprocess
    children = []
    try:
        while len(children) < 200:
            children.append(subprocess.Popen(["sleep", "60"]))
    except OSError:
        pass
    print("started", len(children))
    for child in children:
        child.kill()
        child.wait()
""")


@needs_bwrap
def test_in_the_sandbox_the_process_limit_counts_the_sandbox_only() -> None:
    """An unprivileged user's sandbox is a user namespace of its own, where Linux counts RLIMIT_NPROC apart
    (`sandbox.counts_processes_apart`, from 5.14): the user's other processes do not use up the kernel's
    limit, which bounds the sandbox's own. The real launcher in the real sandbox, as a fresh uid when the
    tests run as root (bubblewrap refuses to run with capabilities, so the interpreter must be one anyone
    can reach)."""
    python = _python_for_anyone()
    if python is None:
        pytest.skip("no interpreter another user can run")
    prefix: list[str] = []
    uid = os.getuid()
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv (util-linux)")
        uid = 200_000 + secrets.randbelow(800_000)
        prefix = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    # A copy of the server's package that the fresh uid can read: the checkout may be in a private (0700)
    # directory, which is how many users clone; /var/tmp is outside the sandbox's private /tmp.
    base = Path(tempfile.mkdtemp(prefix="ilsp-nproc-", dir="/var/tmp"))
    base.chmod(0o755)
    server = str(base / "server")
    package = Path(__file__).resolve().parents[1] / "server" / "interpreter_lsp"
    shutil.copytree(package, Path(server) / "interpreter_lsp", ignore=shutil.ignore_patterns("__pycache__"))
    for item in [Path(server), *Path(server).rglob("*")]:
        item.chmod(0o755 if item.is_dir() else 0o644)
    outside = None
    try:
        check = subprocess.run(
            [*prefix, python, "-I", "-c", f"import sys; sys.path.insert(0, {server!r}); "
             "from interpreter_lsp.kernels.sandbox import counts_processes_apart; print(counts_processes_apart())"],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        release = tuple(int(x) for x in os.uname().release.split(".")[:2])
        if check.stdout.strip() != "True":
            assert release < (5, 14) or os.stat(shutil.which("bwrap") or "").st_mode & 0o4000, check
            pytest.skip("processes are counted per user here (Linux before 5.14, or a setuid bubblewrap)")
        workspace, runtime, home = base / "ws", base / "rt", base / "home"
        for path in (base, workspace, runtime, home):
            path.mkdir(exist_ok=True)
            path.chmod(0o755)
            os.chown(path, uid, uid)
        # 30 processes of the same user outside the sandbox: more than the limit (20).
        outside = subprocess.Popen(
            [*prefix, "sh", "-c", "for i in $(seq 30); do sleep 120 & done; echo up; wait"],
            stdout=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        assert outside.stdout is not None and outside.stdout.readline() == "up\n"
        launcher = [python, "-I", "-S", str(Path(server) / "interpreter_lsp/kernels/launcher.py")]
        launcher += [*Limits(processes=20).arguments(), "--"]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
        argv, env = wrap_command([python, "-c", SPAWN_A_LOT], env, SandboxConfig(workspace, runtime), launcher)
        result = subprocess.run([*prefix, *argv], env=env, capture_output=True, text=True, timeout=120, check=False)
        assert result.stdout.startswith("started "), (result.stdout, result.stderr)
        started = int(result.stdout.split()[1])
        # Counted per user, the 30 outside would leave none; counted apart, the sandbox's own are bounded.
        assert 0 < started < 20, result.stdout
    finally:
        if outside is not None:
            os.killpg(outside.pid, signal.SIGKILL)
            outside.wait()
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="what a root server says")
async def test_a_root_server_says_the_process_limit_does_not_hold(workspace_root: Path, home: Path) -> None:
    s = await start_session(workspace_root, home, configuration={"kernel": {"processLimit": 20}})
    try:
        run_id, status = await s.run_and_wait("print('up')")
        assert status["state"] == "ok", s.text(run_id)
        kernel = await _kernel(s, "python")
        assert (
            "processes NOT ENFORCED (the server runs as root, and Linux ignores RLIMIT_NPROC for root"
            in (kernel["limits"])
        )
    finally:
        await stop_session(s)


# ---- 4. the runtime directory of a killed server -------------------------------------------------------------


def _runtime_dirs_of(pid: int) -> list[Path]:
    found = []
    for directory in Path(tempfile.gettempdir()).glob("ilsp-*"):
        try:
            if (directory / "owner").read_text().split()[0] == str(pid):
                found.append(directory)
        except (OSError, IndexError):
            continue
    return found


async def test_a_killed_servers_runtime_directory_is_removed_at_the_next_start(
    workspace_root: Path, home: Path
) -> None:
    first = await start_session(workspace_root, home)
    try:
        await first.run_and_wait("print(1)")
        server = first.client._server
        assert server is not None
        [stale] = _runtime_dirs_of(server.pid)
        server.send_signal(signal.SIGKILL)
        await server.wait()
    finally:
        await first.client.stop()
    assert stale.exists()  # nobody could remove it
    # A directory whose owner still runs (this test) is left alone.
    alive = Path(tempfile.mkdtemp(prefix="ilsp-"))
    (alive / "owner").write_text(f"{os.getpid()}\n")
    second = await start_session(workspace_root, home)
    try:
        run_id, status = await second.run_and_wait("print(2)")
        assert status["state"] == "ok", second.text(run_id)
        assert not stale.exists()
        assert alive.exists()  # noqa: ASYNC240
    finally:
        await stop_session(second)
        shutil.rmtree(alive, ignore_errors=True)


def test_the_launcher_ends_as_its_kernel_did(tmp_path: Path) -> None:
    """The server tells an exit from a kill by the launcher's own end: it must mirror its child's."""
    from interpreter_lsp.kernels.launcher import Limits, command

    prefix = command(Limits())
    assert subprocess.run([*prefix, sys.executable, "-c", "raise SystemExit(3)"], timeout=DEFAULT_WAIT).returncode == 3
    killed = subprocess.run([*prefix, "sh", "-c", "kill -9 $$"], timeout=DEFAULT_WAIT)
    assert killed.returncode == -signal.SIGKILL


def test_a_launcher_whose_server_died_as_it_started_starts_no_kernel(tmp_path: Path) -> None:
    """The server dies between starting a kernel's launcher and the launcher's look at its parent (an editor
    closed as the kernel started): the launcher's parent is then init, or a subreaper, which it used to take
    for the sandbox's init or watch instead of the server, and the kernel outlived the server. Given the
    server's pid, it starts nothing and says why."""
    prefix = "command(Limits(), parent=os.getpid()) + kernel"
    _starts_nothing(*_the_server_dies_before_it_starts(tmp_path, prefix, "()"))


def _the_server_dies_before_it_starts(tmp_path: Path, prefix_code: str, pass_fds: str) -> tuple[int, Path, Path]:
    """A "server" starts a shell that waits until the server is gone and only then becomes `prefix_code`'s
    command line (exec: the same process, whose parent is whatever adopted it), prints that pid, and exits.
    The kernel it would start touches a marker in the workspace. Returns (pid, marker, stderr's file)."""
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    marker = workspace / f"kernel ran {uuid.uuid4().hex}"
    errors = tmp_path / "launcher.err"
    server = textwrap.dedent(f"""
        import os, subprocess, sys
        from pathlib import Path
        from interpreter_lsp.kernels.launcher import Limits, command
        from interpreter_lsp.kernels.sandbox import SandboxConfig, wrap_command
        lifeline, _write_end = os.pipe()  # the write end: this process's only, closed as it exits
        wait = 'while kill -0 {{}} 2>/dev/null; do sleep 0.02; done; exec "$@"'.format(os.getpid())
        kernel = ["sh", "-c", 'touch "$0"; exec sleep 300', {str(marker)!r}]
        argv = {prefix_code}
        with open({str(errors)!r}, "wb") as err:
            launcher = subprocess.Popen(
                ["sh", "-c", wait, "sh", *argv], pass_fds={pass_fds},
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            )
        print(launcher.pid, flush=True)
        os._exit(0)
    """)
    started = subprocess.run([sys.executable, "-c", server], capture_output=True, text=True, timeout=DEFAULT_WAIT)
    assert started.returncode == 0, started.stderr
    return int(started.stdout), marker, errors


def _starts_nothing(pid: int, marker: Path, errors: Path) -> None:
    import select

    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        fd = None  # ended already
    try:
        if fd is not None:
            ready, _, _ = select.select([fd], [], [], DEFAULT_WAIT)
            assert ready, "the launcher is still running although the server that started it is gone"
        assert not marker.exists(), "the kernel was started although the server that started it is gone"
        assert "the server that started this kernel has exited" in errors.read_text()
    finally:
        if fd is not None:
            os.close(fd)
        with contextlib.suppress(ProcessLookupError):  # a launcher that started its kernel: its whole group
            os.killpg(pid, signal.SIGKILL)


@needs_bwrap
def test_a_sandboxed_kernel_whose_server_died_as_bubblewrap_started_starts_no_kernel(tmp_path: Path) -> None:
    """Without a cgroup there is no launcher before bubblewrap to look at its parent, and bubblewrap's
    --die-with-parent is set in its child: a server that died before that left it watching init, and the
    kernel ran on with no server. The launcher inside is handed the read end of a pipe whose write end only
    the server holds (its lifeline): ended already, it starts nothing and says why."""
    prefix = (
        "wrap_command(kernel, dict(os.environ), SandboxConfig(Path({ws!r}), Path({rt!r})), "
        "command(Limits(), lifeline=lifeline))[0]"
    ).format(ws=str(tmp_path / "ws"), rt=str(tmp_path / "runtime"))
    (tmp_path / "runtime").mkdir(mode=0o700)
    _starts_nothing(*_the_server_dies_before_it_starts(tmp_path, prefix, "(lifeline,)"))


def test_a_lifeline_numbered_past_select_s_reach_holds(tmp_path: Path) -> None:
    """The lifeline keeps the server's descriptor number, which in a busy server can be past 1024, where
    select cannot look. The launcher starts the kernel all the same, and ends it when the lifeline ends."""
    import resource

    from interpreter_lsp.kernels.launcher import command

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"this process may not open descriptors past {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))
    read, write = os.pipe()
    high = 1500
    try:
        os.dup2(read, high, inheritable=False)
        kernel = ["sh", "-c", "echo ready; exec sleep 300"]
        launcher = subprocess.Popen(
            [*command(Limits(), lifeline=high), *kernel], pass_fds=(high,),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
    finally:
        os.close(read)
        os.close(high)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        assert launcher.stdout is not None and launcher.stdout.readline() == b"ready\n"
        os.close(write)  # the server is gone
        write = -1
        launcher.wait(timeout=DEFAULT_WAIT)  # the kernel ended with it
        assert launcher.stderr is not None and b"has exited" not in launcher.stderr.read()
    finally:
        if write >= 0:
            os.close(write)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(launcher.pid, signal.SIGKILL)
        for stream in (launcher.stdout, launcher.stderr):
            if stream is not None:
                stream.close()
