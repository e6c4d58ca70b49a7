"""Evidence: a tamper-evident record, workspace manifests and diff, test evidence, the gate.

The Python API (the CLI commands ``verify``, ``gate``, ``changes`` and
``keys generate`` are thin layers over it)::

    from spyglass.evidence import verify_run, run_gate, WorkspaceEvidence, make_signer

    verify_run(reader.dir, pubkey_raw=load_public_key_raw(Path("k.pub")))   # VerifyResult
    run_gate(reader, ["tests-passed-after-last-edit"], claims=load_claims(p)) # GateResult
    record(request, backend, store, sinks=[WorkspaceEvidence()], signer=make_signer(Path("k")))

Names are imported on first use.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

#: where ``spyglass keys generate`` puts the private key unless told otherwise (here, not in
#: :mod:`spyglass.evidence.keys`, so that a run without a key protects it without importing signing)
DEFAULT_KEY = Path("~/.config/spyglass/signing.key")

_LAZY = {
    "verify_run": "spyglass.evidence.verify",
    "VerifyResult": "spyglass.evidence.verify",
    "run_gate": "spyglass.evidence.gate",
    "parse_requirements": "spyglass.evidence.gate",
    "GateOptions": "spyglass.evidence.gate",
    "DEFAULT_REQUIREMENTS": "spyglass.evidence.gate",
    "GateResult": "spyglass.evidence.outcome",
    "load_claims": "spyglass.evidence.claims",
    "parse_claims": "spyglass.evidence.claims",
    "to_junit": "spyglass.evidence.junit",
    "WorkspaceEvidence": "spyglass.evidence.workspace",
    "load_workspace_changes": "spyglass.evidence.workspace",
    "build_manifest": "spyglass.evidence.manifest",
    "diff_manifests": "spyglass.evidence.changes",
    "gather_facts": "spyglass.evidence.facts",
    "make_signer": "spyglass.evidence.keys",
    "generate_keypair": "spyglass.evidence.keys",
    "load_public_key_raw": "spyglass.evidence.keys",
    "DEFAULT_TEST_PATTERNS": "spyglass.evidence.testruns",
    "DEFAULT_EXCLUDES": "spyglass.evidence.manifest",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'spyglass.evidence' has no attribute {name!r}")
    return getattr(importlib.import_module(mod), name)
