"""The kernel launcher: the process every local kernel runs under (POSIX), and the walk that ends a kernel's
whole process tree.

Run as a script (`python -I -S launcher.py [--memory MiB] [--cpu S] [--processes N] -- argv...`), with the
standard library only (inside the sandbox the server's packages may be out of sight), it

- with `--join DIR`, first moves itself into that cgroup (cgroups.py made it, with the limits of the whole
  tree), so everything it starts is in it; with `--exec` as well, it then only runs the command in its place
  (outside the sandbox: the sandbox's /sys is read-only, so the join is done before bubblewrap);

- with `--no-keyring NR:HEX` (the sandbox: seccomp.py builds it), joins a new, empty session keyring (keyctl,
  system call NR) and loads the seccomp filter HEX on itself, so that neither the kernel nor anything it
  starts can reach a kernel keyring (keyctl, add_key, request_key fail with EPERM); a launcher that cannot
  load the filter does not start the kernel;

- applies the resource limits to itself, so the kernel and everything it starts inherit them:
  RLIMIT_DATA for memory (not RLIMIT_AS: a kernel's threads reserve far more address space than they use),
  RLIMIT_CPU (CPU seconds of each process over its life), RLIMIT_NPROC (processes of this user: Linux counts
  them per user, and ignores the limit for root or with CAP_SYS_RESOURCE). The hard limits are lowered as
  well: kernel code cannot raise a soft limit past its hard one, nor raise a hard one (unless root);
- makes itself a child subreaper (Linux): a process the kernel starts and detaches (`setsid`, a double
  fork) is re-parented to the launcher, not to init, so it stays in the kernel's tree;
- starts the kernel as its child and waits; when the kernel exits, or the server that started the launcher
  exits (watched on a pidfd), every process left in its tree is stopped and killed, and the launcher exits
  the way the kernel did (same exit code, or the same signal), so the server can tell why it ended;
- with `--parent PID` (the server's pid: outside the sandbox), starts nothing when its parent is no longer
  that process: the server died while the launcher started (its parent is then init or a subreaper, which
  the launcher would otherwise have watched instead, and the kernel would have outlived the server);
- with `--lifeline FD`, an inherited descriptor: the read end of a pipe whose only write end the server holds,
  which reads as ended (EOF) once the server has exited, however it exited and whatever PID namespace lies
  between (bubblewrap passes it through): the launcher starts nothing when it has ended already (the server
  died before bubblewrap could set --die-with-parent, which then never fires), and ends the kernel's tree when
  it ends later. The kernel itself does not inherit it.

SIGINT (an interrupt: jupyter_client signals the whole process group) is ignored here and left to the
kernel. The server calls `kill_descendants` itself before it kills or restarts a kernel: jupyter_client
kills the process group with SIGKILL, which would take the launcher before it could clean up.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import sys
from dataclasses import dataclass

_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_KEYCTL_JOIN_SESSION_KEYRING = 1
_MIB = 1024 * 1024
_GONE = "interpreter-lsp launcher: the server that started this kernel has exited; the kernel is not started\n"


@dataclass(frozen=True)
class Limits:
    """What a kernel may use (None: no limit): kernel.memoryLimit, kernel.cpuTimeLimit, kernel.processLimit."""

    memory_mib: int | None = None
    cpu_seconds: int | None = None
    processes: int | None = None  # the setting: how many the kernel may add to...
    processes_in_use: int = 0  # ...the processes and threads of this user when it started (RLIMIT_NPROC)
    processes_in_sandbox: bool = False  # counted in the sandbox's user namespace only (in_use is 0 then)

    def arguments(self) -> list[str]:
        out: list[str] = []
        for flag, value in (
            ("--memory", self.memory_mib),
            ("--cpu", self.cpu_seconds),
            ("--processes", self.processes + self.processes_in_use if self.processes else None),
        ):
            if value:
                out += [flag, str(int(value))]
        return out


def command(
    limits: Limits, cgroup: str | None = None, parent: int | None = None, lifeline: int | None = None
) -> list[str]:
    """The prefix that runs a kernel's command line under the launcher (the server's interpreter, isolated
    mode, no site: nothing of the workspace's or the user's Python set-up is imported by it), in `cgroup`.
    `parent`: the pid the launcher's parent must be (the server's), where the two share a PID namespace.
    `lifeline`: the descriptor (passed to the child as is) that ends when the server does."""
    join = ["--join", cgroup] if cgroup else []
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), *join, *_parent(parent, lifeline),
            *limits.arguments(), "--"]


def join_command(cgroup: str, parent: int | None = None, lifeline: int | None = None) -> list[str]:
    """The prefix that runs a command (bubblewrap) in `cgroup`, in the same process."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), "--join", cgroup, *_parent(parent, lifeline),
            "--exec", "--"]


def _parent(pid: int | None, lifeline: int | None = None) -> list[str]:
    return [*(["--parent", str(pid)] if pid is not None else []),
            *(["--lifeline", str(lifeline)] if lifeline is not None else [])]


def _ended(lifeline: int | None) -> bool:
    """The server's end of the lifeline is closed: the server has exited. The server never writes to it, so
    a lifeline that reads at all has ended (EOF); one that is not a descriptor here counts as ended too."""
    if lifeline is None:
        return False
    # poll, not select: the descriptor keeps the server's number, which may be past select's 1024.
    poller = select.poll()
    poller.register(lifeline, select.POLLIN)
    try:
        return bool(poller.poll(0))
    except OSError:
        return True


def join(cgroup: str) -> None:
    """Move this process into `cgroup` ("0": the writer itself, whatever its PID namespace)."""
    with open(os.path.join(cgroup, "cgroup.procs"), "w") as handle:
        handle.write("0")


def read_whole(path: str) -> bytes | None:
    """A /proc file's content, or None when it cannot be read (the process gone). os.open/os.read, not open():
    a file object costs more than the read, and the lists below are read after every run (file_maps: a
    kernel's ~12 threads, 0.25 ms with file objects against 0.12 ms)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        text = b""
        while chunk := os.read(fd, 1 << 16):
            text += chunk
        return text
    except OSError:
        return None
    finally:
        os.close(fd)


def children_of(pid: int) -> list[int]:
    """The direct children of `pid` (Linux /proc; elsewhere none are known)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        listed = read_whole(f"/proc/{pid}/task/{task}/children")
        with contextlib.suppress(ValueError):
            found.extend([int(child) for child in (listed or b"").split()])  # a whole list, or none of it
    return found


def kill_descendants(root: int) -> list[int]:
    """Stop every descendant of `root` (SIGSTOP: a stopped process cannot fork again while the tree is
    walked), walk until no new one appears, then SIGKILL them all. `root` itself is left alone.
    Returns the pids killed."""
    stopped: list[int] = []
    seen: set[int] = set()
    for _round in range(100):
        fresh = []
        pending = [root]
        while pending:
            for child in children_of(pending.pop()):
                pending.append(child)
                if child not in seen:
                    fresh.append(child)
        if not fresh:
            break
        for pid in fresh:
            seen.add(pid)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
    for pid in stopped:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return stopped


def _limit(resource_module, which: str, value: int | None, hard_margin: int = 0) -> None:
    """Soft limit `value`, hard limit `value + hard_margin` (never above the hard limit we were given)."""
    kind = getattr(resource_module, which, None)
    if value is None or kind is None:
        return
    _soft, hard = resource_module.getrlimit(kind)
    new_hard = value + hard_margin
    if hard != resource_module.RLIM_INFINITY:
        value, new_hard = min(value, hard), min(new_hard, hard)
    try:
        resource_module.setrlimit(kind, (value, new_hard))
    except (ValueError, OSError) as error:
        sys.stderr.write(f"interpreter-lsp launcher: cannot set {which}: {error}\n")


def apply_limits(memory_mib: int | None, cpu_seconds: int | None, processes: int | None) -> None:
    import resource

    _limit(resource, "RLIMIT_DATA", memory_mib * _MIB if memory_mib else None)
    # At the soft CPU limit Linux sends SIGXCPU (said as the CPU limit); at the hard one SIGKILL, which would
    # read as "out of memory": a margin lets SIGXCPU end the kernel first, and still ends one that ignores it.
    _limit(resource, "RLIMIT_CPU", cpu_seconds, hard_margin=5)
    _limit(resource, "RLIMIT_NPROC", processes)


def _become_subreaper() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def drop_keyring(spec: str) -> None:
    """`spec` is "NR:HEX": keyctl's system call number and the seccomp program (struct sock_filter[]).
    Raises OSError when the filter cannot be loaded (the caller must not start the kernel then)."""
    import ctypes

    number, _, program_hex = spec.partition(":")
    program = bytes.fromhex(program_hex)
    libc = ctypes.CDLL(None, use_errno=True)
    ulong = ctypes.c_ulong
    # A new anonymous session keyring: the one inherited from the server's session is left behind. Where
    # keyrings are not available this fails, which is fine: the filter below is the guarantee.
    libc.syscall(ctypes.c_long(int(number)), ulong(_KEYCTL_JOIN_SESSION_KEYRING), ctypes.c_void_p(None))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    # Needed to load a filter without CAP_SYS_ADMIN; bubblewrap has set it already, and it cannot be unset.
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, ulong(1), ulong(0), ulong(0), ulong(0)) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(_PR_SET_SECCOMP, ulong(_SECCOMP_MODE_FILTER), ctypes.byref(fprog), ulong(0), ulong(0)) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


def _watch_parent(expected: int | None = None) -> int | None:
    """A descriptor readable once the process that started us (`expected`, when known) exits (Linux pidfd),
    or None."""
    parent = expected if expected is not None else os.getppid()
    if parent <= 1 or not hasattr(os, "pidfd_open"):
        return None
    try:
        return os.pidfd_open(parent)
    except OSError:
        return None


def _orphaned(expected: int | None) -> bool:
    """The server that started us is gone: our parent is not the pid it gave (re-parented to init or to a
    subreaper when it died)."""
    return expected is not None and os.getppid() != expected


def _wait(child: int, parent_fd: int | None, expected: int | None = None, lifeline: int | None = None) -> int:
    """Reap every child (orphans re-parented here included) until `child` exits; its wait status.
    If the parent exits first (its pidfd, or the lifeline's end), the kernel's whole tree is killed."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    os.set_blocking(wake_read, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    watched = [wake_read] + [fd for fd in (parent_fd, lifeline) if fd is not None]
    parent = expected if expected is not None else os.getppid()
    # Without a pidfd (macOS, Linux before 5.3) the parent is looked at once a second: not a hot path. A
    # parent that is pid 1 is the sandbox's own init (its PID namespace ends with it): nothing to watch.
    timeout = 1.0 if parent_fd is None and parent > 1 else None
    while True:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return 0
            if pid == 0:
                break
            if pid == child:
                return status
        ready, _, _ = select.select(watched, [], [], timeout)
        with contextlib.suppress(OSError):
            while os.read(wake_read, 512):
                pass
        gone = parent_fd in ready if parent_fd is not None else timeout is not None and os.getppid() != parent
        if gone or (lifeline is not None and lifeline in ready):
            kill_descendants(os.getpid())
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)  # where there is no /proc to walk: the kernel at least
            parent_fd, lifeline, timeout, watched = None, None, None, [wake_read]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="launcher")
    parser.add_argument("--memory", type=int, default=None)
    parser.add_argument("--cpu", type=int, default=None)
    parser.add_argument("--processes", type=int, default=None)
    parser.add_argument("--join", default=None)
    parser.add_argument("--exec", action="store_true")
    parser.add_argument("--no-keyring", default=None)
    parser.add_argument("--parent", type=int, default=None)
    parser.add_argument("--lifeline", type=int, default=None)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    if args.join:
        try:
            join(args.join)
        except OSError as error:  # the server counts on the cgroup's limits: never run without them
            sys.stderr.write(f"interpreter-lsp launcher: cannot join the cgroup {args.join}: {error}\n")
            return 126
    if args.exec:
        # bubblewrap's --die-with-parent would watch init: start nothing
        if _orphaned(args.parent) or _ended(args.lifeline):
            sys.stderr.write(_GONE)
            return 1
        try:
            os.execvp(command[0], command)
        except OSError as error:
            sys.stderr.write(f"interpreter-lsp launcher: cannot run {command[0]}: {error}\n")
            return 127
    if args.no_keyring:
        try:
            drop_keyring(args.no_keyring)
        except (OSError, ValueError, AttributeError) as error:  # never run the kernel without the filter
            sys.stderr.write(f"interpreter-lsp launcher: cannot load the seccomp filter (no keyring): {error}\n")
            return 126
    apply_limits(args.memory, args.cpu, args.processes)
    _become_subreaper()
    parent_fd = _watch_parent(args.parent)
    # Looked at once the pidfd is open: a parent that is still ours then is the process the pidfd watches.
    # Inside the sandbox the lifeline says it: the server may have died before bubblewrap set --die-with-parent.
    if _orphaned(args.parent) or _ended(args.lifeline):
        sys.stderr.write(_GONE)
        return 1
    lifeline = None
    if args.lifeline is not None:
        # A low number, for select in _wait, and not inheritable: the kernel does not get it.
        lifeline = os.dup(args.lifeline)
        os.close(args.lifeline)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        for fd in (parent_fd, lifeline):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        # The kernel's parent poller watches us, not the server (we watch the server).
        os.environ["JPY_PARENT_PID"] = str(os.getppid())
        try:
            os.execvp(command[0], command)
        except OSError as error:
            sys.stderr.write(f"interpreter-lsp launcher: cannot run {command[0]}: {error}\n")
            os._exit(127)
    signal.signal(signal.SIGTERM, lambda signum, _frame: os.kill(child, signum))
    status = _wait(child, parent_fd, args.parent, lifeline)
    kill_descendants(os.getpid())
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, 0)[0]:
            pass
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(Exception):
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # end as the kernel did, without a core file
        if number not in (signal.SIGKILL, signal.SIGSTOP):  # these two cannot be caught anyway
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        return 128 + number
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


if __name__ == "__main__":
    sys.exit(main())
