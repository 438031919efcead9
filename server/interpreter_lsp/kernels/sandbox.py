"""The bubblewrap sandbox for kernels: the command line that starts a kernel inside it.

Inside: the file system is read-only except the workspace and the kernel's own runtime directory (the 0700
directory holding its IPC sockets and connection file; other kernels' directories and the kernelspecs, in
the server's runtime directory, are out of sight); /tmp is private; home directories are empty
except what the kernel needs to start; no network unless allowed (the kernel is reached through its
unix sockets, which need none), and other daemons' sockets under /run are hidden; its own PID namespace,
so it cannot see or signal the server; it dies when the server dies.

Kernel code must not loosen its own sandbox, or write anything that runs outside it later: what git, an
editor, direnv or this server reads or runs from the workspace without the user deciding is mounted
read-only on top of the workspace (readonly.py has the list and the reasons). It holds no keyring (the
launcher joins a new session keyring and loads seccomp.py's filter: keyctl, add_key, request_key fail), and
no descriptor of the server's (the kernel's stderr is its own file, kernel.py; everything else is closed).

Interrupts: jupyter_client interrupts a kernel with SIGINT to its whole process group, which includes
bwrap itself, and bwrap dies of SIGINT (taking the kernel with it, through --die-with-parent). So bwrap
starts with SIGINT ignored (`env --ignore-signal=INT`) and the kernel with it restored
(`env --default-signal=INT`): the interrupt reaches the kernel only.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .. import code_cache
from . import launcher as launcher_module
from . import seccomp
from .kernel import KernelStartError
from .readonly import protected_binds, refusal

__all__ = [
    "SandboxConfig",
    "SandboxRefused",
    "bwrap_available",
    "counts_processes_apart",
    "protected_binds",
    "wrap_command",
]

# ipykernel's parent poller exits as soon as this PID is not its parent, which under --unshare-pid is
# always. --die-with-parent does the same job for the sandbox.
_PARENT_PID_VARIABLE = "JPY_PARENT_PID"
_OFF_HINT = 'or set interpreter.sandbox to "off"'
_SHARED_HOMES = ("/home", "/root")
_TEMP_DIRS = ("/tmp", "/var/tmp")
# Unix sockets ignore network namespaces and read-only mounts: a daemon's socket stays reachable unless
# hidden. Without network all of /run is replaced (database, Docker, D-Bus, agent sockets); with network
# /run stays (DNS often lives there) but per-user sockets and container daemons are hidden.
_RUN_DIR = "/run"
_USER_RUN_DIR = "/run/user"
_DAEMON_SOCKETS = (
    "/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/run/podman/podman.sock",
    "/run/snapd.socket",
)
# What the kernel keyrings hold, listed (descriptions, not payloads): out of sight like the keyrings.
_KEY_LISTS = ("/proc/keys", "/proc/key-users")


class SandboxRefused(KernelStartError):
    """The sandbox cannot protect this workspace (the sentence says why and what to do): no kernel starts."""


@dataclass(frozen=True)
class SandboxConfig:
    workspace: Path
    runtime_dir: Path
    network: bool = False
    extra_ro_binds: tuple[Path, ...] = ()
    home_keep: tuple[str, ...] = ()  # paths relative to $HOME to keep readable, e.g. ".ipython"
    read_only: tuple[Path, ...] = ()  # files the kernel must not change even inside the workspace (user config)


@functools.lru_cache(maxsize=1)
def counts_processes_apart() -> bool:
    """Whether RLIMIT_NPROC counts a sandboxed kernel's processes apart from the user's others: bubblewrap
    run by an unprivileged user (not setuid) puts the kernel in a user namespace of its own, and Linux 5.14
    and later count processes per user namespace (before: per user, everywhere)."""
    if os.geteuid() == 0:
        return False  # root's bubblewrap makes no user namespace (and root is not limited anyway)
    bwrap = shutil.which("bwrap")
    try:
        if bwrap is None or os.stat(bwrap).st_mode & 0o4000:
            return False
        major, minor = (int(part) for part in os.uname().release.split(".")[:2])
    except (OSError, ValueError):
        return False
    return (major, minor) >= (5, 14)


def bwrap_available() -> str | None:
    """None if bubblewrap can sandbox kernels here, else what went wrong and what to do (checked once)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return f"bubblewrap (bwrap) is not installed: apt-get install bubblewrap, {_OFF_HINT}"
    env_command = shutil.which("env") or "/usr/bin/env"
    probe = [
        env_command,
        "--ignore-signal=INT",
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-pid",
        "--unshare-net",
        "--die-with-parent",
        "--",
        env_command,
        "--default-signal=INT",
        "true",
    ]
    try:
        result = subprocess.run(probe, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap (bwrap) could not be started: {error}; {_OFF_HINT}"
    if result.returncode == 0:
        return None
    detail = (result.stderr or result.stdout).strip().splitlines()
    reason = detail[-1] if detail else f"exit status {result.returncode}"
    if "--ignore-signal" in reason or "--default-signal" in reason:
        return f"the env command is too old to run the sandbox (needs GNU coreutils 8.31 or newer), {_OFF_HINT}"
    return (
        f"bubblewrap (bwrap) cannot create a sandbox here ({reason}). Unprivileged user namespaces may be "
        f"disabled (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 an AppArmor profile for bwrap), "
        f"{_OFF_HINT}"
    )


def wrap_command(
    argv: list[str], env: Mapping[str, str], config: SandboxConfig, launcher: list[str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """The command line that runs `argv` (a kernel) inside the sandbox, under `launcher` (launcher.py's
    command prefix; a plain one when not given: the launcher is what drops the keyring), and the
    environment to start it with."""
    if not launcher:
        launcher = launcher_module.command(launcher_module.Limits())
    end = len(launcher) - 1 - launcher[::-1].index("--") if "--" in launcher else len(launcher)
    launcher = [*launcher[:end], *seccomp.launcher_arguments(), *launcher[end:]]
    bwrap = shutil.which("bwrap") or "bwrap"
    env_command = shutil.which("env") or "/usr/bin/env"
    workspace = os.path.realpath(config.workspace)
    runtime_dir = os.path.realpath(config.runtime_dir)
    home = os.path.realpath(env.get("HOME") or os.path.expanduser("~"))
    if (problem := refusal(config.workspace, home, env)) is not None:
        raise SandboxRefused(problem)

    hidden = _hidden_dirs(home)
    args = [env_command, "--ignore-signal=INT", bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for key_list in _KEY_LISTS:
        if os.path.exists(key_list):
            args += ["--ro-bind", "/dev/null", key_list]
    run_dirs = (_USER_RUN_DIR,) if config.network else (_RUN_DIR,)
    # tmpfs first: a later bind of a path under /tmp or a home directory must land on top of it.
    for directory in (*_TEMP_DIRS, *run_dirs, *hidden):
        if os.path.isdir(directory) and not os.path.islink(directory):
            args += ["--tmpfs", directory]
    if config.network:
        for socket_path in _DAEMON_SOCKETS:
            if os.path.exists(socket_path):
                args += ["--ro-bind", "/dev/null", socket_path]
    covered = (*_TEMP_DIRS, *run_dirs, *hidden)
    readable = _paths_the_kernel_reads(argv, env, config, home)
    if launcher:
        readable += [
            p
            for p in _paths_the_kernel_reads(launcher[:1], env, SandboxConfig(workspace, runtime_dir), home)
            if p not in readable
        ]
        script = next((a for a in launcher[1:] if a.endswith(".py")), None)
        if script is not None:
            readable.append(os.path.realpath(script))
    for path in readable:
        if _under_any(path, covered) and not _under_any(path, (workspace, runtime_dir)):
            args += ["--ro-bind-try", path, path]
    args += ["--bind", workspace, workspace, "--bind", runtime_dir, runtime_dir]
    # After the workspace's bind, on top of it: what kernel code must not change.
    read_only = (*config.read_only, *_server_code_dir(workspace))
    args += protected_binds(config.workspace, read_only, env=env, interpreters=_programs(argv, env))
    args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not config.network:
        args.append("--unshare-net")
    args += ["--die-with-parent", "--unsetenv", _PARENT_PID_VARIABLE, "--chdir", workspace]
    if os.geteuid() == 0:
        args += ["--cap-drop", "ALL"]  # root inside would otherwise keep every capability
    args += ["--", env_command, "--default-signal=INT", *(launcher or []), *argv]
    kernel_env = {name: value for name, value in env.items() if name != _PARENT_PID_VARIABLE}
    return args, kernel_env


def _server_code_dir(workspace: str) -> tuple[Path, ...]:
    """The server's cache of generated code (code_cache.py) when it is inside the workspace (XDG_CACHE_HOME
    there): the next server start runs what it holds, outside any sandbox, so it is bound read-only; it is
    made first if missing (a path that does not exist cannot be bound, and kernel code could make it)."""
    cached = code_cache.cache_file()
    if cached is None or not _under_any(os.path.realpath(directory := cached.parent), (workspace,)):
        return ()
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise SandboxRefused(
            f"The sandbox cannot protect {directory}, the server's cache of generated code, which is inside the "
            f"workspace (XDG_CACHE_HOME) and could not be made ({exc.strerror or exc}): code in the sandbox could "
            "write code the next server start runs. Point XDG_CACHE_HOME outside the workspace, or set "
            'interpreter.sandbox to "off".'
        ) from None
    return (directory,)


def _programs(argv: list[str], env: Mapping[str, str]) -> list[str]:
    """The kernel's program as a path (a bare name is looked up on the kernel's PATH)."""
    program = argv[0] if argv else ""
    if program and not os.path.isabs(program):
        program = shutil.which(program, path=env.get("PATH")) or ""
    return [program] if program else []


def _hidden_dirs(home: str) -> list[str]:
    dirs: list[str] = []
    for candidate in (home, *_SHARED_HOMES):
        if candidate in ("/", "") or candidate in dirs or _under_any(candidate, tuple(dirs)):
            continue
        if os.path.isdir(candidate):
            dirs.append(candidate)
    return dirs


def _paths_the_kernel_reads(argv: list[str], env: Mapping[str, str], config: SandboxConfig, home: str) -> list[str]:
    """The interpreter and its environment (venv, base install), PYTHONPATH, and what the user listed."""
    paths: list[str] = []

    def add(path: str) -> None:
        real = os.path.realpath(path)
        for candidate in (path, real):
            if candidate not in paths and os.path.exists(candidate):
                paths.append(candidate)

    program = argv[0] if argv else ""
    if program and not os.path.isabs(program):
        program = shutil.which(program, path=env.get("PATH")) or ""
    if program:
        for executable in (program, os.path.realpath(program)):
            prefix = os.path.dirname(os.path.dirname(executable))  # .../bin/python -> ...
            if prefix not in ("/", "/usr", ""):
                add(prefix)
    for entry in env.get("PYTHONPATH", "").split(os.pathsep):
        if entry and os.path.isabs(entry):
            add(entry)
    for keep in config.home_keep:
        add(os.path.join(home, keep))
    for extra in config.extra_ro_binds:
        add(str(extra))
    return paths


def _under_any(path: str, bases: tuple[str, ...]) -> bool:
    return any(path == base or path.startswith(base.rstrip("/") + "/") for base in bases)
