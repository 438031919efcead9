#!/usr/bin/env bash
# expected-seconds: 590
# The server's Python suite, the Kernel and Enterprise Gateway tests included (the Neovim and Emacs client
# tests run in 20-python.sh), on Python 3.10 with every dependency at its lower bound (noxfile.py, session tests-3.10;
# constraints/lowest-3.10.txt). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/../.."
PATH="$PWD/.venv/bin:$PATH" exec .venv/bin/nox --no-color -s tests-3.10 -- "$@"
