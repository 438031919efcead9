"""One Jupyter kernel: its process (jupyter_client's AsyncKernelManager) and one router task that reads
every channel and routes each message by its parent msg_id. No threads (the heartbeat thread is not
started: process death is watched from the event loop, see process_watch.py), no sleep-polling.

Every kernel has a runtime directory of its own (its connection file and sockets: a sandboxed kernel sees
only its own) and, on POSIX, runs under launcher.py (resource limits; every process it starts ends with it).

Kernels are reached over IPC (Unix sockets in the runtime directory) on Linux and macOS; over TCP on
127.0.0.1 where IPC is unavailable (Windows) or when the portable paths are forced. Either way every message
is signed with the connection file's key, and no send waits (connection.py: SNDTIMEO 0 on every socket).

A kernel's stderr is a pipe of its own (stderr.py). A process that exits before the kernel answered is a
start that failed, not a death: the start raises why (restarts.start_failure), and the pool decides whether
to try again (restarts.py); only a kernel that was running reports its death (`on_death`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from ..portable import portable_forced
from . import cgroups, launcher
from .connection import StdinWatch, deserialize, encrypt, load, manager_class, new_context, zmq_again
from .execution import ExecuteReply, Executions, ExecutionSink, Pending
from .launcher import Limits
from .limits import exit_cause
from .process_watch import ProcessWatch
from .restarts import start_failure
from .specs import KernelChoice
from .stderr import KernelStderr

if TYPE_CHECKING:
    import zmq
    from jupyter_client.asynchronous.client import AsyncKernelClient

log = logging.getLogger(__name__)

READY_TIMEOUT = 60.0
# How long a start waits for the stdin channel's handshake once shell and iopub answer (it normally comes
# with them; a start whose handshake event was missed goes on after this, as before).
STDIN_WAIT = 10.0


# The longest unix socket path, in bytes (sun_path less its NUL: 103 on macOS and the BSDs, 107 on Linux).
UNIX_SOCKET_PATH_MAX = 103


class KernelDied(RuntimeError):
    pass


class KernelStartError(UserError):
    """The kernel could not start: a sentence saying why and what to do (a bad interpreter path, no bwrap).
    `retry`: its process exited before it answered, which may pass (kernels/restarts.py decides)."""

    def __init__(self, message: str, *, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry


StateCallback = Callable[[str, str | None], None]
# (the kernel's command, its runtime directory, the launcher's prefix) -> the command to run (the sandbox)
CommandWrapper = Callable[[list[str], Path, list[str]], list[str]]


class Kernel:
    def __init__(
        self,
        choice: KernelChoice,
        *,
        cwd: Path,
        runtime_dir: Path,
        env: dict[str, str],
        on_state: StateCallback,
        on_death: Callable[[Kernel], Awaitable[None]] | None = None,
        command_wrapper: CommandWrapper | None = None,
        limits: Limits | None = None,
        cgroup_root: Path | None = None,
    ) -> None:
        self.choice = choice
        self.language = choice.language
        self.cwd = cwd
        self._runtime_dir = runtime_dir
        self._env = env
        self._on_state = on_state
        self._on_death = on_death
        self._command_wrapper = command_wrapper
        self.limits = limits or Limits()
        self._cgroup_root = cgroup_root  # a delegated cgroup: this kernel's tree gets a child of it
        self.cgroup: Path | None = None
        self.cgroup_problem = ""  # why it has none although the root was given
        self._oom_kills = 0
        self.state = "stopped"
        self.started_at: float | None = None
        self.transport = "ipc"
        self._km: Any = None
        self._kc: AsyncKernelClient | None = None
        # Requests in flight and the routing of their messages: the one execution path (execution.py).
        self._executions = Executions(lambda: self.state, self._set_state, self._spawn_input)
        self._pending = self._executions.pending
        self._router: asyncio.Task[None] | None = None
        self._stdin_watch: StdinWatch | None = None
        self._drains: dict[str, Callable[[], None]] = {}
        self._process_watch: ProcessWatch | None = None
        self._expect_exit = False
        self._death_task: asyncio.Task[None] | None = None
        self._input_tasks: set[asyncio.Task[None]] = set()
        self._stderr: KernelStderr | None = None
        self._context: Any = None  # the zmq context of its sockets (ours: every send is non-blocking)
        self._exit_cause: str | None = None  # the process exited while starting: why (for _wait_ready)
        self.death_cause: str | None = None  # why it died last, once it had been running
        self._quietly_dead = False  # its last start failed and may be tried again (_failed_quietly)
        # (read end, write end) of the launcher's lifeline (launcher.py --lifeline): the write end stays here
        # only, so the launcher sees it end when this process does, however it ends. Kept for restarts.
        self._lifeline: tuple[int, int] | None = None

    # ---- life cycle ------------------------------------------------------------------------------

    def _set_state(self, state: str, message: str | None = None) -> None:
        if state != self.state or message:
            self.state = state
            self._on_state(state, message)

    def _wrap(self, cmd: list[str]) -> list[str]:
        cgroup = str(self.cgroup) if self.cgroup is not None else None
        lifeline = self._lifeline[0] if self._lifeline is not None else None
        if self._command_wrapper is not None:
            # In the sandbox /sys is read-only: bubblewrap itself is started in the cgroup.
            # The launcher inside sees bubblewrap's init as its parent (a PID namespace of its own): only the
            # one that joins the cgroup, outside, can check that the server is still its parent.
            # The lifeline reaches the launcher inside (bubblewrap passes descriptors through): a server that
            # died before bubblewrap set --die-with-parent leaves it ended, and no kernel starts.
            prefix = launcher.command(self.limits, lifeline=lifeline) if os.name == "posix" else []
            joined = launcher.join_command(cgroup, os.getpid(), lifeline) if cgroup else []
            return [*joined, *self._command_wrapper(cmd, self._runtime_dir, prefix)]
        # The server's pid: a launcher started just as the server died would otherwise watch init instead.
        return [*(launcher.command(self.limits, cgroup, os.getpid(), lifeline) if os.name == "posix" else []), *cmd]

    def _make_cgroup(self, tag: str) -> None:
        if self._cgroup_root is None or self.cgroup is not None:
            return
        try:
            self.cgroup = cgroups.create(self._cgroup_root, tag, self.limits)
        except OSError as error:  # rlimits still hold; status says why there is no cgroup
            self.cgroup_problem = f"creating it failed: {error}"
            log.warning("%s kernel: no cgroup of its own (%s); rlimits only", self.language, error)

    async def start(self) -> None:
        try:
            await self._start()
        except asyncio.CancelledError:
            # Cancelled mid-start (the server shuts down while this kernel starts): the process may be
            # running already, and nothing else would end it. Shielded: a second cancel cannot stop it.
            with contextlib.suppress(Exception):
                await asyncio.shield(self._kill())
            raise

    async def _start(self) -> None:
        self._set_state("starting")
        try:
            await load()  # jupyter_client and zmq, imported off the loop (the first start only)
        except ImportError as exc:
            why = (f"The kernel cannot start: {exc} (the server's install is incomplete: reinstall "
                   "interpreter-lsp, or run your editor's install command again)")
            self._set_state("dead", why)
            raise KernelStartError(why) from exc
        self._runtime_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        tag = f"{self.language}-{os.getpid()}-{id(self):x}"
        try:
            self.transport = self._transport()
        except KernelStartError as exc:
            self._set_state("dead", str(exc))
            raise
        self._make_cgroup(tag)
        if os.name == "posix" and self._lifeline is None:
            self._lifeline = os.pipe()  # not inheritable: only the launcher gets its read end (pass_fds)
        self._context = new_context()
        km = manager_class()(
            context=self._context,
            kernel_name=self.choice.name,
            transport=self.transport,
            # tcp: jupyter_client picks free ports on loopback; ipc: socket paths in our 0700 runtime dir,
            # which is this kernel's own, so the sockets' names need say nothing more ("k-1" .. "k-5").
            ip="127.0.0.1" if self.transport == "tcp" else str(self._socket_prefix()),
            connection_file=str(self._runtime_dir / f"k-{tag}.json"),
        )
        if self.choice.kernel_dirs:
            from jupyter_client.kernelspec import KernelSpecManager

            km.kernel_spec_manager = KernelSpecManager(kernel_dirs=list(self.choice.kernel_dirs))
        if self.transport == "tcp":
            encrypt(km)
        km.command_wrapper = self._wrap
        self._km = km
        if self._stderr is None:
            self._stderr = KernelStderr(self.language)
        self._stderr.mark()
        self._exit_cause = None
        self._expect_exit = False  # a former start's _kill expected its exit; this process's is news
        try:
            # stdout is the LSP wire: the kernel (and everything it spawns) must never inherit it. Its
            # stderr is a pipe of its own (kernels/stderr.py), kept for restarts (same launch arguments).
            await km.start_kernel(
                cwd=str(self.cwd),
                env=self._env,
                stdout=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                stderr=self._stderr.fd,
                **({"pass_fds": (self._lifeline[0],)} if self._lifeline is not None else {}),
            )
        except Exception as exc:
            with contextlib.suppress(Exception):
                await self._kill()  # whatever it made: its zmq context, runtime files, cgroup
            raise self._start_failed(exc) from exc
        try:
            self._connect()
            await self._wait_ready()
        except Exception as exc:
            # The kernel process runs and the sockets are open: end both, or a later garbage collection of
            # the zmq context would block the server in zmq_ctx_term.
            await self._kill()
            if isinstance(exc, KernelStartError):
                self._failed_quietly(exc)
                raise
            raise self._start_failed(exc) from exc
        self.started_at = time.monotonic()
        self._set_state("idle")

    def _failed_quietly(self, exc: KernelStartError) -> None:
        """A start that may be tried again ends "dead" without a word: the pool says why, once, when it
        gives up (kernels/restarts.py), not at every try."""
        if exc.retry:
            self.state = "dead"
            self._quietly_dead = True

    def _start_failed(self, exc: Exception) -> KernelStartError:
        self._set_state("dead", f"could not start: {exc}")
        return KernelStartError(f"The {self.language} kernel could not start: {exc}")

    def _socket_prefix(self) -> Path:
        return self._runtime_dir / "k"

    def _transport(self) -> str:
        """IPC wherever it works; TCP on loopback on Windows (no IPC there), when forced, or when the
        temporary directory is too deep for a unix socket's path. A sandboxed kernel (bubblewrap, Linux
        only) keeps IPC: without network it has a loopback of its own."""
        longest = len(os.fsencode(self._socket_prefix())) + len("-65535")
        too_long = longest > UNIX_SOCKET_PATH_MAX
        if self._command_wrapper is not None:
            if too_long:
                raise KernelStartError(
                    f"The {self.language} kernel could not start: its socket path would be {longest} bytes "
                    f"({self._socket_prefix()}-N), over the {UNIX_SOCKET_PATH_MAX} a unix socket allows. Start "
                    "the server with TMPDIR set to a shorter directory (its runtime files go there)."
                )
            return "ipc"
        if sys.platform == "win32" or portable_forced():
            return "tcp"
        if too_long:
            log.info("%s kernel: TCP on loopback, as %s is too deep for unix sockets", self.language, self._runtime_dir)
            return "tcp"
        return "ipc"

    def _connect(self) -> None:
        assert self._km is not None
        kc = self._km.client(context=self._context)
        self._kc = kc  # before its sockets open, so a failure here still closes them (_kill)
        # No heartbeat thread: death is watched through the process. stdin for input() requests.
        kc.start_channels(shell=True, iopub=True, stdin=True, hb=False, control=False)
        # The monitor is attached now, before any await: the kernel binds its sockets only once it started.
        self._stdin_watch = StdinWatch(kc, self.language)
        self._router = asyncio.create_task(self._route(), name=f"kernel-router-{self.language}")
        self._watch_process()

    async def _wait_ready(self) -> None:
        """kernel_info round trips until the reply and its iopub status both arrive (the iopub
        subscription is live then, so no output of the first run can be lost)."""
        assert self._kc is not None
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self._exit_cause is not None:
                stderr = self._stderr.tail() if self._stderr is not None else ""
                raise KernelStartError(start_failure(self.language, self.choice, self._exit_cause, stderr), retry=True)
            try:
                msg_id = self._kc.kernel_info()
            except zmq_again():  # its queue is full (nothing reads it): wait, as for an answer
                await asyncio.sleep(1.0)
                continue
            pending = self._register(msg_id, None)
            self._sent("shell")
            try:
                await asyncio.wait_for(pending.replied.wait(), 1.0)
                # Its idle status follows the reply at once when iopub is connected.
                await asyncio.wait_for(asyncio.shield(pending.done), 0.25)
                if pending.saw_iopub:
                    if self._stdin_watch is not None:
                        await self._stdin_watch.wait(STDIN_WAIT)
                    return
            except asyncio.TimeoutError:
                pass
            finally:
                self._pending.pop(msg_id, None)
        raise KernelStartError(f"The {self.language} kernel did not answer within {READY_TIMEOUT:.0f} s")

    def _watch_process(self) -> None:
        process = getattr(getattr(self._km, "provisioner", None), "process", None)
        if process is None:
            return
        self._process_watch = ProcessWatch(process, self._process_exited)

    def _unwatch_process(self) -> None:
        if self._process_watch is not None:
            self._process_watch.close()
            self._process_watch = None

    def _process_exited(self) -> None:
        self._unwatch_process()
        if self._expect_exit:
            return
        process = getattr(getattr(self._km, "provisioner", None), "process", None)
        oom_kills = cgroups.oom_kills(self.cgroup)
        oom_killed, self._oom_kills = oom_kills > self._oom_kills, oom_kills
        cause = exit_cause(process.poll() if process is not None else None, self.limits, oom_killed)
        log.warning("%s kernel process exited: %s", self.language, cause)
        if self.state in ("starting", "restarting"):
            # Not a death: a start that failed. _wait_ready raises it with the reason (no restart from here:
            # the pool decides whether to try again).
            self._exit_cause = cause
            self._fail_pending("died", cause)
            return
        self.death_cause = cause
        self._fail_pending("died", cause)
        self._set_state("dead", cause)
        if self._on_death is not None:
            self._death_task = asyncio.create_task(self._on_death(self))

    def _fail_pending(self, status: str, cause: str | None = None) -> None:
        self._executions.fail_all(status, {"cause": cause} if cause else {})

    async def _end_descendants(self) -> None:
        """Kill every process the kernel started (detached ones included) before the kernel itself goes:
        jupyter_client kills only the process group, which a `setsid` process has left."""
        if (pid := self.pid()) is not None:
            await asyncio.to_thread(launcher.kill_descendants, pid)

    async def restart(self, reason: str = "interrupted") -> None:
        """Restart the process; runs in flight end with `reason`. Keeps connection paths. A kernel whose
        start failed (its sockets, context and stderr are closed) starts afresh instead."""
        if self._km is None:
            await self.start()
            return
        self._expect_exit = True
        self._unwatch_process()
        self._fail_pending(reason)
        # A try after a failed start is a start again, not news (no "restarting" line in the editors).
        self._set_state("starting" if self._quietly_dead else "restarting")
        self._quietly_dead = False
        if self._stderr is not None:
            self._stderr.mark()
        self._exit_cause = None
        try:
            await self._end_descendants()
            await self._km.restart_kernel(now=True)
        except Exception as exc:
            self._set_state("dead", f"could not restart: {exc}")
            raise KernelStartError(f"The {self.language} kernel could not restart: {exc}") from exc
        finally:
            self._expect_exit = False
        self._watch_process()
        try:
            await self._wait_ready()
        except KernelStartError as exc:
            self._failed_quietly(exc)
            raise
        self.started_at = time.monotonic()
        self._set_state("idle")

    async def _kill(self) -> None:
        self._expect_exit = True
        self._unwatch_process()
        self._fail_pending("died")
        if self._router is not None:
            self._router.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._router
            self._router = None
        if self._stdin_watch is not None:
            await self._stdin_watch.close()
            self._stdin_watch = None
        if self._kc is not None:
            self._kc.stop_channels()
            self._kc = None
        if self._km is not None:
            with contextlib.suppress(Exception):
                await self._end_descendants()
            with contextlib.suppress(Exception):
                await self._km.shutdown_kernel(now=True)
            with contextlib.suppress(Exception):
                await self._km._async_cleanup_resources()
        if self._context is not None:
            with contextlib.suppress(Exception):
                self._context.destroy(linger=0)  # closes what is left (no send waits: linger 0)
            self._context = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        if self._lifeline is not None:
            for fd in self._lifeline:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._lifeline = None
        with contextlib.suppress(OSError):
            self._runtime_dir.rmdir()  # empty once jupyter_client removed the connection file and sockets
        await cgroups.remove_when_empty(self.cgroup)
        self.cgroup = None
        self._km = None  # its sockets and launch arguments (the stderr descriptor) are gone: never reused

    async def shutdown(self) -> None:
        await self._kill()
        self._set_state("stopped")

    async def interrupt(self) -> None:
        if self._km is not None and self.state not in ("dead", "stopped"):
            try:
                await self._km.interrupt_kernel()
            except zmq_again():  # a kernel interrupted by message whose control queue is full
                log.warning("the %s kernel's interrupt could not be sent: it reads nothing", self.language)

    def pid(self) -> int | None:
        process = getattr(getattr(self._km, "provisioner", None), "process", None)
        return process.pid if process is not None else None

    def calls_path(self) -> str | None:
        """In its runtime directory, beside its zmq sockets (in the sandbox too), when it is on unix sockets."""
        if self._km is None or self._km.transport != "ipc":
            return None
        return str(self._runtime_dir / "calls")

    # ---- execution ---------------------------------------------------------------------------------

    def _register(self, msg_id: str, sink: ExecutionSink | None) -> Pending:
        return self._executions.register(msg_id, sink)

    async def execute(
        self,
        code: str,
        sink: ExecutionSink | None,
        *,
        allow_stdin: bool = False,
        silent: bool = False,
        user_expressions: dict[str, str] | None = None,
    ) -> ExecuteReply:
        return await self.submit(code, sink, allow_stdin=allow_stdin, silent=silent, user_expressions=user_expressions)

    def submit(
        self,
        code: str,
        sink: ExecutionSink | None,
        *,
        allow_stdin: bool = False,
        silent: bool = False,
        user_expressions: dict[str, str] | None = None,
    ) -> asyncio.Future[ExecuteReply]:
        """Send an execute request now (no task, no await in between); the future resolves with the
        reply once the kernel is idle again, or with "died"/"interrupted"."""
        if self._kc is None or self.state in ("dead", "stopped", "restarting"):
            raise KernelDied(f"The {self.language} kernel is not running")
        try:
            msg_id = self._kc.execute(
                code,
                silent=silent,
                store_history=not silent,
                user_expressions=user_expressions or {},
                allow_stdin=allow_stdin,
                stop_on_error=False,
            )
        except zmq_again():
            raise KernelDied(
                f"The {self.language} kernel is not taking requests: it has not read the ones before "
                "(stopped or stuck). Interrupt or restart it."
            ) from None
        # Registered before any await: the router cannot see this msg_id's messages earlier.
        pending = self._register(msg_id, sink)
        self._sent("shell")
        self._executions.forget_when_done(msg_id)
        return pending.done

    def send_comm(self, msg_type: str, content: dict[str, Any]) -> asyncio.Future[ExecuteReply]:
        """Send a comm_open or comm_msg of the server's own now (as `submit`); see KernelBackend."""
        if self._kc is None or self.state in ("dead", "stopped", "restarting"):
            raise KernelDied(f"The {self.language} kernel is not running")
        message = self._kc.session.msg(msg_type, content)
        try:
            self._kc.shell_channel.send(message)
        except zmq_again():
            raise KernelDied(f"The {self.language} kernel is not taking requests") from None
        msg_id = message["header"]["msg_id"]
        pending = self._executions.register(msg_id, None, comm=True)
        self._sent("shell")
        self._executions.forget_when_done(msg_id)
        return pending.done

    # ---- the router --------------------------------------------------------------------------------

    async def _route(self) -> None:
        """The router: a reader callback on each channel's zmq descriptor drains that socket and routes
        every message; this task only holds the readers for the kernel's lifetime."""
        import zmq

        kc = self._kc
        assert kc is not None
        loop = asyncio.get_running_loop()
        self._drains = {}
        fds = []
        for name, channel in (("iopub", kc.iopub_channel), ("shell", kc.shell_channel), ("stdin", kc.stdin_channel)):
            # A plain (non-asyncio) view of the socket: non-blocking reads without a Future per message.
            sock = zmq.Socket.shadow(channel.socket.underlying)
            drain = self._make_drain(name, sock, kc.session)
            self._drains[name] = drain
            fd = sock.getsockopt(zmq.FD)
            loop.add_reader(fd, drain)
            fds.append(fd)
            drain()  # anything that arrived before the reader was registered
        try:
            await loop.create_future()  # until cancelled
        finally:
            for fd in fds:
                loop.remove_reader(fd)
            self._drains = {}

    def _make_drain(self, name: str, sock: zmq.Socket, session: Any) -> Callable[[], None]:
        import zmq

        def drain() -> None:
            # zmq's descriptor is edge-triggered: read until the socket says nothing is left.
            while sock.getsockopt(zmq.EVENTS) & zmq.POLLIN:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    return
                except zmq.ZMQError:
                    log.exception("reading the %s channel failed", name)
                    return
                try:
                    _idents, parts = session.feed_identities(frames)
                    self._dispatch(name, deserialize(session, parts))
                except Exception:
                    log.exception("routing a %s message failed", name)

        return drain

    def _sent(self, channel: str) -> None:
        """After a send on a socket, zmq may have consumed its descriptor's read edge: check again soon."""
        drain = self._drains.get(channel)
        if drain is not None:
            asyncio.get_running_loop().call_soon(drain)

    def _dispatch(self, channel: str, msg: dict[str, Any]) -> None:
        header = msg.get("header", {})
        content = msg.get("content", {})
        if self._executions.route(channel, header.get("msg_type", ""), content, msg.get("parent_header", {}), header):
            return
        # Not an execution of ours (another client's): its status is still the kernel's.
        if channel == "iopub" and header.get("msg_type") == "status":
            state = content.get("execution_state")
            if state in ("busy", "idle") and self.state in ("busy", "idle"):
                self._set_state(state)

    def _spawn_input(self, sink: ExecutionSink, content: dict[str, Any], _header: dict[str, Any]) -> None:
        task = asyncio.create_task(self._answer_input(sink, content))
        self._input_tasks.add(task)
        task.add_done_callback(self._input_tasks.discard)

    async def _answer_input(self, sink: ExecutionSink, content: dict[str, Any]) -> None:
        try:
            value = await sink.on_input(str(content.get("prompt", "")), bool(content.get("password")))
        except Exception:
            log.exception("asking the editor for input failed")
            value = None
        if self._kc is None:
            return
        if value is None:
            # The user cancelled: interrupting ends input() with KeyboardInterrupt, as Ctrl-C would.
            await self.interrupt()
        else:
            try:
                self._kc.input(value)
            except zmq_again():
                log.warning("the answer to input() could not be sent: the %s kernel reads nothing", self.language)
                return
            self._sent("stdin")
