"""Paths the server writes stay inside the workspace: .., absolute paths, symlinks and URIs that escape are refused."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from interpreter_lsp.errors import UserError
from interpreter_lsp.safety.paths import PathOutsideWorkspace, resolve_inside


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    return root


def test_relative_paths_resolve_inside(ws: Path) -> None:
    assert resolve_inside(ws, "notes.ipynb") == ws.resolve() / "notes.ipynb"
    assert resolve_inside(ws, "sub/../x.txt") == ws.resolve() / "x.txt"
    assert resolve_inside(ws, Path("sub") / "y.py") == ws.resolve() / "sub" / "y.py"


def test_a_legal_nested_new_path_is_allowed(ws: Path) -> None:
    target = resolve_inside(ws, "exports/2024/june/run.ipynb")
    assert target == ws.resolve() / "exports" / "2024" / "june" / "run.ipynb"
    assert not target.parent.exists()  # nothing is created by resolving


def test_dot_dot_that_climbs_out_is_refused(ws: Path) -> None:
    with pytest.raises(PathOutsideWorkspace) as error:
        resolve_inside(ws, "../outside/x.txt")
    message = str(error.value)
    assert message.startswith("Refusing to write ../outside/x.txt: it is outside the workspace ")
    assert message.endswith("Choose a path inside the workspace.")
    with pytest.raises(PathOutsideWorkspace):
        resolve_inside(ws, "sub/../../outside")


def test_absolute_paths(ws: Path) -> None:
    assert resolve_inside(ws, str(ws / "sub" / "a.txt")) == ws.resolve() / "sub" / "a.txt"
    with pytest.raises(PathOutsideWorkspace, match=r"Refusing to write /etc/x: it is outside the workspace"):
        resolve_inside(ws, "/etc/x")
    with pytest.raises(PathOutsideWorkspace):
        resolve_inside(ws, "~/x.txt")
    with pytest.raises(PathOutsideWorkspace):  # a sibling whose name starts like the workspace's
        resolve_inside(ws, str(ws) + "-evil/x.txt")


def test_symlinks_that_escape_are_refused(ws: Path, tmp_path: Path) -> None:
    (ws / "link-dir").symlink_to(tmp_path / "outside")
    (ws / "link-file").symlink_to(tmp_path / "outside" / "target.txt")  # dangling: target not there yet
    (ws / "root-link").symlink_to("/")
    for escaping in ("link-dir/new.txt", "link-file", "root-link/etc/passwd"):
        with pytest.raises(PathOutsideWorkspace, match="a symbolic link takes it to"):
            resolve_inside(ws, escaping)
    assert not (tmp_path / "outside" / "target.txt").exists()


def test_symlinks_that_stay_inside_are_fine(ws: Path) -> None:
    (ws / "alias").symlink_to(ws / "sub")
    assert resolve_inside(ws, "alias/z.txt") == ws.resolve() / "sub" / "z.txt"


def test_a_workspace_reached_through_a_symlink(ws: Path, tmp_path: Path) -> None:
    door = tmp_path / "door"
    door.symlink_to(ws)
    assert resolve_inside(door, "a.txt") == ws.resolve() / "a.txt"
    assert resolve_inside(door, str(door / "a.txt")) == ws.resolve() / "a.txt"


def test_file_uris(ws: Path) -> None:
    uri = (ws / "with space.ipynb").as_uri()
    assert "%20" in uri
    assert resolve_inside(ws, uri) == ws.resolve() / "with space.ipynb"
    assert resolve_inside(ws, "file://localhost" + str(ws / "a.txt")) == ws.resolve() / "a.txt"
    with pytest.raises(PathOutsideWorkspace, match="outside the workspace"):
        resolve_inside(ws, "file:///etc/passwd")
    with pytest.raises(PathOutsideWorkspace, match="on another machine"):
        resolve_inside(ws, "file://server/share/x.txt")


def test_nonsense_is_refused_clearly(ws: Path) -> None:
    with pytest.raises(PathOutsideWorkspace, match="NUL"):
        resolve_inside(ws, "a\0b")
    with pytest.raises(PathOutsideWorkspace, match="empty path"):
        resolve_inside(ws, "")
    assert issubclass(PathOutsideWorkspace, UserError)  # answered as the person's mistake, with its sentence


def test_the_workspace_root_itself(ws: Path) -> None:
    assert resolve_inside(ws, ".") == ws.resolve()
    assert resolve_inside(ws, os.fspath(ws)) == ws.resolve()


def test_a_link_swapped_for_a_directory_while_it_is_read_is_a_clear_refusal(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kernel code swaps out/ between a link and a directory: realpath saw a link (lstat) and then read a
    directory (readlink: EINVAL). realpath before Python 3.13 lets that error through; the user reads what happened,
    not an internal error (end to end: test_safety_server's export race)."""
    import errno

    (ws / "out").symlink_to(tmp_path / "outside")
    real_readlink = os.readlink

    def swapped_meanwhile(path: object, *args: object, **kwargs: object) -> str:
        if os.fspath(path).endswith("out"):  # type: ignore[call-overload]
            raise OSError(errno.EINVAL, "Invalid argument", os.fspath(path))  # type: ignore[call-overload]
        return real_readlink(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "readlink", swapped_meanwhile)
    if sys.version_info >= (3, 13):  # its realpath takes the part as what it now is (a directory, here)
        assert resolve_inside(ws, "out/n.ipynb") == ws.resolve() / "out" / "n.ipynb"
        return
    with pytest.raises(UserError, match=r"Cannot write out/n\.ipynb: a part of the path changed while it was checked"):
        resolve_inside(ws, "out/n.ipynb")
