"""The sandbox writes nothing that runs outside it (issue 18, point 4), through the real server: real kernels in
real bubblewrap, real git run afterwards outside the sandbox as the user would. Hostile kernel code plants
what git, an editor or the server would read or run later; each plant must fail, and the real program run
afterwards must show that nothing ran. Also: no keyring, no descriptor of the server's, no shadowing of the
kernel's own launcher module by a workspace file."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import uuid
from pathlib import Path

import pytest

from harness import needs_bwrap, start_session, stop_session
from interpreter_lsp import code_cache
from interpreter_lsp.kernels import readonly, sandbox

SANDBOX = {"sandbox": "bubblewrap"}
TRUSTED = {"trusted": True}

# A git directory of the kernel's making: git reads its config, and core.fsmonitor runs at `git status`.
FAKE_GIT_DIR = """
import os
def fake_git_dir(path, marker, head=True):
    os.makedirs(os.path.join(path, "objects"), exist_ok=True)
    os.makedirs(os.path.join(path, "refs", "heads"), exist_ok=True)
    hook = os.path.join(os.path.abspath(path), "fsmonitor.sh")
    with open(hook, "w") as f:
        f.write("#!/bin/sh\\ntouch " + marker + "\\n")
    os.chmod(hook, 0o755)
    with open(os.path.join(path, "config"), "w") as f:
        f.write("[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = " + hook + "\\n\\thooksPath = " +
                os.path.abspath(path) + "\\n")
    if head:
        with open(os.path.join(path, "HEAD"), "w") as f:
            f.write("ref: refs/heads/main\\n")

results = {}
def attempt(name, action):
    try:
        action()
        results[name] = "DONE"
    except Exception as error:
        results[name] = getattr(error, "strerror", None) or type(error).__name__
"""


def _git(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Real git, outside the sandbox, as the user runs it (a fresh HOME: no config of this machine's)."""
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "GIT_CEILING_DIRECTORIES": str(root.parent), **(env or {})},
    )  # fmt: skip


async def _attack(s, code: str) -> dict[str, str]:
    run_id, status = await s.run_and_wait(FAKE_GIT_DIR + textwrap.dedent(code) + "\nprint(json.dumps(results))")
    assert status["state"] == "ok", s.text(run_id)
    return json.loads(s.text(run_id, ("stdout",)).strip().splitlines()[-1])


def _refused(results: dict[str, str], *names: str) -> None:
    for name in names:
        assert results[name] != "DONE", (name, results)


# ---- git ------------------------------------------------------------------------------------------------


def _repository(kind: str, root: Path, tmp: Path, home: Path) -> None:
    """The workspace as a repository of `kind`: a plain one; a linked worktree (its `.git` is a file naming a
    git directory elsewhere); one whose git directory is inside the workspace under another name."""
    env = {"HOME": str(home)}
    if kind == "repository":
        _git(root, "init", "-q", "-b", "main", env=env)
    elif kind == "worktree":
        main = tmp / "main"
        main.mkdir()
        _git(main, "init", "-q", "-b", "main", env=env)
        _git(main, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x", env=env)
        root.rmdir()
        assert _git(main, "worktree", "add", "-q", str(root), env=env).returncode == 0
    else:  # a git directory inside the workspace, named by the `.git` file
        _git(root, "init", "-q", "-b", "main", f"--separate-git-dir={root / 'repo.git'}", env=env)
    assert _git(root, "status", env=env).returncode == 0


@needs_bwrap
@pytest.mark.parametrize("kind", ["repository", "worktree", "separate-git-dir"])
async def test_git_run_outside_runs_nothing_the_kernel_planted(
    workspace_root: Path, home: Path, tmp_path: Path, kind: str
) -> None:
    """The kernel plants `.git/commondir` pointing at a directory of its own whose config has a core.fsmonitor
    (and hooksPath), rewrites the `.git` file of a worktree, adds config to the git directory it names:
    the user's next `git status`, outside the sandbox, must run none of it."""
    _repository(kind, workspace_root, tmp_path, home)
    marker = tmp_path / f"fsmonitor-ran-{uuid.uuid4().hex}"
    s = await start_session(workspace_root, home, configuration=SANDBOX, env={"HOME": str(home)}, init_options=TRUSTED)
    try:
        results = await _attack(s, f"""
            import json, subprocess
            git_dir = subprocess.run(["git", "rev-parse", "--absolute-git-dir"], capture_output=True,
                                     text=True).stdout.strip()
            # A worktree's git directory is in the main repository, outside: out of sight (or read-only) here.
            git_dir = git_dir if git_dir and os.path.isdir(git_dir) else "/nonexistent-git-dir"
            fake_git_dir("evil-common", {str(marker)!r}, head=False)
            fake_git_dir("evil-gitdir", {str(marker)!r})
            def write(path, text, mode="w"):
                with open(path, mode) as handle:
                    handle.write(text)
            attempt("move-git", lambda: (os.rename(".git", "git-aside"), os.rename("git-aside", ".git")))
            common = "{workspace_root}/evil-common\\n"
            fsmonitor = "[core]\\n\\tfsmonitor = {workspace_root}/evil-gitdir/fsmonitor.sh\\n"
            attempt("commondir", lambda: write(os.path.join(git_dir, "commondir"), common))
            attempt("dot-git-commondir", lambda: write(".git/commondir", common))
            attempt("config", lambda: write(os.path.join(git_dir, "config"), fsmonitor, "a"))
            attempt("config.worktree", lambda: write(os.path.join(git_dir, "config.worktree"), fsmonitor))
            attempt("hook", lambda: write(os.path.join(git_dir, "hooks", "pre-commit"), "#!/bin/sh\\ntouch x\\n"))
            attempt("git-config-command", lambda: subprocess.run(
                ["git", "config", "core.fsmonitor", "{workspace_root}/evil-gitdir/fsmonitor.sh"], check=True,
                capture_output=True))
            attempt("gitfile", lambda: write(".git", "gitdir: evil-gitdir\\n"))  # last: it may break the others
        """)
        status = _git(workspace_root, "status", env={"HOME": str(home)})
        assert not marker.exists(), f"git status ran the kernel's fsmonitor ({kind}): {results}"
        assert status.returncode == 0, status.stderr
        _refused(results, "commondir", "config", "config.worktree", "gitfile", "move-git", "hook", "git-config-command")
        if kind == "repository":
            _refused(results, "dot-git-commondir")
    finally:
        await stop_session(s)


@needs_bwrap
async def test_no_git_repository_can_be_created_where_there_is_none(
    workspace_root: Path, home: Path, tmp_path: Path
) -> None:
    """A folder that is not a repository: `git init`, `mkdir .git`, a `.git` file, a directory renamed to
    `.git` all fail inside the sandbox; outside, git still finds no repository, and nothing of the kernel's
    ran. What the server leaves on the host is an empty placeholder directory, which git looks past."""
    assert _git(workspace_root, "status").returncode != 0  # not a repository to start with
    marker = tmp_path / f"fsmonitor-ran-{uuid.uuid4().hex}"
    s = await start_session(workspace_root, home, configuration=SANDBOX, env={"HOME": str(home)}, init_options=TRUSTED)
    try:
        results = await _attack(s, f"""
            import json, shutil, subprocess
            fake_git_dir("prepared", {str(marker)!r})
            attempt("git-init", lambda: subprocess.run(["git", "init", "-q"], check=True, capture_output=True))
            attempt("mkdir", lambda: os.mkdir(".git/sub"))
            attempt("gitfile", lambda: open(".git", "w").write("gitdir: prepared\\n"))
            attempt("rename", lambda: os.rename("prepared", ".git"))
            attempt("rmdir", lambda: os.rmdir(".git"))
            attempt("copy-into", lambda: shutil.copytree("prepared", ".git", dirs_exist_ok=True))
        """)
        run_id, _status = await s.run_and_wait("git status; git init; echo done", "shell")
        assert "done" in s.text(run_id)
        outside = _git(workspace_root, "status", env={"HOME": str(home)})
        assert not marker.exists(), f"git status ran the kernel's fsmonitor: {results}"
        assert outside.returncode != 0 and "not a git repository" in outside.stderr, outside
        _refused(results, "git-init", "mkdir", "gitfile", "rename", "rmdir", "copy-into")
        assert list((workspace_root / ".git").iterdir()) == []  # the placeholder, empty
    finally:
        await stop_session(s)
    # The server removes the placeholders it made once its kernels have ended.
    left = {p.name for p in workspace_root.iterdir()} & set(readonly.CONFIG_DIRS)  # noqa: ASYNC240
    assert left == set(), left


@needs_bwrap
async def test_placeholders_stay_while_another_server_uses_them(workspace_root: Path, home: Path) -> None:
    """Two servers (two editors) sandbox the same folder: the first to quit must not remove the placeholders
    the other's sandbox has mounted (removing them on the host would unmount them there)."""
    first = await start_session(workspace_root, home, configuration=SANDBOX, env={"HOME": str(home)})
    second = None
    try:
        run_id, status = await first.run_and_wait("print('first')")
        assert status["state"] == "ok", first.text(run_id)
        second = await start_session(workspace_root, home, configuration=SANDBOX, env={"HOME": str(home)})
        run_id, status = await second.run_and_wait("print('second')")
        assert status["state"] == "ok", second.text(run_id)
    finally:
        await stop_session(first)
    try:
        assert (workspace_root / ".git").is_dir()
        code = "import json, subprocess\nattempt('git-init', lambda: subprocess.run(['git', 'init', '-q'], check=True))"
        results = await _attack(second, code)
        assert results["git-init"] != "DONE", results
    finally:
        await stop_session(second)
    assert not (workspace_root / ".git").exists()


# ---- editor, tool and server configuration -------------------------------------------------------------------

EXISTING = {
    ".vscode/settings.json": "{}\n",
    ".idea/workspace.xml": "<project/>\n",
    ".zed/settings.json": "{}\n",
    ".helix/languages.toml": "\n",
    ".devcontainer/devcontainer.json": "{}\n",
    ".devcontainer.json": "{}\n",
    ".envrc": "export A=1\n",
    ".env": "A=1\n",
    ".env.local": "A=1\n",
    ".interpreter-lsp.toml": "maxSteps = 7\n",
    ".dir-locals.el": "()\n",
    ".nvim.lua": "\n",
    ".exrc": "\n",
    ".gitmodules": "\n",
    ".pre-commit-config.yaml": "repos: []\n",
    "src/sitecustomize.py": "\n",
}
# Created by the kernel where they were not: an editor's folder, a start-up module on the kernel's path.
ABSENT = [".vscode/tasks.json", ".idea/runConfigurations.xml", ".zed/tasks.json", ".helix/config.toml",
          ".devcontainer/devcontainer.json", "lib/usercustomize.py", "lib/sitecustomize.py", "lib/json.py"]  # fmt: skip


@needs_bwrap
@pytest.mark.parametrize("existing", [True, False], ids=["existing", "absent"])
async def test_configuration_read_elsewhere_cannot_be_written(workspace_root: Path, home: Path, existing: bool) -> None:
    """Each path an editor, git, direnv, Python or the server reads as configuration: writing it, replacing
    it (rename over it, remove it) fails; where it did not exist it cannot be created (editor folders, the
    start-up modules of a PYTHONPATH directory in the workspace). Ordinary files are still writable."""
    (workspace_root / "src").mkdir()
    (workspace_root / "lib").mkdir()
    paths = list(EXISTING) if existing else ABSENT
    if existing:
        for name, text in EXISTING.items():
            (workspace_root / name).parent.mkdir(parents=True, exist_ok=True)
            (workspace_root / name).write_text(text)
    pythonpath = os.pathsep.join([str(workspace_root / "src"), str(workspace_root / "lib")])
    s = await start_session(
        workspace_root, home, configuration=SANDBOX, env={"HOME": str(home), "PYTHONPATH": pythonpath},
        init_options=TRUSTED,
    )  # fmt: skip
    try:
        results = await _attack(s, f"""
            import json
            for path in {paths!r}:
                def write(path=path):
                    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
                    with open(path, "a") as handle:
                        handle.write("import os; os.system('touch /tmp/pwned')\\n")
                attempt("write " + path, write)
                attempt("replace " + path, lambda path=path: (open("swap", "w").close(), os.replace("swap", path)))
                top = path.split("/")[0]
                attempt("remove " + top, lambda top=top: shutil.rmtree(top) if os.path.isdir(top) else os.unlink(top))
            import shutil
            with open("ordinary.py", "w") as handle:
                handle.write("x = 1\\n")
            results["ordinary"] = "DONE"
        """.replace("import json\n", "import json, shutil\n"))
        for path in paths:
            _refused(results, f"write {path}", f"replace {path}")
        for top in {path.split("/")[0] for path in paths if not path.startswith(("src/", "lib/"))}:
            _refused(results, f"remove {top}")
        assert results["ordinary"] == "DONE"
        for path in paths:
            target = workspace_root / path
            if existing:
                assert target.read_text() == EXISTING[path], path
            else:
                assert not target.exists(), path
    finally:
        await stop_session(s)


@needs_bwrap
@pytest.mark.parametrize("case", ["home-inside", "on-pythonpath"])
async def test_a_workspace_the_sandbox_cannot_protect_is_refused(workspace_root: Path, home: Path, case: str) -> None:
    """A workspace that holds the home directory (~/.bashrc, ~/.gitconfig, ~/.config are read without asking),
    or that is itself on PYTHONPATH: no kernel starts, and the message says why and what to do."""
    env = {"HOME": str(workspace_root / "me")} if case == "home-inside" else {"PYTHONPATH": str(workspace_root)}
    (workspace_root / "me").mkdir()
    s = await start_session(workspace_root, home, configuration=SANDBOX, env=env, init_options=TRUSTED)
    try:
        run_id, status = await s.run_and_wait("print('must not run')")
        assert status["state"] == "error", s.text(run_id)
        assert "The sandbox cannot protect the workspace" in status["message"], status
        assert "must not run" not in s.text(run_id, ("stdout",))
    finally:
        await stop_session(s)


@needs_bwrap
async def test_ipython_profiles_in_the_workspace_are_read_only(workspace_root: Path, home: Path) -> None:
    """IPYTHONDIR inside the workspace (a project's own profile): the kernel cannot add a startup file or
    config for the next start (which may be without the sandbox). IPython needs a writable directory, so in
    the sandbox it takes a temporary one: the project's startup file does not run there (docs say so)."""
    startup = workspace_root / ".ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-project.py").write_text("PROJECT_STARTUP = 'ran'\n")
    env = {"HOME": str(home), "IPYTHONDIR": str(workspace_root / ".ipython")}
    s = await start_session(workspace_root, home, configuration=SANDBOX, env=env, init_options=TRUSTED)
    try:
        results = await _attack(s, """
            import json
            results["startup"] = globals().get("PROJECT_STARTUP", "not run")
            attempt("plant", lambda: open(".ipython/profile_default/startup/99-evil.py", "w").write("x = 1\\n"))
            attempt("config", lambda: open(".ipython/profile_default/ipython_config.py", "a").write("x = 1\\n"))
        """)
        assert results["startup"] == "not run", results
        _refused(results, "plant", "config")
        assert sorted(p.name for p in startup.iterdir()) == ["00-project.py"]
    finally:
        await stop_session(s)


@needs_bwrap
async def test_the_servers_code_cache_in_the_workspace_is_read_only(workspace_root: Path, home: Path) -> None:
    """XDG_CACHE_HOME inside the workspace: the server's cache of generated code (code_cache.py), which the next
    server start runs outside any sandbox, cannot be replaced, added to or moved aside by kernel code."""
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(workspace_root / ".cache")}
    s = await start_session(workspace_root, home, configuration=SANDBOX, env=env, init_options=TRUSTED)
    cached = code_cache.cache_file(env)
    try:
        assert cached.exists()  # the shared warm copy (harness), as a user's after the first start
        before = cached.read_bytes()
        results = await _attack(s, f"""
            import json, os
            path = {str(cached.relative_to(workspace_root))!r}
            attempt("replace", lambda: open(path, "wb").write(b"planted"))
            attempt("add", lambda: open(path + ".new", "wb").write(b"planted"))
            attempt("move aside", lambda: os.rename(os.path.dirname(path), ".cache/elsewhere"))
            attempt("remove", lambda: os.unlink(path))
        """)
        _refused(results, "replace", "add", "move aside", "remove")
        assert cached.read_bytes() == before
    finally:
        await stop_session(s)


def test_a_code_cache_in_the_workspace_that_cannot_be_made_refuses_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Missing, it is made before the kernel starts (kernel code could make it); when it cannot be, the sandbox
    says so and what to do, rather than start a kernel that could."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(workspace / ".cache"))
    assert sandbox._server_code_dir(str(workspace)) == (workspace / ".cache" / "interpreter-lsp",)
    assert (workspace / ".cache" / "interpreter-lsp").is_dir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "elsewhere"))
    assert sandbox._server_code_dir(str(workspace)) == ()  # outside: the sandbox hides it (an empty home)
    (workspace / "a file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(workspace / "a file" / "cache"))
    with pytest.raises(sandbox.SandboxRefused, match="XDG_CACHE_HOME outside the workspace"):
        sandbox._server_code_dir(str(workspace))
