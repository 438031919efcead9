#!/usr/bin/env bash
# expected-seconds: 300
# The package a user installs (tests/packaging): `python -m build` (wheel + sdist), `twine check`, the
# license and metadata inside both, an install with pip beside a project's typical pins on Python 3.10,
# and the isolated installs (`uv tool install`, `pipx install`) started over stdio. Reaches the package
# index. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python -m pytest -q -p no:cacheprovider -m packaging tests/packaging "$@"
