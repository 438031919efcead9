#!/usr/bin/env bash
# Sets up everything the server and its tests need, idempotently: system packages (as root, through
# apt-get), and a virtualenv in .venv holding exactly the versions in uv.lock: the server (editable), its
# test extras and CI's tools (uv, nox, build, twine). uv itself is bootstrapped from PyPI with pip.
#   bash scripts/setup.sh                 everything (the server, its tests, the VS Code client's tests, and
#                                         the system packages of scripts/setup.d/*.apt: Emacs for its tests)
#   bash scripts/setup.sh --server-only   the server and the Neovim client only (what scripts/try.sh needs):
#                                         of the system packages, only bubblewrap (the sandbox)
# PYTHON=python3.13 bash scripts/setup.sh builds .venv on another interpreter (default: python3).
set -euo pipefail
cd "$(dirname "$0")/.."
server_only=false
[ "${1:-}" = "--server-only" ] && server_only=true

want_apt=()
command -v bwrap >/dev/null 2>&1 || want_apt+=(bubblewrap)
# The test setup's system packages (Emacs and eglot for tests/test_emacs.py): not for --server-only, which
# scripts/try.sh runs (an apt lock held elsewhere must not fail a user's try of the Neovim client).
for extra in scripts/setup.d/*.apt; do
    [ -f "$extra" ] && [ "$server_only" = false ] || continue
    while read -r cmd pkg; do
        [ -n "${cmd:-}" ] && [ "${cmd:0:1}" != "#" ] || continue
        # The first word is a command to look for, or (starting with /) a path that the package installs.
        if [ "${cmd:0:1}" = / ]; then [ -e "$cmd" ] || want_apt+=("$pkg")
        else command -v "$cmd" >/dev/null 2>&1 || want_apt+=("$pkg"); fi
    done <"$extra"
done
if [ ${#want_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: apt-get install ${want_apt[*]}"
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want_apt[@]}" >/dev/null
    else
        echo "setup: please install these system packages: ${want_apt[*]}" >&2
    fi
fi

# The uv that reads uv.lock: the version the lock itself pins in its `ci` group.
uv_version=$(sed -n '/^name = "uv"$/{n;s/^version = "\(.*\)"$/\1/p;q}' uv.lock)
[ -n "$uv_version" ] || { echo "setup: uv.lock pins no uv; run bash scripts/lock.sh" >&2; exit 1; }
PYTHON=${PYTHON:-python3}
# The interpreter itself, not a launcher (pyenv's shim): uv rebuilds a .venv whose interpreter differs.
if ! python_exe=$("$PYTHON" -c 'import os, sys; print(os.path.realpath(sys.executable))' 2>/dev/null); then
    echo "setup: $PYTHON does not run; install Python 3.10 or newer, or set PYTHON=/path/to/python3" >&2
    exit 1
fi
uv=.venv/bin/uv
if [ ! -x "$uv" ] || [ "$("$uv" --version 2>/dev/null | cut -d' ' -f2)" != "$uv_version" ]; then
    [ -x .venv/bin/python ] || "$python_exe" -m venv .venv
    echo "setup: bootstrapping uv $uv_version into .venv"
    # A .venv that uv made has no pip (uv sync removes what the lock does not hold): bring it back first.
    .venv/bin/python -m pip --version >/dev/null 2>&1 || .venv/bin/python -m ensurepip >/dev/null
    .venv/bin/python -m pip install -q --disable-pip-version-check "uv==$uv_version"
fi
# uv never downloads a Python (pyproject's tool.uv says so too); the machine's own interpreters are used.
export UV_PYTHON_DOWNLOADS=never
# Bytecode compiled at install (uv does not, unlike pip): where PYTHONDONTWRITEBYTECODE is set (containers,
# CI machines) Python never caches it, and every server, kernel and test process compiled litellm, IPython
# and the rest from source again (import litellm: 10 s of CPU instead of 4).
export UV_COMPILE_BYTECODE=1
# --locked: uv.lock must agree with pyproject.toml (else: bash scripts/lock.sh); exact: anything not in
# the lock is removed from .venv.
if ! "$uv" sync --quiet --locked --extra test --group ci --python "$python_exe"; then
    echo "setup: uv sync failed. If it says the lockfile needs to be updated, run: bash scripts/lock.sh" >&2
    exit 1
fi
# The server's own source is not in site-packages (an editable install), so uv compiles none of it: 1 MB of
# Python that every server process compiled from source again where PYTHONDONTWRITEBYTECODE is set (its
# imports took 3 s of CPU instead of 0.85 s). Compiled here; a file edited later is compiled as it is read.
.venv/bin/python -m compileall -q -j 0 server >/dev/null
# The compromised litellm releases dropped a .pth file that runs at every interpreter start.
if find .venv -name 'litellm_init.pth' | grep -q .; then
    echo "setup: litellm_init.pth found in .venv: a compromised litellm release is installed" >&2
    exit 1
fi
touch .venv/.interpreter-lsp-installed # scripts/try.sh compares it with pyproject.toml
if [ "$server_only" = false ]; then
    for extra in scripts/setup.d/*.sh; do
        [ -f "$extra" ] && bash "$extra"
    done
fi
echo "setup: ok ($(.venv/bin/interpreter-lsp --version), $(.venv/bin/python --version))"
