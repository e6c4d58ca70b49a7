"""The commented starter file that ``spyglass policy init`` writes."""

from __future__ import annotations

STARTER = """\
# spyglass policy: what is normal for this project.
# Every key is optional; delete what you do not need.  Reference: docs/rules.md
# JSON Schema: spyglass/schemas/policy.schema.json

# observe: alert only | contain: run in the sandbox | enforce: sandbox + `kill` rules stop the agent
mode: observe

# `spyglass run` exits with code 6 when an alert at or above this level fired
# (info, low, medium, high, critical)
fail_on: high

# Writable roots.  Default: the directory the run starts in.
# Relative paths are relative to this file.
workspace:
  - .

# Extra secret paths (globs), added to the built-in ones (~/.ssh, ~/.aws,
# ~/.config/gcloud, ~/.kube/config, .env files, shell histories, ...).
secrets: []
#  - ~/.config/my-tool/token

# Decoy files: reading one is a finding by itself.
honeytokens: []

network:
  # Hosts the agent may reach, added to the built-in list (loopback, model
  # APIs, package indexes, GitHub).  Names, *.wildcards, IPs, CIDRs, :PORT.
  allow: []
  #  - "*.internal.example.com"
  #  - "10.0.0.0/8:443"
  deny: []
  # builtin_allow: false     # allow only what is listed above

exec:
  # Directories programs may be run from, added to the system bin dirs and
  # the workspace's virtualenvs and node_modules/.bin.
  trusted: []

rules:
  paths: []          # extra rule files or directories
  disable: []        # rule ids to turn off
  overrides: {}      # rule-id: {level: low, action: alert}

# Used by `run --sandbox` (see the sandbox docs).
sandbox:
  writable: []
  readonly: []
  hidden: []
  pass_home: []

evidence:
  # sign_key: path/to/ed25519.key
  manifest_exclude:
    - .git/objects/**
    - "**/__pycache__/**"
    - "**/.pytest_cache/**"
    - "**/node_modules/**"
    - .spyglass/**
  max_files: 50000
  max_diff_bytes: 262144
  # test_patterns replaces the built-in list (pytest, python -m pytest, npm test, go test,
  # cargo test, make test, tox and more; `spyglass policy show` prints it)
  # test_patterns: ["pytest", "npm test"]

# Requirements checked by `spyglass gate`.
gate:
  - tests-passed-after-last-edit
  - no-alerts-at-or-above=high

analysis:
  grading_paths: []
  ignore_paths: []

# The agent's persistent identity in every run (default: derived from its
# kind, executable, config home, user and host; docs/otel.md).
# agent_id: release-bot

# Live OpenTelemetry export of every run to your collector (docs/otel.md);
# OTEL_EXPORTER_OTLP_ENDPOINT and `run --otlp URL` override it.
# otlp:
#   endpoint: http://127.0.0.1:4318
#   protocol: http/protobuf      # or grpc (then the port is usually 4317)
#   headers: {x-team: platform}
#   timeout: 5
"""
