#!/usr/bin/env bash
# The habits CI enforces before the tests: ruff's lint and format, mypy --strict on the
# product and the tests. Run after scripts/setup.sh; exits non-zero on the first check that fails.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy --strict twin labs traffic validators tests
echo "check: ruff, ruff format and mypy --strict are clean"
