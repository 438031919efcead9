#!/usr/bin/env bash
# expected-seconds: 75
# The package a user installs (tests/packaging): `python -m build` (wheel + sdist), `twine check`, the
# license and metadata inside both, an install with pip beside a project's typical pins on Python 3.10,
# and the isolated installs (`uv tool install`, `pipx install`) started over stdio; and Neovim's
# :InterpreterInstall, which pip-installs the server into an environment of its own and runs a cell with it
# (tests/neovim/test_nvim_install.py -m install). Reaches the package index. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python -m pytest -q -p no:cacheprovider -m "packaging or install" tests/packaging \
    tests/neovim/test_nvim_install.py "$@"
