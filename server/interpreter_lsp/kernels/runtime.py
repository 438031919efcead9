"""The server's runtime directory: a 0700 directory under the temporary directory (short enough for unix
socket paths) holding the kernelspecs it writes and, in a subdirectory per kernel, each kernel's connection
file and IPC sockets. It names its owner (the server's pid and start time): a server killed with SIGKILL
cannot remove its directory, so the next server to start removes every one whose owner is gone."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "ilsp-"
OWNER_FILE = "owner"


def _start_time(pid: int) -> str:
    """The process's start time (Linux: /proc/<pid>/stat field 22), so a reused pid is not taken for the
    owner; "" where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # The command name (field 2) may hold spaces and parentheses: count fields after its closing one.
    return stat.rsplit(")", 1)[-1].split()[19]


def _alive(pid: int, started: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not started or not _start_time(pid) or _start_time(pid) == started


def create() -> Path:
    """A fresh runtime directory for this server (stale ones of dead servers removed first)."""
    remove_stale()
    directory = Path(tempfile.mkdtemp(prefix=PREFIX))
    (directory / OWNER_FILE).write_text(f"{os.getpid()} {_start_time(os.getpid())}\n")
    return directory


def remove_stale(base: Path | None = None) -> list[Path]:
    """Remove the runtime directories, of this user, whose owning server no longer runs. Returns them."""
    removed: list[Path] = []
    uid = os.getuid() if hasattr(os, "getuid") else None
    for directory in Path(base or tempfile.gettempdir()).glob(PREFIX + "*"):
        try:
            if directory.is_symlink() or not directory.is_dir():
                continue
            if uid is not None and directory.stat().st_uid != uid:
                continue
            fields = (directory / OWNER_FILE).read_text().split()
            pid, started = int(fields[0]), (fields[1] if len(fields) > 1 else "")
        except (OSError, ValueError, IndexError):
            continue  # not ours to judge (no owner file: an older server, or one still creating it)
        if pid == os.getpid() or _alive(pid, started):
            continue
        shutil.rmtree(directory, ignore_errors=True)
        removed.append(directory)
        log.info("removed the runtime directory %s of a server that is gone (pid %d)", directory, pid)
    return removed


# ---- the agents' sockets (docs/agents.md) ------------------------------------------------------------
# `interpreter-lsp mcp` finds the language server of a workspace without being told its runtime directory
# (a fresh mkdtemp per server): each server listens, per workspace, on a unix socket at a path derived
# from the workspace's real path, in one 0700 directory of this user in /tmp (agents_base).

AGENTS_DIR = "ilsp-agents-"


def agents_base() -> Path:
    """Where the agents' socket directory lives: /tmp on POSIX, whatever TMPDIR says. An agent starts
    `interpreter-lsp mcp` with a trimmed environment (the MCP SDKs pass on only HOME, LOGNAME, PATH, SHELL,
    TERM and USER by default), so TMPDIR cannot be relied on to agree between the editor's server and the
    agent's bridge: on macOS an editor has TMPDIR=/var/folders/…/T/ and the bridge would look in /tmp."""
    if os.name == "posix" and os.path.isdir("/tmp"):
        return Path("/tmp")
    return Path(tempfile.gettempdir())


def agents_dir(*, create: bool = False, base: Path | None = None) -> Path:
    """This user's directory of agent sockets. With `create`: made 0700 if missing, and refused (OSError,
    in words) when it is a link, another user's, or open to others: a socket there must be ours alone."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    directory = Path(base or agents_base()) / f"{AGENTS_DIR}{uid}"
    if create:
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            pass
        info = directory.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or info.st_mode & 0o077:
            raise OSError(
                f"{directory} is not a private directory of this user (a link, another user's, or open to "
                "others): remove it, and the language server makes it again"
            )
    return directory


def agent_socket(root: Path, *, base: Path | None = None) -> Path:
    """The socket of the language server that serves the workspace `root` (its real path)."""
    digest = hashlib.sha256(os.path.realpath(root).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return agents_dir(base=base) / f"{digest}.sock"
