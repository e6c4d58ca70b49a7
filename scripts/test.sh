#!/usr/bin/env bash
# Quickstart 2: set everything up, then run the linters, the type checker and all tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# the tests also need a browser (the HTML report is checked in Chromium) and npm (the codex and Claude Code CLIs)
EXTRA_APT_PACKAGES="chromium:chromium npm:npm" ./scripts/setup.sh
./scripts/install-agents.sh
echo "== ruff" >&2
.venv/bin/ruff check spyglass tests benchmarks
echo "== mypy" >&2
.venv/bin/mypy
echo "== pytest" >&2
exec .venv/bin/pytest "$@"
