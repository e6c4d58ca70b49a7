"""The commented starter file that ``spyglass policy init`` writes.

It is generated from the built-in defaults, so it means exactly what having no
policy file means until the user edits it: every key written out with its
default value, or commented out where the default is "not set" (``fail_on``,
``workspace``, ``evidence.sign_key``).  tests/policy/test_starter.py checks
that loading it equals loading the defaults.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from spyglass.policy import defaults
from spyglass.policy.model import EvidencePolicy, RetentionPolicy


def _items(values: Iterable[str], indent: str) -> str:
    return "".join(f"{indent}- {json.dumps(v)}\n" for v in values)


def starter_text() -> str:
    ev = EvidencePolicy()
    return f"""\
# spyglass policy: what is normal for this project.
# As written, this file means exactly the built-in defaults: edit what you need.
# Reference: docs/rules.md; JSON Schema: spyglass/schemas/policy.schema.json

# observe: alert only | contain: run in the sandbox | enforce: sandbox + `kill` rules stop the agent
mode: observe

# `spyglass run` (and `check`) exit with code 6 when an alert at or above this
# level fired (info, low, medium, high, critical).  Default: not set (never).
# fail_on: high

# Processes still alive when the agent has exited and --wait-descendants is over:
# kill | follow | detach.  Default: not set (kill in contain/enforce, detach with a
# high alert in observe).
# descendants: kill

# Writable roots.  Default: the directory the run starts in.
# Relative paths are relative to this file.
# workspace:
#   - .

# Extra secret paths (globs), added to the built-in ones (~/.ssh, ~/.aws,
# ~/.config/gcloud, ~/.kube/config, .env files, shell histories, ...;
# `spyglass policy show` lists them all).
secrets: []
#  - ~/.config/my-tool/token
# or a mapping, to also broker secrets (the agent sees a placeholder only; docs/sandbox.md):
# secrets: {{paths: [...], broker: {{NAME: {{...}}}}}}

# Decoy files: reading one is a finding by itself.
honeytokens: []

network:
  # Hosts the agent may reach, added to the built-in list (loopback, model
  # APIs, package indexes, GitHub).  Names, *.wildcards, IPs, CIDRs, :PORT.
  allow: []
  #  - "*.internal.example.com"
  #  - "10.0.0.0/8:443"
  deny: []
  builtin_allow: true   # false: allow only what is listed above

exec:
  # Directories programs may be run from, added to the system bin dirs and
  # the workspace's virtualenvs and node_modules/.bin.
  trusted: []

rules:
  paths: []          # extra rule files or directories
  disable: []        # rule ids to turn off
  overrides: {{}}      # rule-id: {{level: low, action: alert}}

# Used by `run --sandbox` (see docs/sandbox.md).
sandbox:
  writable: []
  readonly: []
  hidden: []
  pass_home: []
  # environment variables passed in besides the built-in allowlist (docs/sandbox.md)
  env:
    pass: []

evidence:
  # sign_key: path/to/ed25519.key     # default: runs are not signed
  # left out of the workspace manifests
  manifest_exclude:
{_items(ev.manifest_exclude, "    ")}  max_files: {ev.max_files}
  max_diff_bytes: {ev.max_diff_bytes}
  max_run_diff_bytes: {ev.max_run_diff_bytes}
  # command lines that count as running the tests
  test_patterns:
{_items(ev.test_patterns, "    ")}
# Requirements checked by `spyglass gate` (the built-in list; see `spyglass gate --help`).
gate:
{_items(defaults.DEFAULT_GATE, "  ")}
analysis:
  grading_paths: []
  ignore_paths: []

# `run --record-tty` for every run: the agent's terminal on record (asciicast v2 in the evidence).
terminal:
  record: false
  redact: []         # regular expressions masked in the recording (token shapes always are)

# Limits `spyglass prune` applies, and every run after it finishes.  Default: keep everything.
retention:
  # max_age: 30d
  # max_size: 5G
  # max_runs_per_task: 20
  keep_level: {RetentionPolicy().keep_level or "null"}   # runs with alerts at or above are kept

# The agent's persistent identity in every run (default: derived from its
# kind, executable, config home, user and host; docs/otel.md).
# agent_id: release-bot

# Live OpenTelemetry export of every run to your collector (docs/otel.md);
# OTEL_EXPORTER_OTLP_ENDPOINT and `run --otlp URL` override it.
# otlp:
#   endpoint: http://127.0.0.1:4318
#   protocol: http/protobuf      # or grpc (then the port is usually 4317)
#   headers: {{x-team: platform}}
#   timeout: 5
"""


STARTER = starter_text()
