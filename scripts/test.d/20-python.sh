#!/usr/bin/env bash
# expected-seconds: 175
# The editor clients' own tests on the default interpreter (.venv, uv.lock's versions): the Neovim client
# in a real Neovim (tests/neovim) and Emacs with eglot and interpreter-lsp.el (tests/test_emacs.py), each
# against the real server and kernels. The server's own suite (unit tests, end-to-end tests over LSP, the
# Kernel and Enterprise Gateway tests) runs on the lowest and the newest supported Python instead
# (21-python-3.10.sh, 22-python-3.13.sh): once more here would test the same code a third time on a
# Python in between, and cost a third of the whole run. Two pytest-xdist workers, each test file on one.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=15 tests/neovim tests/test_emacs.py "$@"
