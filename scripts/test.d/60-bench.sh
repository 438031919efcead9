#!/usr/bin/env bash
# expected-seconds: 125
# Every benchmark of bench/ as a smoke run: a few iterations each, its figures printed into this suite's
# log, no assertion on time (tests/test_bench_smoke.py, marker `bench`). A benchmark that no longer runs
# fails here. The import-time budget of the server's start path is tests/test_import_budget.py (21- and 22-python).
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python -m pytest -q -p no:cacheprovider -m bench -s tests/test_bench_smoke.py "$@"
