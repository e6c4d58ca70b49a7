#!/usr/bin/env bash
# Install the real agent CLIs that the test suite runs under spyglass, at
# pinned versions, from the package registries only:
#   OpenAI Codex CLI (npm @openai/codex)  -> .cache/agents/node_modules/.bin/codex
#   Claude Code (npm @anthropic-ai/claude-code, its native binary in the package)
#                                          -> .cache/agents/claude-code/node_modules/.bin/claude
#   mini-swe-agent   (PyPI mini-swe-agent) -> .cache/agents/mswea-venv/bin/mini
# mini-swe-agent gets its own virtual environment so that its many
# dependencies stay out of spyglass's .venv.
# Safe to run again: when the pinned versions are present it does nothing.
# Set SPYGLASS_SKIP_AGENTS=1 to skip (the real-agent tests then skip too).
set -euo pipefail
cd "$(dirname "$0")/.."

CODEX_VERSION=0.171.0
# 2.1.332 is the newest that runs on node 20 (later ones want node 22)
CLAUDE_CODE_VERSION=2.1.332
MSWEA_VERSION=2.4.6
LITELLM_VERSION=1.110.2

[ "${SPYGLASS_SKIP_AGENTS:-}" = "1" ] && exit 0

dest=.cache/agents
mkdir -p "$dest"

# --- codex -----------------------------------------------------------------
codex_stamp="$dest/.codex-$CODEX_VERSION"
if [ ! -f "$codex_stamp" ] || [ ! -x "$dest/node_modules/.bin/codex" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-agents: npm not found; skipping codex (apt-get install npm)" >&2
  else
    echo "install-agents: installing @openai/codex@$CODEX_VERSION with npm" >&2
    [ -f "$dest/package.json" ] || echo '{"name": "spyglass-test-agents", "private": true}' >"$dest/package.json"
    npm install --prefix "$dest" --no-audit --no-fund --loglevel=error \
      --save-exact "@openai/codex@$CODEX_VERSION" >&2
    rm -f "$dest"/.codex-*
    touch "$codex_stamp"
  fi
fi

# --- Claude Code (an npm prefix of its own: installing it leaves codex's tree alone) ---
claude_dir="$dest/claude-code"
claude_stamp="$claude_dir/.claude-code-$CLAUDE_CODE_VERSION"
if [ ! -f "$claude_stamp" ] || [ ! -x "$claude_dir/node_modules/.bin/claude" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-agents: npm not found; skipping Claude Code (apt-get install npm)" >&2
  else
    echo "install-agents: installing @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION with npm" >&2
    mkdir -p "$claude_dir"
    [ -f "$claude_dir/package.json" ] || echo '{"name": "spyglass-test-agent-claude-code", "private": true}' >"$claude_dir/package.json"
    npm install --prefix "$claude_dir" --no-audit --no-fund --loglevel=error \
      --save-exact "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" >&2
    rm -f "$claude_dir"/.claude-code-*
    touch "$claude_stamp"
  fi
fi

# --- mini-swe-agent --------------------------------------------------------
venv="$dest/mswea-venv"
mswea_stamp="$venv/.mswea-$MSWEA_VERSION-litellm-$LITELLM_VERSION"
if [ ! -f "$mswea_stamp" ] || [ ! -x "$venv/bin/mini" ]; then
  echo "install-agents: installing mini-swe-agent==$MSWEA_VERSION in $venv" >&2
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    "mini-swe-agent==$MSWEA_VERSION" "litellm==$LITELLM_VERSION" >&2
  rm -f "$venv"/.mswea-*
  touch "$mswea_stamp"
fi
