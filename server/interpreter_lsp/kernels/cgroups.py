"""cgroup v2 limits over a kernel's whole process tree, where the server runs in a cgroup delegated to it.

rlimits (launcher.py) bound each process; a cgroup bounds the tree: `memory.max` (all its memory, the OOM
killer ends a process of it past that, and `memory.events` says so), `pids.max` (all its processes and
threads, counted for this kernel only, root included). Used only when all of this holds (`delegation()`):

- the unified (v2) hierarchy is mounted and this process is in it (`0::/path` in /proc/self/cgroup);
- its cgroup offers the `memory` and `pids` controllers (`cgroup.controllers`);
- this process may create cgroups there and move processes (the directory, `cgroup.subtree_control` and
  `cgroup.procs` are writable: the cgroup is delegated, e.g. `systemd-run --user --scope -p Delegate=yes`);
- this server is the only process in it: cgroup v2 enables controllers for the children of a cgroup only
  when it has no processes of its own, and the server does not move an editor's processes around.

Then the server moves itself into a leaf (`ilsp-server`), enables the controllers for the children, and
makes one child per kernel (`ilsp-kernel-…`) with the limits; the kernel's launcher joins it before it
starts anything (`launcher.py --join`). Otherwise the reason is kept, and `interpreter.status` says it.
Standard library only; every path comes from the `Proc`/`Path` given, so the decision can be checked on a
directory laid out like a cgroup tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from .launcher import Limits

log = logging.getLogger(__name__)

NEEDED = ("memory", "pids")
SERVER_LEAF = "ilsp-server"
KERNEL_PREFIX = "ilsp-kernel-"
_MIB = 1024 * 1024


@dataclass(frozen=True)
class Delegation:
    """Where kernels' cgroups go (`root`, None when not used) or why not (`reason`)."""

    root: Path | None
    reason: str = ""


def _v2_mount(mountinfo: str) -> tuple[Path, str] | None:
    """Where the unified hierarchy (fstype cgroup2) is mounted, and which of its cgroups is mounted there
    (`/`, or a subtree in some containers), from /proc/self/mountinfo's text."""
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if sep and right.split()[:1] == ["cgroup2"] and len(fields) >= 5:
            return Path(fields[4].replace("\\040", " ")), fields[3]
    return None


def _v2_path(cgroup: str) -> str | None:
    """This process's cgroup in the unified hierarchy ("0::/path"), from /proc/self/cgroup's text."""
    for line in cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:].strip()
    return None


def decide(mountinfo: str, cgroup: str, pid: int) -> Delegation:
    """Whether kernels can get cgroups of their own here, and where (see the module's docstring)."""
    mounted = _v2_mount(mountinfo)
    path = _v2_path(cgroup)
    if mounted is None or path is None:
        return Delegation(None, "no cgroup v2 hierarchy (cgroup v1 or none)")
    mount, subtree = mounted
    if path.endswith(" (deleted)"):
        return Delegation(None, "this process's cgroup was removed")
    relative = os.path.relpath(path, subtree)
    if relative.startswith(".."):
        return Delegation(None, f"this process's cgroup {path} is not under the mounted {subtree}")
    here = mount if relative == "." else mount / relative
    if here.name == SERVER_LEAF:  # moved there by an earlier call (or another server's tree)
        here = here.parent
    try:
        controllers = (here / "cgroup.controllers").read_text().split()
        procs = (here / "cgroup.procs").read_text().split()
    except OSError as error:
        return Delegation(None, f"cannot read the cgroup {here}: {error.strerror or error}")
    missing = [c for c in NEEDED if c not in controllers]
    if missing:
        return Delegation(
            None,
            f"the cgroup {path} (in {mount}) does not offer {' and '.join(missing)} "
            f"(only: {' '.join(controllers) or 'none'})",
        )
    writable = all(os.access(here / name, os.W_OK) for name in ("", "cgroup.subtree_control", "cgroup.procs"))
    if not writable:
        return Delegation(None, f"the cgroup {path} is not delegated to this user (not writable)")
    if any(p != str(pid) for p in procs):
        return Delegation(None, f"the cgroup {path} holds other processes than the server")
    return Delegation(here)


def take(root: Path) -> None:
    """Move this process into `root/ilsp-server` and enable the controllers for `root`'s children. Raises
    OSError when the cgroup refuses."""
    leaf = root / SERVER_LEAF
    leaf.mkdir(exist_ok=True)
    (leaf / "cgroup.procs").write_text("0")
    enabled = (root / "cgroup.subtree_control").read_text().split()
    wanted = " ".join(f"+{c}" for c in NEEDED if c not in enabled)
    if wanted:
        (root / "cgroup.subtree_control").write_text(wanted)
    for stale in root.glob(KERNEL_PREFIX + "*"):  # left by a server killed before it could remove them
        with contextlib.suppress(OSError):
            stale.rmdir()  # fails (EBUSY) while processes are in it


_state: Delegation | None = None


def delegation() -> Delegation:
    """This server's decision, taken once (moving the server is done once)."""
    global _state
    if _state is None:
        if not os.path.exists("/proc/self/cgroup"):
            _state = Delegation(None, "no cgroups on this system")
            return _state
        try:
            decided = decide(
                Path("/proc/self/mountinfo").read_text(), Path("/proc/self/cgroup").read_text(), os.getpid()
            )
            if decided.root is not None:
                take(decided.root)
        except OSError as error:
            decided = Delegation(None, f"the cgroup refused: {error}")
        _state = decided
        log.info("kernel cgroups: %s", decided.root or f"off ({decided.reason})")
    return _state


def create(root: Path, name: str, limits: Limits) -> Path:
    """A kernel's cgroup under `root` with `limits` (the processes limit counts the kernel's tree only)."""
    path = root / f"{KERNEL_PREFIX}{name}"
    path.mkdir()
    try:
        if limits.memory_mib:
            (path / "memory.max").write_text(str(limits.memory_mib * _MIB))
            if (path / "memory.swap.max").exists():  # past memory.max it is ended, not swapped out
                (path / "memory.swap.max").write_text("0")
        if limits.processes:
            (path / "pids.max").write_text(str(limits.processes))
    except OSError:
        remove(path)
        raise
    return path


def oom_kills(path: Path | None) -> int:
    """How many processes of this cgroup the OOM killer ended (memory.events), 0 if unknown."""
    if path is None:
        return 0
    try:
        for line in (path / "memory.events").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def remove(path: Path | None) -> None:
    """Remove a kernel's cgroup once its processes are gone (rmdir of a cgroup with processes fails)."""
    if path is not None:
        _removed(path)


def _removed(path: Path, kill: bool = False) -> bool:
    """rmdir the cgroup (a syscall on cgroupfs, no disk I/O); False while it has processes. `kill`: on
    failure, end what is left (cgroup.kill)."""
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        if kill:
            with contextlib.suppress(OSError):
                (path / "cgroup.kill").write_text("1")
        return False
    return True


# How long a kernel's end waits for the processes of its cgroup to be gone, so the cgroup can go with it.
EMPTY_WAIT = 10.0


async def remove_when_empty(path: Path | None, wait: float = EMPTY_WAIT) -> None:
    """Remove a kernel's cgroup: its processes were sent SIGKILL, but a killed process stays a member until
    it has exited and been reaped (in a sandbox, by bwrap's init), which on a busy machine takes a moment.
    `cgroup.kill` (Linux 5.14+) ends whatever is left; then the cgroup goes as soon as it is empty, or is
    left behind (and removed as stale by the next server) after `wait` seconds."""
    if path is None or _removed(path, kill=True):
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    delay = 0.005
    while loop.time() < deadline:
        # Not a hot path (a kernel's end): a short bounded wait, backing off, rather than an inotify watch
        # of cgroup.events for the few milliseconds a reap takes.
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.2)
        if _removed(path):
            return
    log.info("cgroup %s still has processes after %g s: left for the next start to remove", path, wait)
