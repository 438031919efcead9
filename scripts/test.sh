#!/usr/bin/env bash
# Sets everything up, then runs every test suite (scripts/test.d/*.sh), two at a time: each suite's output
# goes to test-artifacts/suite-NAME.log (its tail is printed when it fails), and a summary with each
# suite's time and test counts ends the run. Exit 0 only if every suite passed.
#
#   bash scripts/test.sh                  everything (what .ci/run does)
#   bash scripts/test.sh python vscode    only the suites whose file names contain one of these words
#   bash scripts/test.sh --load           the same while two CPU hogs keep both cores busy for the whole
#                                         run (proof that the suites pass on a loaded machine)
#   bash scripts/test.sh --list           list the suites and exit
# Environment: TEST_JOBS (suites at once, default 2), TEST_LOAD=1 (same as --load).
#
# A suite may say how long it takes in a "# expected-seconds: N" line; the longest start first, so the
# two slots end together. A suite without that line is assumed long (it starts early).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
artifacts=$repo/test-artifacts

load=${TEST_LOAD:-0}
list=false
filters=()
for arg in "$@"; do
    case "$arg" in
        --load) load=1 ;;
        --list) list=true ;;
        -h | --help)
            sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        -*)
            echo "test.sh: unknown option $arg (see bash scripts/test.sh --help)" >&2
            exit 2
            ;;
        *) filters+=("$arg") ;;
    esac
done
jobs_max=${TEST_JOBS:-2}
[[ "$jobs_max" =~ ^[1-9][0-9]*$ ]] || { echo "test.sh: TEST_JOBS must be a positive number" >&2; exit 2; }

# The suites, longest expected first.
suites=()
while read -r _ suite; do suites+=("$suite"); done < <(
    for suite in scripts/test.d/*.sh; do
        [ -f "$suite" ] || continue
        name=$(basename "$suite" .sh)
        if [ ${#filters[@]} -gt 0 ]; then
            keep=false
            for f in "${filters[@]}"; do [[ "$name" == *"$f"* ]] && keep=true; done
            $keep || continue
        fi
        expected=$(sed -n 's/^# expected-seconds: *\([0-9][0-9]*\).*/\1/p' "$suite" | head -1)
        echo "${expected:-100000} $suite"
    done | sort -k1,1nr -k2,2 -s
)
if $list; then
    printf '%s\n' "${suites[@]}"
    exit 0
fi
if [ ${#suites[@]} -eq 0 ]; then
    echo "test.sh: no suite matches ${filters[*]}" >&2
    exit 2
fi

hogs=()
declare -A pid_of=() suite_of=() start_of=() end_of=() rc_of=()
stop_all() {
    local pid
    for pid in "${hogs[@]}" "${pid_of[@]}"; do
        # Each suite runs in its own process group (set -m below): end the whole group.
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
    done
    hogs=()
}
trap 'stop_all' EXIT
trap 'echo "test.sh: interrupted"; exit 130' INT TERM HUP

bash scripts/setup.sh || exit 1
mkdir -p "$artifacts"
set -m # every background job gets its own process group, so a suite is stopped with all its children

if [ "$load" = 1 ]; then
    # A hog burns one core until test.sh ends; it also stops by itself if test.sh dies without its trap
    # running (SIGKILL), when it is no longer its parent.
    hog='import os
parent = os.getppid()
while os.getppid() == parent:
    for _ in range(1_000_000):
        pass'
    for _ in 1 2; do
        python3 -c "$hog" </dev/null &
        hogs+=("$!")
        disown "$!" # no job-control chatter when it is stopped
    done
    echo "test.sh: --load: CPU hogs ${hogs[*]} keep both cores busy until the run ends"
fi

t0=$(date +%s)
echo "test.sh: ${#suites[@]} suites, $jobs_max at a time: $(printf '%s ' "${suites[@]##*/}")"
queue=("${suites[@]}")
while [ ${#queue[@]} -gt 0 ] || [ ${#pid_of[@]} -gt 0 ]; do
    while [ ${#queue[@]} -gt 0 ] && [ ${#pid_of[@]} -lt "$jobs_max" ]; do
        suite=${queue[0]}
        queue=("${queue[@]:1}")
        name=$(basename "$suite" .sh)
        echo "=== ${name}: started (log: test-artifacts/suite-${name}.log)"
        start_of[$suite]=$(date +%s)
        bash "$suite" </dev/null >"$artifacts/suite-${name}.log" 2>&1 &
        pid_of[$suite]=$!
        suite_of[$!]=$suite
    done
    done_pid=
    wait -n -p done_pid "${pid_of[@]}"
    rc=$?
    [ -n "$done_pid" ] || continue # interrupted by a signal: look again
    suite=${suite_of[$done_pid]}
    unset "pid_of[$suite]"
    rc_of[$suite]=$rc
    end_of[$suite]=$(date +%s)
    name=$(basename "$suite" .sh)
    took=$((end_of[$suite] - start_of[$suite]))
    if [ "$rc" = 0 ]; then
        echo "=== ${name}: passed in ${took} s"
    else
        echo "=== ${name}: FAILED (exit $rc) in ${took} s; the end of test-artifacts/suite-${name}.log:"
        tail -n 60 "$artifacts/suite-${name}.log" | sed 's/^/    /'
    fi
done
stop_all

# The summary: per suite its result, time and the test counts its runner printed last.
counts() { # counts LOG: "P F" from the last line of the log that has "N passed" (pytest, node, ours)
    local line p f e
    line=$(grep -E '(^|[^0-9])[0-9]+ passed' "$1" | tail -1)
    p=$(grep -oE '[0-9]+ passed' <<<"$line" | head -1 | cut -d' ' -f1)
    f=$(grep -oE '[0-9]+ failed' <<<"$line" | head -1 | cut -d' ' -f1)
    e=$(grep -oE '[0-9]+ errors?' <<<"$line" | head -1 | cut -d' ' -f1)
    echo "${p:-0} $((${f:-0} + ${e:-0}))"
}
total_pass=0
total_fail=0
failed=()
echo
echo "suite                      result   seconds   tests passed/failed"
for suite in $(printf '%s\n' "${suites[@]}" | sort); do
    name=$(basename "$suite" .sh)
    read -r p f < <(counts "$artifacts/suite-${name}.log")
    if [ "${rc_of[$suite]}" = 0 ]; then
        result=passed
        [ "$p" = 0 ] && [ "$f" = 0 ] && p=1 # a suite without test counts (lint) counts as one check
    else
        result=FAILED
        failed+=("$name")
        [ "$f" = 0 ] && f=1 # it failed, whatever it counted
    fi
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
    printf '%-26s %-8s %7s   %s/%s\n' "$name" "$result" "$((end_of[$suite] - start_of[$suite]))" "$p" "$f"
done
echo "wall time: $(($(date +%s) - t0)) s with $jobs_max suites at a time$([ "$load" = 1 ] && echo ', under load (2 CPU hogs)')"
if [ ${#failed[@]} -gt 0 ]; then
    echo "FAILED suites: ${failed[*]} (logs in test-artifacts/)"
fi
echo "total: $total_pass passed, $total_fail failed"
[ ${#failed[@]} -eq 0 ]
