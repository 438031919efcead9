"""Paths the server writes (notebook export, applyProposal targets) must stay inside the workspace."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..errors import UserError


class PathOutsideWorkspace(UserError):
    """A path that resolves outside the workspace, or cannot be a path at all."""


def resolve_inside(root: Path, path: str | Path) -> Path:
    """The real path of `path` (relative to `root`, absolute, or a file:// URI) if it is inside `root`.

    Refuses `..` that climbs out, absolute paths elsewhere, and symbolic links (at any existing part of
    the path) whose target is outside. Parts that do not exist yet are allowed: they are what gets created.
    """
    text = _as_path_text(path)
    real_root = Path(os.path.realpath(root))
    if "\0" in text:
        raise PathOutsideWorkspace(f"Refusing to write {text!r}: a path cannot contain a NUL character.")
    if not text.strip():
        raise PathOutsideWorkspace("Refusing to write an empty path. Choose a path inside the workspace.")
    candidate = Path(os.path.expanduser(text))
    if not candidate.is_absolute():
        candidate = real_root / candidate
    try:
        resolved = Path(os.path.realpath(candidate))
    except OSError as error:
        # A part that was a link when looked at and a directory when read (EINVAL from readlink, which
        # realpath lets through before Python 3.13): kernel code swapping it meanwhile. Nothing was
        # written; saying so beats an internal error.
        raise CannotWrite(
            f"Cannot write {text}: a part of the path changed while it was checked ({error.strerror}). "
            "Try again, once nothing renames it."
        ) from None
    if resolved == real_root or real_root in resolved.parents:
        return resolved
    lexical = Path(os.path.normpath(candidate))
    if lexical == real_root or real_root in lexical.parents or _inside_given_root(lexical, root):
        raise PathOutsideWorkspace(
            f"Refusing to write {text}: a symbolic link takes it to {resolved}, outside the workspace "
            f"{root}. Choose a path inside the workspace."
        )
    raise PathOutsideWorkspace(
        f"Refusing to write {text}: it is outside the workspace {root}. Choose a path inside the workspace."
    )


def _as_path_text(path: str | Path) -> str:
    if isinstance(path, Path):
        return str(path)
    if not path.startswith("file:"):
        return path
    parts = urlsplit(path)
    if parts.netloc not in ("", "localhost"):
        raise PathOutsideWorkspace(
            f"Refusing to write {path}: it is on another machine ({parts.netloc}). Choose a path inside the "
            "workspace."
        )
    return unquote(parts.path)


def _inside_given_root(lexical: Path, root: Path) -> bool:
    """The workspace as the client named it may itself be reached through a symlink."""
    given = Path(os.path.normpath(os.path.abspath(root)))
    return lexical == given or given in lexical.parents


# ---- writing without following a link that appeared after the check -----------------------------------------

NAME_MAX = 255
PATH_MAX = 4096


class CannotWrite(UserError):
    """A path inside the workspace that cannot be written: a directory, too long, changed while writing."""


def check_path_text(path: str) -> None:
    """Refuse what cannot be a path in the workspace before anything is resolved: URLs other than file://,
    names the file system would refuse for length."""
    scheme = urlsplit(path).scheme if "://" in path else ""
    if scheme and scheme != "file":
        raise PathOutsideWorkspace(
            f"Refusing to write {path}: it is a URL ({scheme}://), not a path. Choose a path inside the workspace, "
            "e.g. notebooks/session.ipynb."
        )
    if len(path.encode()) > PATH_MAX or any(len(part.encode()) > NAME_MAX for part in path.split("/")):
        raise CannotWrite(
            f"Refusing to write {path[:80]}…: the path is too long (at most {NAME_MAX} bytes per name, "
            f"{PATH_MAX} in all). Choose a shorter path."
        )


def write_inside(root: Path, path: str, data: bytes, *, overwrite: bool = False, mode: int | None = None) -> Path:
    """Write `data` to `path` inside the workspace, race-free: the directories are opened one by one from
    the workspace's root without following symbolic links (O_NOFOLLOW, relative to the parent's descriptor),
    created where missing, and the file is written to a temporary name in the final directory, then
    renamed (or linked, without overwrite: an existing file is never replaced) relative to that descriptor.
    Kernel code that swaps a directory for a link to elsewhere meanwhile makes the write fail; it can never
    redirect it. The file gets the workspace's usual mode (0666 less the umask, as any editor would), or
    `mode`, set on the file before it takes its name (never by path afterwards, through whatever is there)."""
    check_path_text(path)
    target = resolve_inside(root, path)
    real_root = Path(os.path.realpath(root))
    parts = target.relative_to(real_root).parts
    if not parts:
        raise CannotWrite(f"Refusing to write {path}: it is the workspace folder itself. Name a file in it.")
    try:
        directory = os.open(real_root, _DIRECTORY | _NOFOLLOW)
    except OSError as error:
        raise CannotWrite(f"Cannot write {path}: the workspace folder cannot be opened ({error.strerror}).") from None
    try:
        directory = _descend(directory, parts[:-1], make=True)
    except OSError as error:
        raise _refusal(path, str(error.filename), error) from None
    try:
        _write_file(parts[-1], data, directory, path, overwrite, mode)
    finally:
        os.close(directory)
    return target


def open_inside(root: Path, relative: str) -> int:
    """A descriptor to read the file `relative` (a workspace-relative path as the files tracker gives it), its
    directories opened one by one from the root without following links, the file itself too (O_NOFOLLOW
    relative to its directory's descriptor): kernel code that swaps a directory for a link to elsewhere
    meanwhile makes this fail (OSError: ELOOP, ENOTDIR), never read what the link points to."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    if not _RELATIVE_OPS:
        return os.open(root / relative, os.O_RDONLY | nofollow)
    directory, name = _open_parent(root, relative)
    try:
        return os.open(name, os.O_RDONLY | nofollow, dir_fd=directory)
    finally:
        os.close(directory)


def remove_inside(root: Path, relative: str) -> None:
    """Remove the file or link `relative` (never what a link points to), its directories opened as
    open_inside opens them: a directory swapped for a link meanwhile makes it fail, never remove a file
    elsewhere. IsADirectoryError if it is no longer a file; FileNotFoundError if it is gone."""
    if not _RELATIVE_OPS:
        target = root / relative
        if not (stat.S_ISREG(mode := os.lstat(target).st_mode) or stat.S_ISLNK(mode)):
            raise IsADirectoryError(f"{relative} is no longer a file")
        os.unlink(target)
        return
    directory, name = _open_parent(root, relative)
    try:
        mode = os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            raise IsADirectoryError(f"{relative} is no longer a file")
        os.unlink(name, dir_fd=directory)
    finally:
        os.close(directory)


def rmdir_inside(root: Path, relative: str) -> None:
    """Remove the empty directory `relative` (OSError if it is not empty, gone, or a link), its parents opened
    as open_inside opens them."""
    if not _RELATIVE_OPS:
        os.rmdir(root / relative)
        return
    directory, name = _open_parent(root, relative)
    try:
        os.rmdir(name, dir_fd=directory)
    finally:
        os.close(directory)


# Descriptor-relative calls (openat, unlinkat): where the platform lacks them (Windows), paths as they are.
_RELATIVE_OPS = os.open in os.supports_dir_fd and os.unlink in os.supports_dir_fd and os.rmdir in os.supports_dir_fd


def _open_parent(root: Path, relative: str) -> tuple[int, str]:
    """(a descriptor of the directory holding `relative`, its last name): each directory opened from the
    workspace root without following links."""
    parts = relative.split("/")
    if not all(parts) or ".." in parts or "." in parts:
        raise OSError(errno.EINVAL, f"not a plain relative path: {relative}")
    return _descend(os.open(root, _DIRECTORY), parts[:-1]), parts[-1]


_DIRECTORY = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _descend(directory: int, parts: tuple[str, ...] | list[str], *, make: bool = False) -> int:
    """From the open `directory` (taken over: closed here), a descriptor of its subdirectory `parts`, each
    opened relative to its parent without following links (and made where missing, with `make`). An OSError
    names the part that failed (its `filename`)."""
    try:
        for part in parts:
            try:
                child = os.open(part, _DIRECTORY | _NOFOLLOW, dir_fd=directory)
            except FileNotFoundError:
                if not make:
                    raise
                with contextlib.suppress(FileExistsError):  # made meanwhile: opened (without following links)
                    os.mkdir(part, dir_fd=directory)
                child = os.open(part, _DIRECTORY | _NOFOLLOW, dir_fd=directory)
            os.close(directory)
            directory = child
    except BaseException:
        os.close(directory)
        raise
    return directory


def _refusal(path: str, part: str, error: OSError) -> UserError:
    if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return PathOutsideWorkspace(
            f"Refusing to write {path}: {part} is not a directory of the workspace (a file, or a symbolic link "
            "made while writing). Choose another path."
        )
    if error.errno == errno.ENAMETOOLONG:
        return CannotWrite(f"Refusing to write {path[:80]}…: the path is too long. Choose a shorter path.")
    return CannotWrite(f"Cannot write {path}: {part}: {error.strerror}.")


def _is_dir(name: str, directory: int) -> bool:
    import stat

    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _write_file(name: str, data: bytes, directory: int, path: str, overwrite: bool, mode: int | None) -> None:
    import secrets

    temporary = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
    create = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(temporary, create, 0o666, dir_fd=directory)
    except OSError as error:
        raise _refusal(path, temporary, error) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
        if overwrite:
            os.rename(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
        else:
            os.link(temporary, name, src_dir_fd=directory, dst_dir_fd=directory, follow_symlinks=False)
            os.unlink(temporary, dir_fd=directory)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=directory)
        if isinstance(error, FileExistsError) and not _is_dir(name, directory):
            raise CannotWrite(f"{path} exists already: choose another name, or export with overwrite: true") from None
        if isinstance(error, OSError) and error.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
            raise CannotWrite(f"Refusing to write {path}: it is a directory. Choose a file name.") from None
        if isinstance(error, OSError):
            raise _refusal(path, name, error) from None
        raise
