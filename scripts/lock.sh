#!/usr/bin/env bash
# Rewrites the lock files from pyproject.toml's ranges. Run it after changing a dependency, commit the result.
#   uv.lock                          the exact versions of .venv (scripts/setup.sh) and of `nox -s tests-3.13`:
#                                    one resolution for every Python 3.10+ and platform, with hashes
#   constraints/lowest-3.10.txt      every direct dependency at its lower bound, on Python 3.10 (what
#                                    `nox -s tests-3.10` runs, so the lower bounds are tested)
#
#   bash scripts/lock.sh             keep the locked versions that still fit (after editing pyproject.toml)
#   bash scripts/lock.sh --upgrade   move everything to the newest versions that fit
set -euo pipefail
cd "$(dirname "$0")/.."
upgrade=()
case "${1:-}" in
    "") ;;
    --upgrade) upgrade=(--upgrade) ;;
    *)
        echo "usage: bash scripts/lock.sh [--upgrade]" >&2
        exit 2
        ;;
esac
uv=.venv/bin/uv
if [ ! -x "$uv" ]; then
    echo "lock: $uv is missing; run bash scripts/setup.sh --server-only first" >&2
    exit 1
fi
export UV_PYTHON_DOWNLOADS=never
"$uv" lock "${upgrade[@]}"
"$uv" pip compile pyproject.toml --quiet --extra test --resolution lowest-direct --universal \
    --python-version 3.10 --generate-hashes --custom-compile-command "bash scripts/lock.sh" \
    -o constraints/lowest-3.10.txt
# Never lock a compromised litellm (pyproject.toml excludes them; this guards an edit of that line).
locked_litellm=$(sed -n '/^name = "litellm"$/{n;s/^version = "\(.*\)"$/\1/p}' uv.lock
    sed -n 's/^litellm==\([^ ;]*\).*/\1/p' constraints/lowest-3.10.txt)
for version in $locked_litellm; do
    case "$version" in
        1.82.7 | 1.82.8)
            echo "lock: litellm $version, a compromised release, was locked; exclude it in pyproject.toml" >&2
            exit 1
            ;;
    esac
done
echo "lock: uv.lock and constraints/lowest-3.10.txt written (litellm:" $locked_litellm")"
