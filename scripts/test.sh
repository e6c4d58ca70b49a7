#!/usr/bin/env bash
# Quickstart 2: set everything up, then run the linters, the type checker and all tests.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRA_APT_PACKAGES="${EXTRA_APT_PACKAGES:-}" ./scripts/setup.sh
echo "== ruff" >&2
.venv/bin/ruff check spyglass tests benchmarks
echo "== mypy" >&2
.venv/bin/mypy
echo "== pytest" >&2
exec .venv/bin/pytest "$@"
