"""Places a path names, lexically (no file system access): inside the workspace, a credential file, a
shell start-up file, /etc ... and what deleting, writing or reading each one means, in plain words.

Paths are classified relative to the workspace and the code's current directory (`Context.cwd`).
"""

from __future__ import annotations

import enum
import os
import posixpath
import re
from dataclasses import dataclass

from interpreter_lsp.safety.context import UNKNOWN, Context


class PathKind(enum.Enum):
    HARMLESS_DEVICE = "harmless device"  # /dev/null, /dev/stdout ...
    NETWORK_DEVICE = "network device"  # bash's /dev/tcp/host/port
    DEVICE = "device"
    CREDENTIAL = "credential"
    HISTORY = "history"
    STARTUP = "startup"
    DOTENV = "dotenv"
    WORKSPACE_ROOT = "workspace root"
    GIT_DIR = "git dir"
    RUNS_LATER = "runs later"  # inside the workspace, but git, the editor, direnv or Python runs or reads it
    WORKSPACE = "workspace"
    TEMP_ROOT = "temp root"
    TEMP = "temp"
    ROOT = "root"
    HOME = "home"
    SYSTEM = "system"
    OUTSIDE = "outside"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Target:
    kind: PathKind
    shown: str  # the path as the code wrote it, shortened for a reason


HARMLESS_DEVICES = frozenset(
    {"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/stdout", "/dev/stderr", "/dev/stdin",
     "/dev/tty", "/dev/full"}
)

# Relative to the home directory. Public keys and known_hosts are not secrets.
CREDENTIAL_HOME_PATHS: tuple[str, ...] = (
    ".ssh", ".aws", ".netrc", ".git-credentials", ".config/gcloud", ".kube/config", ".kube",
    ".docker/config.json", ".pgpass", ".npmrc", ".pypirc", ".gnupg", ".config/gh/hosts.yml", ".azure",
    ".password-store", ".local/share/keyrings", ".mozilla", ".config/google-chrome", ".config/chromium",
    ".vault-token", ".terraform.d/credentials.tfrc.json", ".config/hub", ".cargo/credentials",
    ".cargo/credentials.toml", ".config/rclone/rclone.conf", ".s3cfg", ".boto", ".my.cnf",
    ".config/openai", ".huggingface/token", ".cache/huggingface/token",
)
CREDENTIAL_NOT_SECRET_SUFFIXES: tuple[str, ...] = (".pub", "known_hosts")
CREDENTIAL_BASENAMES = frozenset(
    {"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk", ".netrc", ".pgpass",
     ".git-credentials", "credentials.db", "access_tokens.db", "cookies.sqlite", "Login Data"}
)
CREDENTIAL_ABSOLUTE = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh/ssh_host_")
HISTORY_BASENAMES = frozenset(
    {".bash_history", ".zsh_history", ".history", ".python_history", ".psql_history", ".mysql_history",
     ".sqlite_history", ".node_repl_history", ".lesshst", ".histfile"}
)
STARTUP_HOME_PATHS: tuple[str, ...] = (
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zprofile",
    ".zshenv", ".zlogin", ".config/fish/config.fish", ".config/autostart", ".kshrc", ".cshrc", ".tcshrc",
    ".xprofile", ".xinitrc", ".inputrc", ".ssh/rc", ".config/systemd/user", ".local/bin",
    # configuration that runs code later: git, pip, npm, conda, IPython/Jupyter, Python's user site, editors
    ".gitconfig", ".config/git", ".gitattributes", ".config/pip", ".pip", ".pydistutils.cfg", ".condarc",
    ".yarnrc", ".ipython", ".jupyter", ".local/lib", ".local/share/jupyter", ".config/direnv",
    ".config/Code/User", ".vscode-server", ".vscode", ".config/nvim", ".vimrc", ".emacs", ".emacs.d",
    ".tmux.conf", ".screenrc", ".wgetrc", ".curlrc", ".Rprofile", ".pythonrc", ".pythonstartup",
    ".config/interpreter-lsp",
)
# Inside the workspace: files that git, the editor, direnv, Python or the server run or read as
# configuration without the user deciding (first path part, or the file's own name anywhere).
RUNS_LATER_WORKSPACE_DIRS = (".git", ".vscode", ".idea", ".venv", "venv", ".direnv", ".ipython", ".jupyter",
                             ".devcontainer", ".github/workflows", ".husky")
RUNS_LATER_NAMES = frozenset({".envrc", ".interpreter-lsp.toml", "sitecustomize.py", "usercustomize.py",
                              ".pre-commit-config.yaml", ".gitattributes", ".gitmodules", ".npmrc", ".yarnrc",
                              ".yarnrc.yml", "pip.conf", ".pythonrc", ".git"})
STARTUP_ABSOLUTE = ("/etc/profile", "/etc/bash.bashrc", "/etc/zsh", "/etc/environment")
DOTENV_SAFE_SUFFIXES = (".example", ".sample", ".template", ".dist", ".defaults")
TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
SYSTEM_DIRS = (
    "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/var", "/opt",
    "/srv", "/sys", "/proc", "/snap", "/run", "/System", "/Library", "/Applications", "/private",
)
HOME_PARENTS = ("/home", "/Users")


def _under(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")


def _shorten(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _expand_home(text: str, home: str) -> str:
    for prefix in ("${HOME}", "$HOME"):
        if text == prefix or text.startswith(prefix + "/"):
            return home + text[len(prefix):]
    if text == "~" or text.startswith("~/"):
        return home + text[1:]
    if text.startswith("~"):  # ~user
        return "/home/" + text[1:]
    return text


def _known_prefix(text: str) -> str | None:
    """The part of a path before the first piece only known at run time (None: nothing known)."""
    cut = len(text)
    for marker in ("$", "`"):
        at = text.find(marker)
        if at != -1:
            cut = min(cut, at)
    if cut == len(text):
        return text
    head = text[:cut]
    if "/" not in head:
        return None
    return head[: head.rindex("/") + 1] + UNKNOWN


def classify_path(text: str, ctx: Context) -> Target:
    """What kind of place a path names, lexically: inside the workspace, a credential file, /etc ..."""
    key = (text, ctx.cwd, "")
    cached = ctx.place_cache.get(key)
    if isinstance(cached, Target):
        return cached
    target = _classify(text, ctx)
    if len(ctx.place_cache) < 4096:
        ctx.place_cache[key] = target
    return target


def _classify(text: str, ctx: Context) -> Target:
    shown = _shorten(text.replace(UNKNOWN, "…"))
    raw = text.strip().strip("'\"")
    if raw.startswith("file://"):
        raw = raw[len("file://"):]
    raw = _expand_home(raw, ctx.home)
    for prefix in ("${PWD}", "$PWD"):
        if raw == prefix or raw.startswith(prefix + "/"):
            raw = "." + raw[len(prefix):]
    for prefix in ("${TMPDIR}", "$TMPDIR"):
        if raw == prefix or raw.startswith(prefix + "/"):
            raw = "/tmp" + raw[len(prefix):]
    if _PROC_SECRET.match(raw):
        return Target(PathKind.CREDENTIAL, shown)  # /proc/$PID/environ: whichever process, its keys
    known = _known_prefix(raw)
    if known is None or known == "":
        return Target(PathKind.UNKNOWN, shown)
    # Globs: "dir/*" names everything in dir, so it is as bad as "dir"; "*" alone: everything here.
    while known.endswith(("/*", "/.*", "/.", "/")) and len(known) > 1:
        known = known[: known.rindex("/")] or "/"
    if known in ("*", ".*", "./*"):
        known = "."
    base = ctx.cwd if ctx.cwd is not None else (ctx.workspace or "")
    if not known.startswith("/") and UNKNOWN in base:
        return Target(PathKind.UNKNOWN, shown)
    if not known.startswith("/"):
        if not base:
            # No workspace known: relative paths stay where the code runs; only `..` leaves it.
            rel = posixpath.normpath(known)
            if rel == ".":
                return Target(PathKind.WORKSPACE_ROOT, shown)
            if rel == ".." or rel.startswith("../"):
                return Target(PathKind.OUTSIDE, shown)
            return _classify_relative_name(rel, shown)
        known = posixpath.join(base, known)
    path = posixpath.normpath(known)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    return _classify_absolute(path, shown, ctx)


_PROC_SECRET = re.compile(
    r"^/proc/(?:.*/)?(?:environ|mem|cmdline|auxv)$|^/proc/[^/]+/(?:task/[^/]+/)?(?:fd|map_files)/"
)


def runs_later(rel: str) -> bool:
    """Does a workspace-relative path name a file that something runs or reads as configuration later?"""
    rel = rel.replace("/" + UNKNOWN, "")
    name = posixpath.basename(rel)
    if name in RUNS_LATER_NAMES or name.endswith(".pth"):
        return True
    return any(rel == d or rel.startswith(d + "/") for d in RUNS_LATER_WORKSPACE_DIRS)


def _classify_relative_name(rel: str, shown: str) -> Target:
    name = posixpath.basename(rel.replace("/" + UNKNOWN, ""))
    first = rel.split("/", 1)[0]
    if first == ".git" and rel == ".git":
        return Target(PathKind.GIT_DIR, shown)
    if name in CREDENTIAL_BASENAMES:
        return Target(PathKind.CREDENTIAL, shown)
    if name in HISTORY_BASENAMES:
        return Target(PathKind.HISTORY, shown)
    if _is_dotenv(name):
        return Target(PathKind.DOTENV, shown)
    if runs_later(rel):
        return Target(PathKind.RUNS_LATER, shown)
    return Target(PathKind.WORKSPACE, shown)


def _is_dotenv(name: str) -> bool:
    if name != ".env" and not name.startswith(".env."):
        return False
    return not name.endswith(DOTENV_SAFE_SUFFIXES)


def _home_relative(path: str, home: str) -> str | None:
    """`path` relative to the home directory it is in (yours or another user's), or None."""
    if _under(path, home) and path != home:
        return path[len(home) + 1:]
    parts = path.split("/")
    if len(parts) > 3 and "/" + parts[1] in HOME_PARENTS:
        return "/".join(parts[3:])
    if len(parts) > 2 and parts[1] == "root":
        return "/".join(parts[2:])
    return None


def _classify_absolute(path: str, shown: str, ctx: Context) -> Target:
    if path in HARMLESS_DEVICES or path.startswith("/dev/fd/") or path.startswith("/proc/self/fd/"):
        return Target(PathKind.HARMLESS_DEVICE, shown)
    if _PROC_SECRET.match(path):
        return Target(PathKind.CREDENTIAL, shown)  # another process's environment or memory: its keys
    if path.startswith(("/dev/tcp/", "/dev/udp/")):
        return Target(PathKind.NETWORK_DEVICE, shown)
    if _under(path, "/dev") and not _under(path, "/dev/shm"):
        return Target(PathKind.DEVICE, shown)
    name = posixpath.basename(path.replace("/" + UNKNOWN, ""))
    home_rel = _home_relative(path, ctx.home)
    if not path.endswith(CREDENTIAL_NOT_SECRET_SUFFIXES):
        if name in CREDENTIAL_BASENAMES or any(path.startswith(p) for p in CREDENTIAL_ABSOLUTE):
            return Target(PathKind.CREDENTIAL, shown)
        if home_rel is not None and any(_under(home_rel, p) for p in CREDENTIAL_HOME_PATHS):
            return Target(PathKind.CREDENTIAL, shown)
    if name in HISTORY_BASENAMES:
        return Target(PathKind.HISTORY, shown)
    if home_rel is not None and any(_under(home_rel, p) for p in STARTUP_HOME_PATHS):
        return Target(PathKind.STARTUP, shown)
    if any(_under(path, p) for p in STARTUP_ABSOLUTE):
        return Target(PathKind.STARTUP, shown)
    if path == ctx.home:
        return Target(PathKind.HOME, shown)  # wherever it is: under /tmp in many containers, or the workspace's parent
    ws = ctx.workspace
    if ws is not None and _under(path, ws):
        if path == ws:
            return Target(PathKind.WORKSPACE_ROOT, shown)
        if path == ws + "/.git":
            return Target(PathKind.GIT_DIR, shown)
        if _is_dotenv(name):
            return Target(PathKind.DOTENV, shown)
        if runs_later(path[len(ws) + 1:]):
            return Target(PathKind.RUNS_LATER, shown)
        return Target(PathKind.WORKSPACE, shown)
    if _under(path, ctx.home):
        return Target(PathKind.OUTSIDE, shown)  # in your home, outside the workspace: never "temporary"
    for temp in TEMP_DIRS:
        if path == temp:
            return Target(PathKind.TEMP_ROOT, shown)
        if _under(path, temp):
            return Target(PathKind.TEMP, shown)
    if path == "/":
        return Target(PathKind.ROOT, shown)
    if path in (ctx.home, "/root", *HOME_PARENTS) or posixpath.dirname(path) in HOME_PARENTS:
        return Target(PathKind.HOME, shown)
    if any(_under(path, d) for d in SYSTEM_DIRS):
        return Target(PathKind.SYSTEM, shown)
    return Target(PathKind.OUTSIDE, shown)


# --- What doing something to a path means -----------------------------------------------------------

_DELETE_HIGH: dict[PathKind, str] = {
    PathKind.ROOT: "{action} the whole file system: {shown}",
    PathKind.HOME: "{action} your home directory: {shown}",
    PathKind.WORKSPACE_ROOT: "{action} everything in the workspace: {shown}",
    PathKind.GIT_DIR: "{action} the project's git history: {shown}",
    PathKind.SYSTEM: "{action} system files: {shown}",
    PathKind.CREDENTIAL: "{action} credentials: {shown}",
    PathKind.HISTORY: "{action} shell history: {shown}",
    PathKind.STARTUP: "{action} a start-up or configuration file: {shown}",
    PathKind.DEVICE: "{action} a device: {shown}",
}


def check_delete(
    target: Target, ctx: Context, *, recursive: bool, unknown_matters: bool = True, action: str = "deletes"
) -> None:
    """Deleting (or, with action="moves", moving away) what `target` names."""
    kind, shown = target.kind, target.shown
    if kind in _DELETE_HIGH:
        ctx.add("high", _DELETE_HIGH[kind].format(action=action, shown=shown))
    elif kind is PathKind.OUTSIDE:
        how = "recursively " if recursive and action == "deletes" else ""
        ctx.add("high", f"{action} files {how}outside the workspace: {shown}")
    elif kind is PathKind.TEMP_ROOT:
        ctx.add("medium", f"{action} the shared temporary directory: {shown}")
    elif kind is PathKind.UNKNOWN and recursive and unknown_matters:
        ctx.add("medium", f"{action} files recursively at a path only known at run time: {shown}")
    elif recursive and action == "deletes" and kind is PathKind.TEMP:
        ctx.add("medium", f"deletes files recursively in a temporary directory: {shown}")
    elif recursive and action == "deletes" and kind is not PathKind.UNKNOWN:
        # Inside the workspace, but a whole tree at once: worth a look before it runs by itself.
        ctx.add("medium", f"deletes files recursively inside the workspace: {shown}")
    elif action == "deletes":
        # Low, but said: every delete shows on the proposal what it removes (issue 14).
        ctx.add("low", f"deletes {shown} ({_WHERE.get(kind, 'inside the workspace')})")


_WHERE: dict[PathKind, str] = {
    PathKind.TEMP: "a temporary file",
    PathKind.UNKNOWN: "a path only known at run time",
    PathKind.HARMLESS_DEVICE: "a device that holds nothing",
}
_UNPACK_HIGH: dict[PathKind, str] = {
    PathKind.ROOT: "the whole file system",
    PathKind.HOME: "your home directory",
    PathKind.SYSTEM: "system files",
    PathKind.STARTUP: "start-up or configuration files",
    PathKind.RUNS_LATER: "files that run later (git hooks, editor tasks)",
    PathKind.CREDENTIAL: "credentials",
}


def check_unpack(target: Target, ctx: Context) -> None:
    """Unpacking an archive into what `target` names: over / or ~ it can replace anything there."""
    if target.kind in _UNPACK_HIGH:
        ctx.add("high", f"unpacks an archive over {_UNPACK_HIGH[target.kind]}: {target.shown}")
    else:
        check_write(target, ctx, verb="unpacks files")


def check_write(target: Target, ctx: Context, verb: str = "writes") -> None:
    kind, shown = target.kind, target.shown
    if kind is PathKind.STARTUP:
        ctx.add("high", f"changes a start-up or configuration file (it runs code later, as you): {shown}")
    elif kind is PathKind.RUNS_LATER:
        ctx.add("high", f"writes a file that git, the editor, direnv or Python runs later without asking: {shown}")
    elif kind is PathKind.CREDENTIAL:
        ctx.add("high", f"changes credentials: {shown}")
    elif kind is PathKind.HISTORY:
        ctx.add("high", f"rewrites shell history: {shown}")
    elif kind is PathKind.SYSTEM:
        ctx.add("high", f"{verb} system files: {shown}")
    elif kind is PathKind.DEVICE:
        ctx.add("high", f"writes straight to a disk device (destroys its data): {shown}")
    elif kind is PathKind.NETWORK_DEVICE:
        check_network_device(target, ctx)
    elif kind in (PathKind.OUTSIDE, PathKind.HOME, PathKind.ROOT):
        ctx.add("medium", f"{verb} outside the workspace: {shown}")
    elif kind is PathKind.GIT_DIR:
        ctx.add("medium", f"{verb} inside the project's .git directory: {shown}")


def check_network_device(target: Target, ctx: Context) -> None:
    parts = target.shown.split("/")
    host = parts[3] if len(parts) > 3 else ""
    if host in ("127.0.0.1", "localhost", "::1"):
        return
    ctx.add("high", f"connects the shell to another machine: {target.shown}")


def check_read(target: Target, ctx: Context, *, shows: bool) -> None:
    """Reading what `target` names; `shows`: the content is printed (and so reaches the model)."""
    kind, shown = target.kind, target.shown
    if kind is PathKind.CREDENTIAL:
        ctx.add("high", f"reads credentials: {shown}")
    elif kind is PathKind.HISTORY:
        ctx.add("high", f"reads shell history (it often holds passwords): {shown}")
    elif kind is PathKind.DOTENV:
        if shows:
            ctx.add("high", f"shows secrets from {shown} (they would reach the model)")
        else:
            ctx.add("medium", f"reads secrets from {shown}")
    elif kind is PathKind.NETWORK_DEVICE:
        check_network_device(target, ctx)




# --- Proven inside the workspace (the allowlist's reads and writes) ------------------------------------

_READABLE = (PathKind.WORKSPACE, PathKind.WORKSPACE_ROOT, PathKind.RUNS_LATER, PathKind.GIT_DIR)


def unproven_access(
    text: str | None, ctx: Context, *, write: bool, suffixes: frozenset[str] = frozenset()
) -> str | None:
    """None when `text` is proven to name a file inside the workspace that reading (or, with `write`,
    writing: a data file with one of `suffixes`, in no hidden directory) cannot harm; else what is wrong,
    in words. Lexically and through the file system (a link inside the workspace to elsewhere is elsewhere)."""
    key = (f"{text}\0{sorted(suffixes)}", ctx.cwd, "write" if write else "read")
    if key in ctx.place_cache:
        return ctx.place_cache[key]  # type: ignore[return-value]
    problem = _unproven_access(text, ctx, write=write, suffixes=suffixes)
    if len(ctx.place_cache) < 4096:
        ctx.place_cache[key] = problem
    return problem


def _unproven_access(text: str | None, ctx: Context, *, write: bool, suffixes: frozenset[str]) -> str | None:
    listed = text is not None and text.endswith("/" + UNKNOWN) and not write
    if listed:
        text = text[: -len(UNKNOWN) - 1] or "."  # a file found by listing this directory
    if text is None or UNKNOWN in text or "$" in text or "`" in text:
        return "a path only known at run time"
    if "://" in text:
        return f"a URL ({_shorten(text, 40)})"
    if any(c in text for c in "*?[") and write:
        return f"a path pattern ({_shorten(text, 40)})"
    target = classify_path(text, ctx)
    if target.kind not in _READABLE or ctx.workspace is None or (write and target.kind is not PathKind.WORKSPACE):
        if not write:
            return f"{target.shown}, not a file inside the workspace"
        return f"{target.shown} ({_WRITE_WHERE.get(target.kind, 'outside the workspace')})"
    absolute = ctx.absolute(text)
    real_root = os.path.realpath(ctx.workspace)
    try:
        real = os.path.realpath(absolute)
    except (OSError, ValueError):
        return f"{target.shown} (cannot be resolved)"
    if not _inside(real, real_root):
        return f"{target.shown}, a link to a place outside the workspace"
    if listed and not _no_link_out(real, real_root):
        return f"a file listed in {target.shown}, where a link may lead outside the workspace"
    if write:
        rel = posixpath.relpath(posixpath.normpath(absolute), ctx.workspace)
        if any(part.startswith(".") and part not in (".", "..") for part in rel.split("/")):
            return f"{target.shown} (a hidden file or directory)"
        suffix = posixpath.splitext(rel)[1].lower()
        if suffixes and suffix not in suffixes:
            return f"{target.shown} (not a data or figure file)"
    return None


def _inside(real: str, real_root: str) -> bool:
    return real == real_root or real.startswith(real_root.rstrip("/") + "/")


_MAX_LISTED = 512


def _no_link_out(directory: str, real_root: str) -> bool:
    """No entry under `directory` (at most _MAX_LISTED, else unproven) is a link that leads outside."""
    seen = 0
    pending = [directory]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    seen += 1
                    if seen > _MAX_LISTED:
                        return False
                    if entry.is_symlink():
                        if not _inside(os.path.realpath(entry.path), real_root):
                            return False
                    elif entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
        except OSError:
            continue  # not there (yet): nothing in it leads anywhere
    return True


_WRITE_WHERE = {
    PathKind.RUNS_LATER: "a file that runs later", PathKind.GIT_DIR: "the git directory",
    PathKind.DOTENV: "a .env file", PathKind.WORKSPACE_ROOT: "the workspace itself",
    PathKind.TEMP: "a temporary file outside the workspace", PathKind.HARMLESS_DEVICE: "a device",
}
