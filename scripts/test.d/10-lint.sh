#!/usr/bin/env bash
# expected-seconds: 20
# Lint: ruff on the Python code, and uv.lock still agreeing with pyproject.toml (else: bash scripts/lock.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/ruff check server tests bench noxfile.py
UV_PYTHON_DOWNLOADS=never .venv/bin/uv lock --check
