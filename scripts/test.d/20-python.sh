#!/usr/bin/env bash
# The Python suite: unit tests and end-to-end tests over LSP with real kernels (the gateway tests are
# their own suite, 30-gateway.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python -m pytest -q -p no:cacheprovider --ignore-glob='tests/test_gateway*' "$@"
