#!/usr/bin/env bash
# Quickstart 1: set everything up, then record the bundled demo agent and show what spyglass saw.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec .venv/bin/spyglass demo "$@"
