#!/usr/bin/env bash
# expected-seconds: 140
# Remote kernels: the server over LSP against a real Jupyter Kernel Gateway and Enterprise Gateway started
# on 127.0.0.1 (installed by scripts/setup.d/gateways.sh into .venv-gateways/; the tests skip, saying
# why, when they are missing). Separate from 20-python.sh so the suites can run in parallel.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -d .venv-gateways ] || bash scripts/setup.d/gateways.sh
.venv/bin/python -m pytest -q -p no:cacheprovider tests/test_gateway.py tests/test_gateway_faults.py tests/test_gateway_settings.py "$@"
