"""The bubblewrap sandbox, proven with a real ipykernel started the way the server starts kernels:
AsyncKernelManager over IPC sockets in a 0700 runtime directory, its command wrapped by wrap_command.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager

from interpreter_lsp.kernels.sandbox import SandboxConfig, bwrap_available, wrap_command
from interpreter_lsp.safety.secrets import kernel_environment

TIMEOUT = 60.0
_MISSING = bwrap_available()
needs_bwrap = pytest.mark.skipif(
    _MISSING is not None and "not installed" in _MISSING,
    reason=f"{_MISSING} (scripts/setup.sh installs it)",
)


class SandboxedKernelManager(AsyncKernelManager):
    """What the server does: the kernelspec's command, wrapped in bwrap."""

    sandbox: SandboxConfig | None = None
    sandbox_env: dict[str, str] | None = None

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        cmd = super().format_kernel_cmd(extra_arguments)
        if self.sandbox is None:
            return cmd
        return wrap_command(cmd, self.sandbox_env or {}, self.sandbox)[0]


@dataclass
class Result:
    status: str
    stdout: str = ""
    ename: str = ""
    evalue: str = ""
    outputs: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Running:
    km: SandboxedKernelManager
    kc: AsyncKernelClient
    workspace: Path
    home: Path
    tmp: Path


async def execute(
    kc: AsyncKernelClient,
    code: str,
    timeout: float = TIMEOUT,
    started: asyncio.Event | None = None,
    started_on_stdout: bool = False,
) -> Result:
    """Run code, collect its stdout and error, until the kernel is idle again and has replied.
    `started` is set when the kernel begins running the code."""

    async def _run() -> Result:
        # stop_on_error=False as the server sends it: with the default, ipykernel 7 sends the error reply
        # and only then starts aborting queued requests, so a request sent right after an interrupt
        # can race that window and come back 'aborted' without running.
        msg_id = kc.execute(code, stop_on_error=False)
        result = Result(status="?")
        while True:
            msg = await kc.get_iopub_msg()
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "execute_input" and started is not None and not started_on_stdout:
                started.set()
            elif kind == "stream" and content["name"] == "stdout":
                result.stdout += content["text"]
                if started is not None and started_on_stdout:
                    started.set()
            elif kind == "error":
                result.ename, result.evalue = content["ename"], content["evalue"]
            elif kind == "status" and content["execution_state"] == "idle":
                break
        while True:
            reply = await kc.get_shell_msg()
            if reply["parent_header"].get("msg_id") == msg_id:
                result.status = reply["content"]["status"]
                return result

    return await asyncio.wait_for(_run(), timeout)


async def start_kernel(tmp: Path, *, network: bool = False, sandboxed: bool = True,
                       extra_env: dict[str, str] | None = None) -> Running:
    runtime = tmp / "runtime"
    runtime.mkdir(mode=0o700)
    workspace = tmp / "ws"
    workspace.mkdir()
    home = tmp / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_canary").write_text("CANARY-PRIVATE-KEY\n")
    env = kernel_environment({**os.environ, "HOME": str(home), **(extra_env or {})})
    km = SandboxedKernelManager(
        kernel_name="python3",
        transport="ipc",
        ip=str(runtime / "kernel"),
        connection_file=str(runtime / "kernel.json"),
    )
    start_env = env
    if sandboxed:
        km.sandbox = SandboxConfig(workspace=workspace, runtime_dir=runtime, network=network)
        km.sandbox_env = env
        start_env = wrap_command([], env, km.sandbox)[1]
    await km.start_kernel(cwd=str(workspace), env=start_env, stdout=subprocess.DEVNULL,
                          stdin=subprocess.DEVNULL)
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=TIMEOUT)
    except Exception:
        await km.shutdown_kernel(now=True)
        raise
    return Running(km=km, kc=kc, workspace=workspace, home=home, tmp=tmp)


async def stop_kernel(running: Running) -> None:
    running.kc.stop_channels()
    await running.km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sandbox")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandboxed(module_tmp: Path) -> AsyncIterator[Running]:
    running = await start_kernel(module_tmp)
    yield running
    await stop_kernel(running)


@pytest.fixture
def real_home_canary() -> Iterator[Path]:
    """A file in the real home directory, readable by this user, that the sandbox must not see."""
    path = Path.home() / f".interpreter-lsp-canary-{uuid.uuid4().hex}"
    path.write_text("CANARY-IN-REAL-HOME\n")
    try:
        yield path
    finally:
        path.unlink()


@needs_bwrap
class TestSandbox:
    pytestmark = pytest.mark.asyncio(loop_scope="module")

    async def test_bwrap_is_usable(self) -> None:
        assert bwrap_available() is None

    async def test_the_kernel_runs_in_the_workspace_and_can_write_there(self, sandboxed: Running) -> None:
        result = await execute(sandboxed.kc, textwrap.dedent("""
            import os
            from pathlib import Path
            Path("made-in-sandbox.txt").write_text("hello")
            print(os.getcwd())
        """))
        assert result.status == "ok", result
        assert result.stdout.strip() == str(sandboxed.workspace.resolve())
        assert (sandboxed.workspace / "made-in-sandbox.txt").read_text() == "hello"

    async def test_writes_outside_the_workspace_fail(self, sandboxed: Running) -> None:
        read_only = Path(sys.prefix) / f"sandbox-probe-{uuid.uuid4().hex}.txt"  # a real, existing directory
        outside = sandboxed.tmp / "outside"  # exists on the real file system, under the real /tmp
        outside.mkdir()
        result = await execute(sandboxed.kc, textwrap.dedent(f"""
            for target in [{str(read_only)!r}, {str(outside / "x.txt")!r}]:
                try:
                    open(target, "w").write("escaped")
                    print("WROTE", target)
                except OSError as error:
                    print(type(error).__name__, error.strerror)
        """))
        assert result.status == "ok", result
        lines = result.stdout.strip().splitlines()
        assert lines == ["OSError Read-only file system", "FileNotFoundError No such file or directory"]
        assert not read_only.exists()
        assert list(outside.iterdir()) == []

    async def test_tmp_is_private(self, sandboxed: Running) -> None:
        name = f"/tmp/interpreter-lsp-private-{uuid.uuid4().hex}"
        result = await execute(sandboxed.kc, f"open({name!r}, 'w').write('x'); print(open({name!r}).read())")
        assert result.stdout.strip() == "x"
        assert not Path(name).exists()  # noqa: ASYNC240

    async def test_ssh_keys_cannot_be_read(self, sandboxed: Running, real_home_canary: Path) -> None:
        fake_ssh_key = sandboxed.home / ".ssh" / "id_canary"
        result = await execute(sandboxed.kc, textwrap.dedent(f"""
            import os
            for path in [os.path.expanduser("~/.ssh/id_canary"), {str(fake_ssh_key)!r}, {str(real_home_canary)!r}]:
                try:
                    print("READ", open(path).read().strip())
                except OSError as error:
                    print(type(error).__name__)
        """))
        assert result.status == "ok", result
        assert "CANARY" not in result.stdout
        assert result.stdout.split() == ["FileNotFoundError"] * 3

    async def test_no_network_not_even_localhost(self, sandboxed: Running) -> None:
        connected = asyncio.Event()

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            connected.set()
            writer.close()

        server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            result = await execute(sandboxed.kc, textwrap.dedent(f"""
                import socket
                try:
                    socket.create_connection(("127.0.0.1", {port}), timeout=10).close()
                    print("CONNECTED")
                except OSError as error:
                    print(type(error).__name__)
            """))
        assert result.status == "ok", result
        assert result.stdout.strip() in ("ConnectionRefusedError", "OSError")
        assert not connected.is_set()

    @pytest.mark.skipif(not os.access("/run", os.W_OK), reason="needs write access to /run to make a daemon socket")
    async def test_daemon_sockets_are_out_of_reach(self, sandboxed: Running) -> None:
        """A unix socket ignores network namespaces and read-only mounts: the sandbox must hide it."""
        directory = Path("/run") / f"interpreter-lsp-test-{uuid.uuid4().hex}"
        directory.mkdir()
        path = directory / "daemon.sock"
        accepted = asyncio.Event()

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.set()
            writer.close()

        server = await asyncio.start_unix_server(on_connect, path=str(path))
        try:
            async with server:
                result = await execute(sandboxed.kc, textwrap.dedent(f"""
                    import socket
                    s = socket.socket(socket.AF_UNIX)
                    try:
                        s.connect({str(path)!r})
                        print("CONNECTED")
                    except OSError as error:
                        print(type(error).__name__)
                """))
        finally:
            path.unlink(missing_ok=True)
            directory.rmdir()
        assert result.stdout.strip() == "FileNotFoundError"
        assert not accepted.is_set()

    async def test_processes_outside_are_out_of_sight(self, sandboxed: Running) -> None:
        result = await execute(sandboxed.kc, textwrap.dedent("""
            import os
            commands = []
            for pid in (p for p in os.listdir("/proc") if p.isdigit()):
                try:
                    commands.append(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode())
                except OSError:
                    pass
            print(os.getpid())
            print("\\n".join(commands))
        """))
        assert result.status == "ok", result
        own_pid, *commands = result.stdout.strip().splitlines()
        assert int(own_pid) < 10  # its own PID namespace: the kernel is one of its first processes
        # Only the sandbox's reaper (bwrap) and the kernel itself: not this test, standing in for the server.
        others = [c for c in commands if not c.startswith("bwrap") and "ipykernel" not in c]
        assert others == []

    async def test_interrupt_stops_running_code(self, sandboxed: Running) -> None:
        started = asyncio.Event()
        # Interrupt once the code itself is running (it says so), not merely once the request arrived.
        code = "import time\nprint('sleeping', flush=True)\ntime.sleep(100)"
        task = asyncio.create_task(execute(sandboxed.kc, code, started=started, started_on_stdout=True))
        await asyncio.wait_for(started.wait(), TIMEOUT)
        await sandboxed.km.interrupt_kernel()
        result = await asyncio.wait_for(task, 30)
        assert result.status == "error"
        assert result.ename == "KeyboardInterrupt"
        after = await execute(sandboxed.kc, "print('still alive')")
        assert (after.status, after.ename, after.stdout.strip()) == ("ok", "", "still alive")


@needs_bwrap
@pytest.mark.asyncio
async def test_network_true_allows_connections(tmp_path: Path) -> None:
    connected = asyncio.Event()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    running = await start_kernel(tmp_path, network=True)
    try:
        async with server:
            result = await execute(running.kc, f"import socket\nsocket.create_connection(('127.0.0.1', {port})).close()"
                                               "\nprint('CONNECTED')")
            await asyncio.wait_for(connected.wait(), TIMEOUT)
        assert result.stdout.strip() == "CONNECTED"
    finally:
        await stop_kernel(running)


@pytest.mark.asyncio
@pytest.mark.parametrize("in_sandbox", [False, pytest.param(True, marks=needs_bwrap)])
async def test_kernel_cannot_read_a_provider_key(tmp_path: Path, in_sandbox: bool) -> None:
    """The key is in the server's environment; the kernel gets kernel_environment(), without it. Only the
    sandbox also hides the server's /proc/<pid>/environ (same user outside it)."""
    canary = f"sk-canary-{uuid.uuid4().hex}"
    server_like = subprocess.Popen(["sleep", "120"], env={**os.environ, "OPENAI_API_KEY": canary})  # noqa: ASYNC220
    try:
        running = await start_kernel(tmp_path, sandboxed=in_sandbox, extra_env={"OPENAI_API_KEY": canary})
        try:
            result = await execute(running.kc, textwrap.dedent(f"""
                import os
                print(os.environ.get("OPENAI_API_KEY"))
                print(any({canary!r} in value for value in os.environ.values()))
                try:
                    print({canary!r} in open("/proc/{server_like.pid}/environ").read())
                except OSError as error:
                    print(type(error).__name__)
            """))
        finally:
            await stop_kernel(running)
    finally:
        server_like.kill()
        server_like.wait()
    key, anywhere, proc = result.stdout.split()
    assert (key, anywhere) == ("None", "False")
    if in_sandbox:
        assert proc == "FileNotFoundError"
    else:
        assert proc in ("True", "PermissionError")  # same user: readable unless the server is non-dumpable


@needs_bwrap
def test_the_sandbox_dies_with_its_parent(tmp_path: Path) -> None:
    """Kill the process that started the sandbox: everything inside it goes too."""
    workspace, runtime = tmp_path / "ws", tmp_path / "run"
    workspace.mkdir()
    runtime.mkdir(mode=0o700)
    parent_code = textwrap.dedent(f"""
        import subprocess, sys, os
        from pathlib import Path
        from interpreter_lsp.kernels.sandbox import SandboxConfig, wrap_command
        config = SandboxConfig(workspace=Path({str(workspace)!r}), runtime_dir=Path({str(runtime)!r}))
        argv, env = wrap_command(["sh", "-c", "echo ready; exec sleep 600"], dict(os.environ), config)
        child = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        print(child.pid, flush=True)
        sys.stdin.read()
    """)
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    assert parent.stdout is not None
    bwrap_pid = int(parent.stdout.readline())
    # "ready" is printed just before `exec sleep`: the process may still be called sh for a moment.
    deadline = time.monotonic() + TIMEOUT
    sandboxed = _descendants(bwrap_pid)
    while not any(_command(pid) == "sleep" for pid in sandboxed):
        assert time.monotonic() < deadline, "the sandboxed command did not start"
        time.sleep(0.05)
        sandboxed = _descendants(bwrap_pid)
    watchers = {pid: os.pidfd_open(pid) for pid in [bwrap_pid, *sandboxed]}
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    try:
        for pid, fd in watchers.items():
            ready, _, _ = select.select([fd], [], [], 10)
            assert ready, f"process {pid} ({_command(pid)}) outlived its parent"
    finally:
        for fd in watchers.values():
            os.close(fd)


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except FileNotFoundError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{current}/task/{task}/children").read_text().split()
            except FileNotFoundError:
                continue
            for child in map(int, children):
                found.append(child)
                pending.append(child)
    return found


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except FileNotFoundError:
        return "(gone)"
