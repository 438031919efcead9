"""The Python suite on the other supported Pythons, each in its own virtualenv under .nox/.

    .venv/bin/nox -s tests-3.13    the suite on 3.13 with uv.lock's versions (the newest that fit)
    .venv/bin/nox -s tests-3.10    the suite on 3.10 with every dependency at its lower bound
                                   (constraints/lowest-3.10.txt: pyproject.toml's ranges, tested)

scripts/test.d/21-python-3.10.sh and 22-python-3.13.sh run these sessions: the server's whole suite, the
gateway tests included, on the lowest and the newest supported Python; the editor clients' tests run on the
default interpreter in .venv (scripts/test.d/20-python.sh). Extra arguments after `--` go to pytest. Both lock files are
written by scripts/lock.sh.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import nox

REPO = Path(__file__).parent
LOWEST = {"3.10": REPO / "constraints" / "lowest-3.10.txt"}
VERSIONS = ["3.10", "3.13"]

nox.options.default_venv_backend = "uv"
nox.options.reuse_venv = "yes"  # every session re-syncs its venv exactly, so reusing one is safe and fast
nox.options.error_on_missing_interpreters = True  # CI must not pass by skipping a Python


def _runs(exe: str) -> bool:
    try:
        return subprocess.run([exe, "-c", "pass"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _find_interpreters() -> None:
    """Put a working pythonX.Y of each version on PATH. pyenv's shims answer `pythonX.Y` only for the
    versions selected by `pyenv global`, so a version that pyenv has but does not select is found in its
    own directory."""
    root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    for version in VERSIONS:
        exe = shutil.which(f"python{version}")
        if exe and _runs(exe):
            continue
        found = sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"))
        if found and _runs(found[-1]):
            os.environ["PATH"] = f"{Path(found[-1]).parent}{os.pathsep}{os.environ['PATH']}"


_find_interpreters()
os.environ["UV_PYTHON_DOWNLOADS"] = "never"  # a missing Python is an error, never a download


def _check_no_compromised_litellm(session: nox.Session) -> None:
    venv = Path(session.virtualenv.location)
    if any(venv.rglob("litellm_init.pth")):
        session.error(f"litellm_init.pth found in {venv}: a compromised litellm release is installed")


@nox.session(python=VERSIONS)
def tests(session: nox.Session) -> None:
    """The Python suite (unit, end-to-end over LSP with real kernels) on one Python."""
    # Bytecode compiled at install, as scripts/setup.sh does: with PYTHONDONTWRITEBYTECODE set (CI machines)
    # every process would compile its imports from source again.
    env = {"UV_PROJECT_ENVIRONMENT": session.virtualenv.location, "UV_COMPILE_BYTECODE": "1"}
    lowest = LOWEST.get(str(session.python))
    if lowest is not None:
        # Exactly the lower bounds (and the test tools), then the server itself without resolving again.
        session.run_install("uv", "pip", "sync", "--strict", str(lowest), env=env)
        session.run_install("uv", "pip", "install", "--no-deps", "-e", ".", env=env)
    else:
        session.run_install("uv", "sync", "--locked", "--extra", "test", env=env)
    # The server's own source (editable, outside site-packages) is compiled too: uv compiles only what it
    # installs, and with PYTHONDONTWRITEBYTECODE every server process would compile 1 MB of it again.
    session.run("python", "-m", "compileall", "-q", "-j", "0", "server", silent=True)
    _check_no_compromised_litellm(session)
    session.run("python", "-c", "import sys, interpreter_lsp; print(sys.version, interpreter_lsp.__file__)")
    session.run(
        "python",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        # Two workers (pytest-xdist), each test file on one: most tests wait on processes (servers, kernels,
        # editors) more than they compute, so one stream of tests leaves a core idle.
        "-n",
        "2",
        "--dist",
        "loadfile",
        "--durations=20",  # the slowest tests in the log: where the suite's time goes
        # The editor clients' own tests (Neovim, Emacs) test Lua and Elisp against the server: they run once,
        # on the default interpreter (20-python.sh). Here the server's own behaviour on this Python is what
        # is tested, over LSP by the rest of the suite. (scripts/try.sh is bound to .venv as well.)
        "--ignore=tests/neovim",
        "--ignore=tests/test_emacs.py",
        *session.posargs,
    )
