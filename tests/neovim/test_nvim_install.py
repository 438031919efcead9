"""The server in its own environment, installed by the plugin: :InterpreterInstall, for a user who has no
interpreter-lsp on PATH and no `cmd` in their config.

The full install (marked `install`: pip fetches the server's dependencies from the package index, a
minute or more) runs in scripts/test.d/50-package.sh with `-m install`; the checks that need no network
(the missing server, an old Python, a failing pip) run with the rest of the suite.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from nvim_harness import PLUGIN, REPO, SLOW_MS, Editor

NOT_FOUND = "interpreter-lsp not found: run :InterpreterInstall (or set cmd)"
# The install is pip fetching litellm and the Jupyter stack: minutes on a slow link, never ten.
INSTALL_MS = 600_000

# Tools the install steps use (python3 -m venv, cp), without the repository's .venv/bin.
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def managed(editor_env: Path) -> Path:
    return editor_env / "data" / "nvim" / "interpreter-lsp" / "venv"


def notes(ed: Editor) -> list[dict]:
    return ed.lua("return require('interpreter_lsp_test').notes")


def note_text(ed: Editor) -> str:
    """What the install said: whole in its buffer (interpreter://install), one line each as messages."""
    said = ed.lua("return require('interpreter_lsp.install').progress_lines()")
    return "\n".join(said) + "\n" + "\n".join(n["msg"] for n in notes(ed))


def one_line_each(ed: Editor) -> None:
    """Every message fits one line of the screen: none stops the editor at a hit-enter prompt."""
    columns = ed.lua("return vim.o.columns")
    for n in notes(ed):
        assert "\n" not in n["msg"] and len(n["msg"]) < columns, n


def install(ed: Editor, bang: str = "") -> float:
    """:InterpreterInstall[!] and wait until it ends (either way); returns the seconds it took."""
    started = time.monotonic()
    ed.nvim.command(f"InterpreterInstall{bang}")
    done = ed.lua(
        "return vim.wait(..., function() return require('interpreter_lsp.install').job == nil end, 100)",
        INSTALL_MS,
    )
    assert done, "the install did not end:\n" + note_text(ed)
    return time.monotonic() - started


def test_a_missing_server_tells_the_user_to_install_it_once(start_editor, monkeypatch) -> None:
    monkeypatch.setenv("PATH", SYSTEM_PATH)
    ed: Editor = start_editor(cmd=None)
    ed.nvim.command(f"edit {ed.workspace / 'demo.py'}")
    (ed.workspace / "other.py").write_text("print(1)\n")
    ed.nvim.command(f"edit {ed.workspace / 'other.py'}")
    said = [n for n in notes(ed) if NOT_FOUND in n["msg"]]
    assert len(said) == 1, notes(ed)
    assert said[0]["level"] == 4  # vim.log.levels.ERROR

    # A command that needs the server says the same.
    ed.nvim.command("InterpreterRun")
    assert NOT_FOUND in notes(ed)[-1]["msg"]

    text = "\n".join(ed.helper("checkhealth"))
    assert f"ERROR {NOT_FOUND}" in text, text
    assert ":InterpreterInstall installs it into" in text and "interpreter-lsp/venv" in text


def test_checkhealth_says_where_the_server_comes_from(start_editor, monkeypatch) -> None:
    from nvim_harness import SERVER

    ed: Editor = start_editor()  # the harness's cmd: this checkout's .venv
    text = "\n".join(ed.helper("checkhealth"))
    assert f"server from the setup option cmd: {SERVER}" in text, text

    monkeypatch.setenv("PATH", f"{SERVER.parent}:{SYSTEM_PATH}")
    ed = start_editor(cmd=None)
    text = "\n".join(ed.helper("checkhealth"))
    assert f"server found on PATH: {SERVER}" in text, text


def old_python() -> tuple[Path, str] | None:
    """An interpreter older than 3.10 (the binary itself: a pyenv shim needs a PATH of its own)."""
    roots = [os.environ.get("PYENV_ROOT", ""), str(Path(pwd.getpwuid(os.getuid()).pw_dir) / ".pyenv")]
    found = [shutil.which(f"python3.{minor}") for minor in range(9, 5, -1)]
    found += [str(p) for root in roots if root for p in sorted(Path(root).glob("versions/3.[6-9].*/bin/python3.?"))]
    for candidate in filter(None, found):
        done = subprocess.run(
            [
                candidate,
                "-c",
                "import sys, platform; sys.version_info < (3, 10) and print(sys.executable, platform.python_version())",
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode == 0 and done.stdout.strip():
            path, version = done.stdout.split()
            if tuple(map(int, version.split(".")[:2])) < (3, 10):
                return Path(path).resolve(), version
    return None


def test_no_python_new_enough_is_named(start_editor, monkeypatch, tmp_path: Path, editor_env: Path) -> None:
    found = old_python()
    if found is None:
        pytest.skip("no Python older than 3.10 on this machine to stand for an old python3")
    old, version = found
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(old)
    monkeypatch.setenv("PATH", str(bin_dir))  # the only Python there is old
    ed: Editor = start_editor(cmd=None)
    install(ed)
    text = note_text(ed)
    assert "the server needs Python 3.10 or newer, and none was found" in text, text
    assert f"python3 on PATH is {version} ({bin_dir}/python3)" in text, text
    assert "g:python3_host_prog is not set" in text
    assert not managed(editor_env).exists()
    one_line_each(ed)

    # g:python3_host_prog is the way out.
    ed.nvim.command("let g:python3_host_prog = '/nonexistent/python3'")
    install(ed)
    said = ed.lua("return require('interpreter_lsp.install').progress_lines()")
    assert "g:python3_host_prog is not set" not in said[-1], said


def test_a_failing_pip_shows_its_last_lines_and_leaves_nothing_used(
    start_editor, monkeypatch, tmp_path: Path, editor_env: Path
) -> None:
    # The plugin in a checkout whose pyproject.toml is broken: pip fails at once, with no network.
    repo = tmp_path / "repo"
    shutil.copytree(PLUGIN, repo / "clients" / "neovim")
    shutil.copytree(
        REPO / "server" / "interpreter_lsp",
        repo / "server" / "interpreter_lsp",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (repo / "server" / "README.md").write_text("x\n")
    (repo / "LICENSE").write_text("MIT\n")
    (repo / "pyproject.toml").write_text('[project]\nname = "interpreter-lsp"\nversion = [broken\n')
    monkeypatch.setenv("INTERPRETER_LSP_PLUGIN", str(repo / "clients" / "neovim"))
    monkeypatch.setenv("PATH", SYSTEM_PATH)
    ed: Editor = start_editor(cmd=None)
    install(ed)
    error = notes(ed)[-1]
    assert error["level"] == 4, notes(ed)
    assert "pip could not install interpreter-lsp" in error["msg"], error
    one_line_each(ed)
    # pip's own last words say what is wrong, in the install's buffer (shown in a split); the whole
    # output is in the log it names.
    said = note_text(ed)
    log = editor_env / "data" / "nvim" / "interpreter-lsp" / "install.log"
    assert f"(the whole output: {log})" in said
    last = log.read_text().strip().splitlines()[-1]
    assert "TOML" in last and last in said, (last, said)
    shown = ed.lua("return vim.fn.win_findbuf(vim.fn.bufnr('interpreter://install'))")
    assert shown, "the install's buffer is on screen"
    assert "not on the package index yet" not in said, "a clone was given: no word about the index"
    # The environment pip failed in is not used: the server is still "not found".
    venv = managed(editor_env)
    assert (venv / "bin" / "python").exists()
    assert not (venv / "interpreter-lsp-install.json").exists()
    ed.nvim.command(f"edit {ed.workspace / 'demo.py'}")
    assert any(NOT_FOUND in n["msg"] for n in notes(ed)), notes(ed)
    text = "\n".join(ed.helper("checkhealth"))
    assert f"WARNING {venv} is an install that did not complete: it is not used" in text, text


@pytest.mark.install
@pytest.mark.timeout(1800)
def test_install_then_run_then_restart_uses_it(start_editor, monkeypatch, editor_env: Path) -> None:
    monkeypatch.setenv("PATH", SYSTEM_PATH)
    ed: Editor = start_editor(cmd=None)
    ed.nvim.command(f"edit {ed.workspace / 'demo.py'}")
    assert any(NOT_FOUND in n["msg"] for n in notes(ed)), notes(ed)
    assert "ERROR " + NOT_FOUND in "\n".join(ed.helper("checkhealth"))
    ed.nvim.command(f"edit {ed.workspace / 'demo.py'}")

    # The editor stays responsive while pip works: a 10 ms timer keeps running on the main loop, and a
    # file opened meanwhile is told the server is coming.
    ed.helper("start_lag_probe")
    started = time.monotonic()
    ed.nvim.command("InterpreterInstall")
    (ed.workspace / "other.py").write_text("print('other file ran')\n")
    ed.nvim.command(f"edit {ed.workspace / 'other.py'}")
    assert "the server is being installed; it starts when that is done" in note_text(ed)
    install(ed)  # a second :InterpreterInstall while the first runs: "already running"; waits for the end
    seconds = time.monotonic() - started
    lag = ed.helper("stop_lag_probe")
    assert "an install is already running" in note_text(ed)
    text = note_text(ed)
    print(f"\n:InterpreterInstall took {seconds:.0f} s; the longest main-loop stall was {lag['max_ms']:.0f} ms")
    assert "creating the server's environment" in text, text
    assert "installing interpreter-lsp from this plugin's checkout" in text
    assert "interpreter-lsp 0.1.0 installed in" in text, text
    assert lag["max_ms"] < 10_000, lag
    venv = managed(editor_env)
    marker = json.loads((venv / "interpreter-lsp-install.json").read_text())
    assert marker["version"] == "0.1.0" and marker["source"] == f"checkout:{REPO}"
    # Its own environment: the checkout's .venv is not it, and the workspace has none.
    assert (venv / "bin" / "interpreter-lsp").exists()
    assert not (ed.workspace / ".venv").exists()

    # The open buffers got the server when the install ended; a cell runs.
    assert ed.helper("wait_client", SLOW_MS), "the managed server did not start for other.py"
    ed.nvim.command(f"buffer {ed.workspace / 'demo.py'}")
    assert ed.helper("wait_client", SLOW_MS), "the managed server did not start for demo.py"
    ed.nvim.command("call cursor(3, 1)")
    ed.nvim.command("InterpreterRun")
    assert "x is 42" in "\n".join(ed.wait_panel("✓ **Run**"))
    health = "\n".join(ed.helper("checkhealth"))
    assert f"server from the managed install (:InterpreterInstall): {venv}/bin/interpreter-lsp" in health, health
    assert "interpreter-lsp 0.1.0" in health

    # A new Neovim uses it without asking.
    ed2: Editor = start_editor(cmd=None)
    ed2.open("demo.py")
    client_cmd = ed2.lua("return vim.lsp.get_clients({ name = 'interpreter_lsp' })[1].config.cmd")
    assert client_cmd[0] == f"{venv}/bin/interpreter-lsp", client_cmd
    assert not any("InterpreterInstall" in n["msg"] for n in notes(ed2)), notes(ed2)
    install(ed2)  # up to date: nothing to do
    assert "interpreter-lsp 0.1.0 is installed" in notes(ed2)[-1]["msg"], notes(ed2)
    before = (venv / "interpreter-lsp-install.json").stat().st_mtime_ns
    seconds = install(ed2, "!")  # reinstall all the same, in place
    print(f":InterpreterInstall! took {seconds:.0f} s")
    assert "interpreter-lsp 0.1.0 installed in" in note_text(ed2), note_text(ed2)
    assert (venv / "interpreter-lsp-install.json").stat().st_mtime_ns > before

    # The plugin moved on (here: the install says it is older): the next start says so, and
    # :InterpreterInstall updates it in place.
    marker["version"] = "0.0.1"
    (venv / "interpreter-lsp-install.json").write_text(json.dumps(marker))
    ed3: Editor = start_editor(cmd=None)
    ed3.open("demo.py")
    update = "the installed server is 0.0.1, the plugin is 0.1.0: run :InterpreterInstall to update it"
    assert any(update in n["msg"] for n in notes(ed3)), notes(ed3)
    seconds = install(ed3)
    print(f":InterpreterInstall as an update took {seconds:.0f} s")
    assert "interpreter-lsp 0.1.0 installed in" in note_text(ed3), note_text(ed3)
    assert "the running server keeps the version it started with until Neovim restarts" in note_text(ed3)
    assert json.loads((venv / "interpreter-lsp-install.json").read_text())["version"] == "0.1.0"


@pytest.mark.install
@pytest.mark.timeout(1200)
def test_a_plugin_without_the_server_sources_installs_from_the_package_index(
    start_editor, monkeypatch, tmp_path: Path, editor_env: Path
) -> None:
    # The plugin folder alone, as a plugin manager that copies only clients/neovim would leave it.
    plugin = tmp_path / "interpreter_lsp.nvim"
    shutil.copytree(PLUGIN, plugin)
    monkeypatch.setenv("INTERPRETER_LSP_PLUGIN", str(plugin))
    monkeypatch.setenv("PATH", SYSTEM_PATH)
    ed: Editor = start_editor(cmd=None)
    seconds = install(ed)
    text = note_text(ed)
    print(f"\n:InterpreterInstall from the package index ended after {seconds:.0f} s")
    assert "installing interpreter-lsp from the package index with pip" in text, text
    marker = managed(editor_env) / "interpreter-lsp-install.json"
    if marker.exists():  # published: it installed, and from the index
        assert json.loads(marker.read_text())["source"] == "index"
        assert "installed in" in text
    else:  # not published (yet): pip's own words say so, and nothing half-done is used
        print(text)
        assert "pip could not install interpreter-lsp" in text, text
        assert "install it from what you have, :InterpreterInstall /path/to/a/clone" in text, text
        assert "\n".join(ed.helper("checkhealth")).count("is an install that did not complete") == 1


def test_the_providers_extra_is_installed_only_for_a_model_that_needs_litellm(start_editor) -> None:
    ed: Editor = start_editor(cmd=None)
    check = "return require('interpreter_lsp.install').needs_providers(...)"
    for settings in ({}, {"model": "openai/qwen"}, {"model": "ollama_chat/qwen2.5-coder"}, {"model": "gpt-4o-mini"},
                     {"model": "anthropic/claude-sonnet-4-5", "reviewModel": "claude-haiku-4-5"}):  # fmt: skip
        assert ed.lua(check, settings) is False, settings
    for settings in ({"model": "gemini/gemini-2.0-flash"}, {"model": "openai/qwen", "reviewModel": "groq/llama3"},
                     {"model": "command-r"}):  # fmt: skip
        assert ed.lua(check, settings) is True, settings


def test_outside_a_checkout_the_install_takes_a_clone_a_wheel_or_a_git_url(
    start_editor, monkeypatch, tmp_path: Path, editor_env: Path
) -> None:
    """The plugin folder alone (a plugin manager's copy): the package is not on the index, so
    :InterpreterInstall takes what the user has, and says what to give when pip finds nothing."""
    plugin = tmp_path / "interpreter_lsp.nvim"
    shutil.copytree(PLUGIN, plugin)
    monkeypatch.setenv("INTERPRETER_LSP_PLUGIN", str(plugin))
    monkeypatch.setenv("PATH", SYSTEM_PATH)
    # An index with nothing on it: pip answers at once that there is no such package, as PyPI does today.
    index = tmp_path / "empty-index"
    index.mkdir()
    monkeypatch.setenv("PIP_INDEX_URL", index.as_uri())
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    ed: Editor = start_editor(cmd=None)

    ed.nvim.command(f"InterpreterInstall {tmp_path / 'nowhere'}")
    assert "nowhere was not found: give a clone's folder, a .whl file, or a git URL" in note_text(ed)
    (tmp_path / "not-a-clone").mkdir()
    ed.nvim.command(f"InterpreterInstall {tmp_path / 'not-a-clone'}")
    assert "has no interpreter-lsp sources" in note_text(ed)
    assert not managed(editor_env).exists(), "nothing was made for a wrong source"

    install(ed)
    said = note_text(ed)
    assert "installing interpreter-lsp from the package index" in said, said
    assert "pip could not install interpreter-lsp" in said, said
    assert (
        "interpreter-lsp is not on the package index yet: install it from what you have, "
        ":InterpreterInstall /path/to/a/clone" in said
    ), said
    one_line_each(ed)

    # A clone's folder: installed from there (here a broken one, so pip stops at once, with no network).
    repo = tmp_path / "my clone"
    shutil.copytree(
        REPO / "server" / "interpreter_lsp",
        repo / "server" / "interpreter_lsp",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (repo / "server" / "README.md").write_text("x\n")
    (repo / "LICENSE").write_text("MIT\n")
    (repo / "pyproject.toml").write_text('[project]\nname = "interpreter-lsp"\nversion = [broken\n')
    ed.nvim.command("InterpreterInstall " + str(repo).replace(" ", "\\ "))
    done = ed.lua(
        "return vim.wait(..., function() return require('interpreter_lsp.install').job == nil end, 100)", INSTALL_MS
    )
    assert done
    said = note_text(ed)
    assert f"installing interpreter-lsp from the clone {repo} with pip" in said, said
    assert "TOML" in said
