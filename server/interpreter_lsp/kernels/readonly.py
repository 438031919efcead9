"""What a sandboxed kernel must not change inside the workspace, and the bubblewrap arguments that make it so.

The workspace is bound read-write into the sandbox; these binds follow it, on top: each protected path is a
read-only mount point, so kernel code can neither write it nor rename, remove or replace it (a mount point
is busy: EBUSY), nor hard-link into it (a link across mounts is EXDEV). Each entry below says which program
reads or runs it outside the sandbox without you deciding; docs/security.md has the same list.

A path that does not exist yet cannot be a mount point. For the directories whose mere creation would be
enough (`.git` where the workspace is not a repository: git reads its config, fsmonitor and hooks at your
next `git status`; an editor's configuration folder), the server makes an **empty directory** before the
kernel starts and binds it read-only, so the kernel cannot create one. An empty directory is inert for every
program that reads these names (git looks past an empty `.git` to the parent directories; the editors find
no file in it). The placeholders are removed when the kernels have ended
(`release_placeholders`), by the last server running sandboxes of the same workspace (each holds a shared
lock on a file named after the workspace, which lists the placeholders made): removing a path on the host
detaches the mounts on it in every other mount namespace, which would lift that sandbox's protection. What
a killed server made is removed by the next server's release.
Files that do not exist yet are not blocked (a placeholder file would show in `git status` and change what
tools read): for each, the program that reads it asks you first, or the reason is given below.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

# ---- the list -------------------------------------------------------------------------------------------

GIT = ".git"  # directory, or a file naming the git directory (worktrees, submodules): all of it, see _git_dirs

# Top-level directories that an editor or tool reads as configuration, and runs commands from, when you open
# the folder or run the tool: protected whether or not they exist (a missing one gets a placeholder).
CONFIG_DIRS: dict[str, str] = {
    GIT: "git: config (core.fsmonitor runs at `git status`, core.hooksPath, aliases, pager), hooks, commondir",
    ".vscode": "VS Code: tasks.json (runOn folderOpen), settings.json (interpreter, terminal environment), launch.json",
    ".idea": "JetBrains IDEs: run configurations, startup tasks, external tools",
    ".zed": "Zed: settings.json (language server binaries and arguments), tasks.json",
    ".helix": "Helix: languages.toml (the language server commands it starts)",
    ".devcontainer": "Dev Containers: devcontainer.json (initializeCommand runs on the host)",
}

# Top-level files read as configuration: read-only when they exist. Not blocked when missing: the program
# that reads a new one asks first (direnv `allow`, Emacs' unsafe local variables, Neovim's `exrc` trust
# prompt, the server's consent for a workspace settings file), or it is inert without what stays protected
# (.gitmodules acts only with submodules in the index, which is in .git; pre-commit runs only through a hook
# in .git/hooks). `.env*` is a prefix: see _top_level.
CONFIG_FILES: dict[str, str] = {
    ".interpreter-lsp.toml": "this server's workspace settings (sandbox, autoRun, model endpoint)",
    ".env*": "environment files: this server's secret masking; VS Code's Python extension (python.envFile), "
    "docker compose, python-dotenv; `.envrc` is direnv's shell code",
    ".devcontainer.json": "Dev Containers (initializeCommand runs on the host)",
    ".dir-locals.el": "Emacs directory-local variables (eval forms)",
    ".dir-locals-2.el": "Emacs directory-local variables",
    ".nvim.lua": "Neovim exrc",
    ".nvimrc": "Neovim exrc",
    ".exrc": "Vim/Neovim exrc",
    ".gitmodules": "git submodule URLs (`git submodule update` fetches what it names)",
    ".pre-commit-config.yaml": "pre-commit: commands run at each commit once its hook is installed",
}

# Where specs.workspace_python looks for the workspace's interpreter; any top-level directory holding a
# pyvenv.cfg is a virtualenv too: a .pth file in its site-packages runs in every later interpreter.
VENV_NAMES = (".venv", "venv", ".env", "env")

# Environment variables naming directories whose files run as code at an interpreter's or a kernel's start,
# read-only whole when inside the workspace: IPython profiles (startup/*.py, ipython_config.py), Jupyter's
# kernel configuration, and PYTHONPATH (it comes before the standard library: any module there, a
# sitecustomize.py or a json.py, runs in every Python started with that path; a placeholder could not block
# all the names, .py, .pyc, .so, packages, that Python imports).
CONFIG_DIR_VARIABLES = ("IPYTHONDIR", "JUPYTER_CONFIG_DIR", "JUPYTER_CONFIG_PATH", "JUPYTER_PATH", "PYTHONPATH")


# Per workspace root: the shared lock this server holds while its sandboxes may use placeholders. The lock
# file also lists the placeholders any server made for the root (NUL-separated): whoever releases last, or
# the next server after one that was killed, removes them.
_HELD: dict[str, int] = {}


def _hold(root: str) -> int:
    """Take the shared lock for `root` (once per server); its descriptor."""
    while root not in _HELD:
        lock = _lock_file(root)
        fd = os.open(lock, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        if os.fstat(fd).st_uid != os.getuid():  # someone else's file in a shared /tmp: not ours to trust
            os.close(fd)
            raise PermissionError(f"{lock} belongs to another user")
        fcntl.flock(fd, fcntl.LOCK_SH)  # waits only while another server removes the placeholders
        try:
            current = os.stat(lock, follow_symlinks=False).st_ino
        except OSError:
            current = None
        if current == os.fstat(fd).st_ino:
            _HELD[root] = fd
        else:  # the last holder removed the file while we waited: take the lock of the new one
            os.close(fd)
    return _HELD[root]


def _lock_file(root: str) -> str:
    digest = hashlib.sha256(os.fsencode(root)).hexdigest()[:24]
    return os.path.join(tempfile.gettempdir(), f"interpreter-lsp-{os.getuid()}-placeholders-{digest}.lock")


def release_placeholders(workspace: Path) -> None:
    """Remove the placeholders made for `workspace` (once this server's kernels have ended), if no other
    server's sandbox may still have them mounted, and if they are still empty."""
    root = os.path.realpath(workspace)
    fd = _HELD.pop(root, None)
    if fd is None:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        listed = b""
        os.lseek(fd, 0, os.SEEK_SET)
        while chunk := os.read(fd, 65536):
            listed += chunk
        for entry in reversed(listed.split(b"\0")):
            path = os.fsdecode(entry)
            if path and os.path.dirname(path) == root:  # a top-level name of this workspace, nothing else
                with contextlib.suppress(OSError):
                    os.rmdir(path)  # only if still empty
        os.unlink(_lock_file(root))  # under the exclusive lock: a server waiting for it will open a new one
    except OSError:
        pass  # another server holds the lock: its sandboxes use them
    finally:
        os.close(fd)


def protected_binds(
    workspace: Path,
    extra: Iterable[Path] = (),
    *,
    env: Mapping[str, str] | None = None,
    interpreters: Iterable[str] = (),
    placeholders: bool = True,
) -> list[str]:
    """bwrap arguments, to follow the workspace's bind, that make what kernel code must not change read-only:
    the list above, `extra` (the user's settings file), the installs of `interpreters` (the kernel's python)
    and the directories named by `env` when they are inside the workspace. With `placeholders`, a missing
    CONFIG_DIRS entry is created empty first, on the host, so that it can be bound."""
    root = os.path.realpath(workspace)
    env = env or {}
    args: list[str] = []
    done: list[str] = []
    can_create = placeholders and os.access(root, os.W_OK)

    def inside(path: str) -> bool:
        return path != root and path.startswith(root.rstrip("/") + "/")

    def bind(path: str, *, create: bool = False) -> None:
        real = os.path.realpath(path)
        if not inside(real) or any(real == d or real.startswith(d + "/") for d in done):
            return
        if not os.path.lexists(real):
            if not (create and can_create):
                return
            try:
                lock: int | None = _hold(root)
            except OSError:  # no lock (another user's file in /tmp): the placeholder is made and left in place
                lock = None
            try:
                os.mkdir(real, 0o755)
            except OSError:
                return  # cannot be made: nor can the kernel make it (the same file system, less rights)
            if lock is not None:
                with contextlib.suppress(OSError):
                    os.write(lock, os.fsencode(real) + b"\0")
        elif not os.path.exists(real):
            return  # a dangling link: nothing to mount on
        elif create and can_create:
            with contextlib.suppress(OSError):
                _hold(root)  # it may be another server's placeholder: it must not be removed under us
        done.append(real)
        args.extend(["--ro-bind", real, real])

    for git_dir in _git_dirs(root):
        bind(git_dir)
    for included in _git_includes(root):
        bind(included)
    for name in CONFIG_DIRS:
        bind(os.path.join(root, name), create=True)
    for name in _top_level(root):
        bind(os.path.join(root, name))
    for program in interpreters:
        for executable in (program, os.path.realpath(program)):
            prefix = os.path.dirname(os.path.dirname(executable))  # .../bin/python -> its install
            if inside(os.path.realpath(prefix)):
                bind(prefix)
    for variable in CONFIG_DIR_VARIABLES:
        for entry in env.get(variable, "").split(os.pathsep):
            if entry and os.path.isabs(entry):
                bind(entry)
    for path in extra:
        bind(str(path))
    return args


def refusal(workspace: Path, home: str, env: Mapping[str, str]) -> str | None:
    """Why the sandbox cannot protect this workspace, in words the user can act on; None when it can. A
    workspace that holds the home directory holds what the shell, git and every tool read at start
    (~/.bashrc, ~/.gitconfig, ~/.config, ~/.local/lib/python*/site-packages); one on PYTHONPATH puts every
    file of it before the standard library of every Python started with that path."""
    root = os.path.realpath(workspace)
    home = os.path.realpath(home)
    if home == root or home.startswith(root.rstrip("/") + "/"):
        return (
            f"The sandbox cannot protect the workspace {root}: your home directory {home} is inside it, with the "
            "shell's, git's and your editor's configuration, which code in the sandbox could rewrite. Open a "
            "project folder instead, or set interpreter.sandbox to \"off\"."
        )
    for entry in env.get("PYTHONPATH", "").split(os.pathsep):
        if entry and os.path.realpath(os.path.join(root, entry)) == root:
            return (
                f"The sandbox cannot protect the workspace {root}: it is on PYTHONPATH, so any module code in the "
                "sandbox writes there would run in every Python you start with that path. Start the editor without "
                "the workspace on PYTHONPATH (a subfolder such as src is fine: it is made read-only in the sandbox)."
            )
    return None


def _top_level(root: str) -> list[str]:
    """Top-level names protected when they exist: CONFIG_FILES, `.env*`, and every virtualenv."""
    names = [name for name in CONFIG_FILES if not name.endswith("*")]
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return names
    for entry in entries:
        path = os.path.join(root, entry)
        if entry.startswith(".env") or (entry in VENV_NAMES and _is_venv(path)) or os.path.isfile(
            os.path.join(path, "pyvenv.cfg")
        ):
            names.append(entry)
    return names


def _is_venv(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "pyvenv.cfg")) or os.path.exists(os.path.join(path, "bin", "python"))


def _read_pointer(path: str, prefix: str = "") -> str | None:
    """The path a git pointer file names (`.git`: "gitdir: X"; commondir: "X"), relative to its directory."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(4096).strip()
    except OSError:
        return None
    if prefix:
        if not text.startswith(prefix):
            return None
        text = text[len(prefix) :].strip()
    return os.path.normpath(os.path.join(os.path.dirname(path), text)) if text else None


_SECTION = re.compile(r"^\s*\[\s*([A-Za-z0-9.-]+)")
_PATH = re.compile(r"^\s*path\s*=\s*(.*?)\s*$", re.IGNORECASE)


def _git_includes(root: str) -> list[str]:
    """Files the repository's own config includes (`[include] path = ../team.gitconfig`, `[includeIf ...]`):
    git reads them as its config, so one inside the workspace is as much git's config as .git/config. Read
    one level deep, from the config files of the directories _git_dirs names."""
    found: list[str] = []
    for git_dir in _git_dirs(root):
        for name in ("config", "config.worktree"):
            config = os.path.join(git_dir, name)
            try:
                with open(config, encoding="utf-8", errors="replace") as handle:
                    lines = handle.read(1 << 20).splitlines()
            except OSError:
                continue
            section = ""
            for line in lines:
                if (match := _SECTION.match(line)) is not None:
                    section = match.group(1).lower()
                    line = line[line.index("]") + 1 :] if "]" in line else ""
                if section in ("include", "includeif") and (match := _PATH.match(line)) is not None:
                    value = match.group(1).strip('"')
                    if value and not value.startswith("~"):
                        found.append(os.path.normpath(os.path.join(git_dir, value)))
    return found


def _git_dirs(root: str) -> list[str]:
    """Everything git reads of this workspace's repository that lies in it: `.git` itself (directory or
    file), the git directory a `.git` file names, and the common directory (config, hooks) named by that
    directory's `commondir`. Submodules' directories are under .git/modules, so inside the first."""
    dot_git = os.path.join(root, GIT)
    dirs = [dot_git]
    git_dir = dot_git if os.path.isdir(dot_git) else _read_pointer(dot_git, "gitdir:")
    if git_dir is not None:
        dirs.append(git_dir)
        common = _read_pointer(os.path.join(git_dir, "commondir"))
        if common is not None:
            dirs.append(common)
    return dirs
