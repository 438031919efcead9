"""Paths the server writes (notebook export, applyProposal targets) must stay inside the workspace."""

from __future__ import annotations

import os
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
    resolved = Path(os.path.realpath(candidate))
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
