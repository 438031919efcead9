#!/usr/bin/env bash
# Sets up everything the server and its tests need, idempotently: system packages (as root, through
# apt-get), a virtualenv in .venv with the server installed editable plus its test extras.
#   bash scripts/setup.sh                 everything (the server, its tests, the VS Code client's tests)
#   bash scripts/setup.sh --server-only   the server and the Neovim client only (what scripts/try.sh needs)
set -euo pipefail
cd "$(dirname "$0")/.."
server_only=false
[ "${1:-}" = "--server-only" ] && server_only=true

want_apt=()
command -v bwrap >/dev/null 2>&1 || want_apt+=(bubblewrap)
for extra in scripts/setup.d/*.apt; do
    [ -f "$extra" ] || continue
    while read -r cmd pkg; do
        [ -n "${cmd:-}" ] && [ "${cmd:0:1}" != "#" ] || continue
        command -v "$cmd" >/dev/null 2>&1 || want_apt+=("$pkg")
    done <"$extra"
done
if [ ${#want_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: apt-get install ${want_apt[*]}"
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want_apt[@]}" >/dev/null
    else
        echo "setup: please install these system packages: ${want_apt[*]}" >&2
    fi
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.interpreter-lsp-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
    touch "$stamp"
fi
# The compromised litellm releases dropped a .pth file that runs at every interpreter start.
if find .venv -name 'litellm_init.pth' | grep -q .; then
    echo "setup: litellm_init.pth found in .venv: a compromised litellm release is installed" >&2
    exit 1
fi
if [ "$server_only" = false ]; then
    for extra in scripts/setup.d/*.sh; do
        [ -f "$extra" ] && bash "$extra"
    done
fi
echo "setup: ok ($(.venv/bin/interpreter-lsp --version))"
