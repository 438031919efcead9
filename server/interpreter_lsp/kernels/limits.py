"""A local kernel's resource limits in words: what is in force (for `interpreter.status`), and why a run
failed or a kernel ended when it reached one (each names its setting, so the user knows what to change).

The limits themselves are set by launcher.py (rlimits) and, where a delegated cgroup v2 tree allows it, by
cgroups.py (the whole process tree)."""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .launcher import Limits

# An errno that says "no more processes" (EAGAIN from fork/clone), and where it is raised from: a
# BlockingIOError elsewhere (a non-blocking socket) is not a process limit.
_FORK_WORDS = ("fork", "_execute_child", "spawn", "Popen", "clone")


def process_limit_ignored() -> str | None:
    """Why RLIMIT_NPROC does not hold for this server's kernels, or None when it does: Linux ignores it for
    the root user and for a process with CAP_SYS_RESOURCE or CAP_SYS_ADMIN."""
    if not hasattr(os, "getuid"):
        return None
    if os.getuid() == 0:
        return "the server runs as root, and Linux ignores RLIMIT_NPROC for root"
    try:
        with open("/proc/self/status") as handle:
            effective = next((line.split()[1] for line in handle if line.startswith("CapEff:")), "0")
    except (OSError, StopIteration):
        return None
    caps = int(effective, 16)
    if caps & (1 << 24) or caps & (1 << 21):  # CAP_SYS_RESOURCE, CAP_SYS_ADMIN
        return "the server has CAP_SYS_RESOURCE or CAP_SYS_ADMIN, and Linux then ignores RLIMIT_NPROC"
    return None


def describe(limits: Limits, cgroup: Path | None = None, no_cgroup: str = "") -> str:
    """What holds, for status: e.g. "rlimits, each process: memory 512 MiB, CPU 8 s, processes +512 (no
    cgroup: <why>)"; `no_cgroup` says why the kernel has no cgroup of its own."""
    parts = [f"memory {limits.memory_mib} MiB" if limits.memory_mib else "memory none"]
    parts.append(f"CPU {limits.cpu_seconds} s" if limits.cpu_seconds else "CPU none")
    if not limits.processes:
        parts.append("processes none")
    elif cgroup is not None:
        parts.append(f"processes {limits.processes}")
    elif limits.processes_in_sandbox:
        parts.append(f"processes {limits.processes} in the sandbox")
    elif why := process_limit_ignored():
        parts.append(f"processes NOT ENFORCED ({why}; no delegated cgroup)")
    else:
        parts.append(f"processes +{limits.processes}")
    if cgroup is None:
        return "rlimits, each process: " + ", ".join(parts) + (f" (no cgroup: {no_cgroup})" if no_cgroup else "")
    return f"cgroup {cgroup}, the whole process tree: " + ", ".join(parts) + " (and rlimits, each process)"


def exit_cause(returncode: int | None, limits: Limits, oom_killed: bool = False) -> str:
    """Why a kernel process ended, in words for the user: a limit it reached names its setting.
    `oom_killed`: its cgroup says the kernel's OOM killer ended a process of it (not a guess then)."""
    if returncode is None or returncode >= 0:
        return "the kernel process exited" + (f" (exit code {returncode})" if returncode else "")
    number = -returncode
    if number == signal.SIGKILL and oom_killed:  # memory.events counts OOM kills of any kind
        limit = (
            f"limit {limits.memory_mib} MiB for the whole kernel, kernel.memoryLimit"
            if limits.memory_mib
            else "the machine's memory"
        )
        return f"the kernel was killed (SIGKILL): it ran out of memory ({limit})"
    if number == signal.SIGKILL and limits.memory_mib:
        return (
            f"the kernel was killed (SIGKILL), most likely it ran out of memory "
            f"(limit {limits.memory_mib} MiB, kernel.memoryLimit)"
        )
    if number == getattr(signal, "SIGXCPU", -1):
        return f"the kernel used up its CPU time (limit {limits.cpu_seconds} s, kernel.cpuTimeLimit)"
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    return f"the kernel process was killed by {name}"


def out_of_memory(limits: Limits) -> str:
    """Said when code in a kernel failed to allocate memory (MemoryError)."""
    if limits.memory_mib:
        return f"the kernel ran out of memory (limit {limits.memory_mib} MiB, kernel.memoryLimit)"
    return "the kernel ran out of memory"


def limit_reached(limits: Limits, error: Mapping[str, Any], whole_tree: bool = False) -> str | None:
    """What to say when a run failed with `error` (an execute reply's ename/evalue/traceback) because a
    limit was reached; None when the error is not one of those. `whole_tree`: the kernel has a cgroup."""
    ename = str(error.get("ename", ""))
    evalue = str(error.get("evalue", ""))
    if ename.endswith("MemoryError"):  # numpy's is _ArrayMemoryError
        return out_of_memory(limits)
    if not limits.processes:
        return None
    traceback = "\n".join(str(line) for line in error.get("traceback") or [])
    no_process = ename == "BlockingIOError" and "Errno 11" in evalue and any(w in traceback for w in _FORK_WORDS)
    no_thread = ename == "RuntimeError" and "can't start new thread" in evalue
    if no_process or no_thread:
        if whole_tree:
            limit = f"{limits.processes} processes and threads in the kernel"
        elif limits.processes_in_sandbox:
            limit = f"{limits.processes} processes and threads in the sandbox"
        else:
            limit = f"{limits.processes} more than you ran when it started"
        what = "process" if no_process else "thread"
        return f"the kernel could not start another {what}: it reached its process limit ({limit}, kernel.processLimit)"
    return None
