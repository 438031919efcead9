#!/usr/bin/env bash
# expected-seconds: 570
# The Python suite on the default interpreter (.venv, uv.lock's versions): unit tests and end-to-end tests
# over LSP with real kernels, the Neovim client in a real Neovim. The gateway tests are
# their own suite (30-gateway.sh). Two pytest-xdist workers, each test file on one (most tests wait on
# processes more than they compute). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=25 --ignore-glob='tests/test_gateway*' "$@"
