#!/usr/bin/env bash
# expected-seconds: 85
# The portable paths macOS and Windows take, forced on this machine (INTERPRETER_LSP_PORTABLE=1): kernel
# death seen by bounded polling instead of a pidfd, files a run touched through watchdog's polling observer,
# kernels over TCP on 127.0.0.1. Runs the end-to-end tests of kernels, runs, interrupts, death and files
# touched once more that way, and a verification's re-run put back through the polling observer (the unit tests of each fallback, tests/test_portable.py, run with the rest of
# the suite in 21-python-3.10.sh and 22-python-3.13.sh); and variables undo, whose calls after each run go over
# the kernel's comm there (no unix socket of the kernel's on TCP).
set -euo pipefail
cd "$(dirname "$0")/../.."
INTERPRETER_LSP_PORTABLE=1 .venv/bin/python -m pytest -q -p no:cacheprovider \
    tests/test_run_basic.py tests/test_runs.py \
    "tests/test_verify.py::test_the_re_run_leaves_the_workspace_as_it_found_it" \
    "tests/test_undo_variables.py::test_a_small_plain_namespace_is_kept_not_forked_and_comes_back_the_same" \
    "tests/test_undo_variables.py::test_undo_brings_back_variables_mutated_rebound_deleted_and_removes_new_ones" \
    "tests/test_undo_variables.py::test_kernel_code_that_closes_the_snapshots_comm_leaves_undo_working" "$@"
