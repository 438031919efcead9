#!/usr/bin/env bash
# expected-seconds: 550
# The server's Python suite, the Kernel and Enterprise Gateway tests included (the Neovim and Emacs client
# tests run in 20-python.sh), on Python 3.13 with uv.lock's versions (noxfile.py, session tests-3.13).
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/../.."
PATH="$PWD/.venv/bin:$PATH" exec .venv/bin/nox --no-color -s tests-3.13 -- "$@"
