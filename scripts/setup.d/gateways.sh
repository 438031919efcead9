#!/usr/bin/env bash
# Installs the real Jupyter gateways the remote-kernel tests (tests/test_gateway*.py) and
# bench/gateway_roundtrip.py start on 127.0.0.1, idempotently, each in a virtualenv of its own under
# .venv-gateways/ so that their dependencies never constrain the server's (.venv):
#   .venv-gateways/kg  jupyter-kernel-gateway 3.0.1 (jupyter_server 2, jupyter_client 8) + ipykernel, bash_kernel
#   .venv-gateways/eg  jupyter-enterprise-gateway 3.3.0 (it needs jupyter_client 6) + ipykernel
# The tests skip, saying so, when these are missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

PYTHON=${PYTHON:-python3}
KG_VERSION=3.0.1
EG_VERSION=3.3.0

install() { # install NAME PACKAGE...
    local name=$1; shift
    local venv=.venv-gateways/$name want="$*"
    if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.installed" 2>/dev/null)" = "$want" ]; then
        return
    fi
    echo "setup gateways: $want into $venv"
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@"
    echo "$want" >"$venv/.installed"
}

install kg "jupyter-kernel-gateway==$KG_VERSION" "ipykernel>=6.29,<8" "bash_kernel>=0.9,<1"
install eg "jupyter-enterprise-gateway==$EG_VERSION" "ipykernel>=6.29,<7"
# The shell kernel's kernelspec, inside the Kernel Gateway's own environment (not the user's).
if [ ! -f .venv-gateways/kg/share/jupyter/kernels/bash/kernel.json ]; then
    .venv-gateways/kg/bin/python -m bash_kernel.install --sys-prefix >/dev/null
fi
echo "setup gateways: ok (kernel gateway $(.venv-gateways/kg/bin/python -c 'import kernel_gateway as k; print(k.__version__)')," \
    "enterprise gateway $(.venv-gateways/eg/bin/python -c 'import enterprise_gateway as e; print(e.__version__)'))"
