#!/usr/bin/env bash
# Sets everything up, then runs every test suite (scripts/test.d/*.sh, in order). Exit 0 only if all pass.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
failed=()
for suite in scripts/test.d/*.sh; do
    echo "=== ${suite}"
    if ! bash "$suite"; then failed+=("$suite"); fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "FAILED suites: ${failed[*]}"
    exit 1
fi
echo "all test suites passed"
