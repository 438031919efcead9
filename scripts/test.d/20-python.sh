#!/usr/bin/env bash
# The Python suite: unit tests and end-to-end tests over LSP with real kernels.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
