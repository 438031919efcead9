"""Attacks on the sandbox's read-only list written after it, as hostile kernel code that has read
docs/security.md would: ways around a read-only mount (hard links, symbolic links, renames, /proc/self/root,
a mount namespace of its own), git configuration the repository includes from elsewhere in the workspace,
and a bare repository laid out at the top of a folder that is not one. Real server, real bubblewrap, real
git run outside the sandbox afterwards."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
import uuid
from pathlib import Path

import pytest

from harness import needs_bwrap, start_session, stop_session

SANDBOX = {"sandbox": "bubblewrap"}
TRUSTED = {"trusted": True}

HELPERS = """
import json, os, subprocess
results = {}
def attempt(name, action):
    try:
        out = action()
        results[name] = "DONE" if not isinstance(out, subprocess.CompletedProcess) or out.returncode == 0 \\
            else "failed: " + (out.stdout + out.stderr).strip()[-300:]
    except Exception as error:
        results[name] = getattr(error, "strerror", None) or type(error).__name__
def write(path, text, mode="a"):
    with open(path, mode) as handle:
        handle.write(text)
"""


def _git(root: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "HOME": str(home), "GIT_CEILING_DIRECTORIES": str(root.parent)},
    )  # fmt: skip


async def _attack(s, code: str) -> dict[str, str]:
    run_id, status = await s.run_and_wait(HELPERS + textwrap.dedent(code) + "\nprint(json.dumps(results))")
    assert status["state"] == "ok", s.text(run_id)
    return json.loads(s.text(run_id, ("stdout",)).strip().splitlines()[-1])


def _fsmonitor(marker: Path) -> str:
    return f"[core]\\n\\tfsmonitor = touch {marker} #\\n"


@needs_bwrap
async def test_ways_around_a_read_only_mount(workspace_root: Path, home: Path, tmp_path: Path) -> None:
    """Hard links (into and out of a protected path), a symbolic link where the name is, a rename over it,
    writing through /proc/self/root, and a user + mount namespace of the kernel's own where it tries to
    unmount or remount the protection: none changes what git reads."""
    _git(workspace_root, "init", "-q", "-b", "main", home=home)
    (workspace_root / ".vscode").mkdir()
    (workspace_root / ".vscode" / "settings.json").write_text("{}\n")
    config = (workspace_root / ".git" / "config").read_text()
    marker = tmp_path / f"ran-{uuid.uuid4().hex}"
    root = str(workspace_root)
    s = await start_session(workspace_root, home, configuration=SANDBOX, env={"HOME": str(home)}, init_options=TRUSTED)
    try:
        results = await _attack(s, f"""
            fsmonitor = "{_fsmonitor(marker)}"
            write("evil.json", '{{"version": "2.0.0", "tasks": []}}')
            attempt("link-out", lambda: (os.link(".git/config", "config-link"), write("config-link", fsmonitor)))
            attempt("link-in", lambda: os.link("evil.json", ".vscode/tasks.json"))
            attempt("symlink-over", lambda: (os.symlink("elsewhere", "link"), os.replace("link", ".vscode")))
            attempt("rename-over", lambda: (os.mkdir("fake-vscode"), os.replace("fake-vscode", ".vscode")))
            attempt("rename-into", lambda: os.rename("evil.json", ".vscode/tasks.json"))
            attempt("proc-root", lambda: write("/proc/self/root{root}/.git/config", fsmonitor))
            attempt("proc-1-root", lambda: write("/proc/1/root{root}/.git/config", fsmonitor))
            attempt("proc-1-cwd", lambda: write("/proc/1/cwd/.git/config", fsmonitor))
            script = (
                "umount -l {root}/.git 2>&1; mount -o remount,rw,bind {root}/.git 2>&1; "
                "mount --bind {root}/evil.json {root}/.git/config 2>&1; "
                "printf '%s' '{_fsmonitor(marker)}' >> {root}/.git/config; exit 1"
            )
            # As root without capabilities (a root server's sandbox) no uid can be mapped (Linux 5.12+ needs
            # CAP_SETFCAP to map root): the namespace is made without a map, with every capability in it.
            write("ns.sh", script, "w")
            attempt("own-namespace", lambda: subprocess.run("unshare -Urm sh ns.sh || unshare -Um sh ns.sh",
                                                            shell=True, capture_output=True, text=True))
            attempt("chmod", lambda: os.chmod(".git/config", 0o666))
        """)
        for name, outcome in results.items():
            assert outcome != "DONE", (name, results)
        assert (workspace_root / ".git" / "config").read_text() == config
        assert not (workspace_root / ".vscode" / "tasks.json").exists()
        assert _git(workspace_root, "status", home=home).returncode == 0
        assert not marker.exists(), results
    finally:
        await stop_session(s)


@needs_bwrap
async def test_git_config_included_from_the_workspace_is_read_only(
    workspace_root: Path, home: Path, tmp_path: Path
) -> None:
    """A repository whose config includes a file of the workspace (`include.path = ../team.gitconfig`, a
    common way to share settings): git reads that file as its config, so the kernel must not write it."""
    _git(workspace_root, "init", "-q", "-b", "main", home=home)
    (workspace_root / "team.gitconfig").write_text("[user]\n\tname = team\n")
    _git(workspace_root, "config", "include.path", "../team.gitconfig", home=home)
    (workspace_root / "conditional.gitconfig").write_text("")
    condition = f"includeIf.gitdir:{workspace_root}/.git.path"
    _git(workspace_root, "config", condition, "../conditional.gitconfig", home=home)
    marker = tmp_path / f"ran-{uuid.uuid4().hex}"
    s = await start_session(workspace_root, home, configuration=SANDBOX, env={"HOME": str(home)}, init_options=TRUSTED)
    try:
        results = await _attack(s, f"""
            attempt("include", lambda: write("team.gitconfig", "{_fsmonitor(marker)}"))
            attempt("include-if", lambda: write("conditional.gitconfig", "{_fsmonitor(marker)}"))
        """)
        assert _git(workspace_root, "status", home=home).returncode == 0
        assert not marker.exists(), f"git ran the fsmonitor of an included file: {results}"
        assert results == {"include": "Read-only file system", "include-if": "Read-only file system"}
    finally:
        await stop_session(s)


@needs_bwrap
async def test_a_bare_repository_laid_out_at_the_top_is_stopped_by_git_s_own_setting(
    workspace_root: Path, home: Path, tmp_path: Path
) -> None:
    """Not covered by the sandbox (docs/security.md says so): in a folder that is not a repository the
    kernel can lay out a bare repository at the top (HEAD, objects/, refs/, config), whose config git reads
    when you run git there; git's own `safe.bareRepository = explicit`, which the docs recommend, refuses
    it. The test keeps that statement true: the layout works as a repository for git by default, and the
    setting stops it."""
    marker = tmp_path / f"ran-{uuid.uuid4().hex}"
    s = await start_session(workspace_root, home, configuration=SANDBOX, env={"HOME": str(home)}, init_options=TRUSTED)
    try:
        results = await _attack(s, f"""
            attempt("objects", lambda: os.makedirs("objects"))
            attempt("refs", lambda: os.makedirs("refs/heads"))
            attempt("HEAD", lambda: write("HEAD", "ref: refs/heads/main\\n", "w"))
            config = "[core]\\n\\tbare = true\\n\\tpager = touch {marker}; cat\\n"
            attempt("config", lambda: write("config", config, "w"))
        """)
        assert set(results.values()) == {"DONE"}, results
    finally:
        await stop_session(s)
    # At a terminal (script(1) gives git one), `git branch` pages its output through core.pager.
    paged = _git_at_a_terminal(workspace_root, "git branch -a", home)
    assert marker.exists(), paged  # the residual risk the docs state
    marker.unlink()
    refused = _git_at_a_terminal(workspace_root, "git -c safe.bareRepository=explicit branch -a", home)
    assert "cannot use bare repository" in refused, refused
    assert not marker.exists()


def _git_at_a_terminal(root: Path, command: str, home: Path) -> str:
    script = shutil.which("script")
    if script is None:
        pytest.skip("needs script(1) (util-linux) to give git a terminal")
    return subprocess.run(
        [script, "-qec", command, "/dev/null"], cwd=root, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "HOME": str(home), "GIT_CEILING_DIRECTORIES": str(root.parent), "TERM": "dumb"},
    ).stdout  # fmt: skip


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_list_in_the_docs_is_the_list_in_the_code() -> None:
    """docs/security.md names every entry of readonly.py's lists (a path added to one must be explained)."""
    from interpreter_lsp.kernels import readonly

    docs = (Path(__file__).resolve().parents[1] / "docs" / "security.md").read_text()
    names = [*readonly.CONFIG_DIRS, *readonly.CONFIG_FILES, *readonly.VENV_NAMES, *readonly.CONFIG_DIR_VARIABLES]
    missing = [name for name in names if f"`{name.rstrip('*')}" not in docs]
    assert missing == []
