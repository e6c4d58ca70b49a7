"""The gate: requirements on a stored run, each met or not, with the evidence.

Requirements (``--require`` or ``gate:`` in the policy), written ``name`` or
``name=argument``:

``tests-passed-after-last-edit``
    at least one test run started after the agent's last edit to the
    workspace, and every test run after that edit exited 0.
``no-alerts-at-or-above=LEVEL``
    no alert at or above LEVEL (info, low, medium, high, critical; default high).
``skill-used=NAME``
    the run read or executed a file of the skill NAME (recorded with
    ``run --skills``) other than its SKILL.md, which agents also read when
    they list their skills.
``no-writes-outside-workspace[=GLOB,...]``
    no file outside the workspace roots was changed, except pseudo-devices
    (``/dev/null`` ...) and the given absolute globs (``/tmp/**``).
``workspace-changed``
    the run changed at least one file in the workspace.
``evidence-verified``
    the record verifies against its hash chain, final checkpoint and the anchor
    the store's index keeps (as ``verify`` does), and the capture lost no kernel
    record (``lost`` > 0 fails it: the chain is intact, the record has gaps).

Everything is computed from the store: events, alerts, the evidence directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from spyglass.errors import UsageError
from spyglass.evidence.facts import RunFacts
from spyglass.evidence.gateinputs import (
    MAX_LISTED,
    GateInputs,
    GateOptions,
    resolve_claim_path,
    tests_outcome,
)
from spyglass.evidence.outcome import FAIL, GateResult, Outcome
from spyglass.evidence.requirements import REGISTRY, GateRequirement, Requirement, register
from spyglass.policy.defaults import DEFAULT_GATE

if TYPE_CHECKING:
    from spyglass.evidence.claims import Claims
    from spyglass.store import RunReader

__all__ = [
    "DEFAULT_REQUIREMENTS", "MAX_LISTED", "REQUIREMENTS", "GateInputs", "GateOptions", "GateRequirement",
    "Requirement", "facts_summary", "parse_requirement", "parse_requirements", "register",
    "resolve_claim_path", "run_gate", "tests_outcome",
]

#: name -> one line of help, for every registered requirement
REQUIREMENTS: dict[str, str] = {name: r.help for name, r in REGISTRY.items()}
#: the built-in list (spyglass/policy/defaults.py, where `policy init` reads it too)
DEFAULT_REQUIREMENTS: tuple[str, ...] = tuple(DEFAULT_GATE)


def parse_requirement(text: str) -> Requirement:
    raw = text.strip()
    name, sep, arg = raw.partition("=")
    name = name.strip()
    req = REGISTRY.get(name)
    if req is None:
        known = ", ".join(REGISTRY)
        raise UsageError(f"unknown gate requirement {name!r}", hint=f"known: {known}")
    value: str | None = arg.strip() if sep else None
    return Requirement(name, req.parse_arg(raw, value), raw)


def parse_requirements(texts: Sequence[str]) -> list[Requirement]:
    out: list[Requirement] = []
    for t in texts:
        for part in _split_top(t):
            out.append(parse_requirement(part))
    return out


def _split_top(text: str) -> list[str]:
    """``a,b=1`` is two requirements; commas inside an argument list stay (``x=/a/**,/b/**``)."""
    parts: list[str] = []
    for piece in text.split(","):
        piece = piece.strip()
        if not piece:
            continue
        if parts and "=" in parts[-1] and piece.split("=", 1)[0] not in REGISTRY:
            parts[-1] += "," + piece
        else:
            parts.append(piece)
    return parts


def facts_summary(facts: RunFacts, workspace: Sequence[str]) -> dict[str, Any]:
    t = facts.tests
    return {
        "workspace": list(workspace),
        "test_runs": [
            {**msgspec.to_builtins(r), "passed": r.passed, "duration_s": r.duration_s} for r in t.runs
        ],
        "last_edit": msgspec.to_builtins(t.last_edit) if t.last_edit else None,
        "not_counted": msgspec.to_builtins(t.not_counted),
        "outside_writes": len(facts.outside_writes),
        "events": facts.events,
    }


def run_gate(
    reader: RunReader,
    requirements: Sequence[Requirement | str],
    *,
    claims: Claims | None = None,
    options: GateOptions | None = None,
) -> GateResult:
    """Evaluate the requirements (and claims) on a stored run."""
    reqs = [r if isinstance(r, Requirement) else parse_requirement(r) for r in requirements]
    g = GateInputs(reader, options or GateOptions())
    result = GateResult(run_id=reader.id)
    for req in reqs:
        result.outcomes.append(REGISTRY[req.name].evaluate(req, g))
    if claims is not None:
        from spyglass.evidence.claimcheck import check_claims

        result.outcomes.extend(check_claims(claims, g.facts, g.changes, g.workspace))
    if g._facts is not None:
        result.facts = facts_summary(g._facts, g.workspace)
    if reader.meta.status in ("monitor-lost", "incomplete", "failed"):  # unobserved activity, or no run at all
        why = {"monitor-lost": "the tracer was lost while the run went on",
               "incomplete": "the monitor died before the run ended (what followed is not recorded)",
               "failed": "the agent never ran"}[reader.meta.status]  # fmt: skip
        result.outcomes.append(Outcome(name="run-observed", kind="requirement", status="fail", summary=why))
    if reader.meta.status == "evidence-incomplete":
        # whatever was asked, a record that could not be kept whole does not pass
        result.outcomes.append(Outcome(
            name="evidence-complete", kind="requirement", status=FAIL,
            summary="the run's evidence is incomplete: "
                    + ("; ".join(reader.meta.extra.get("evidence_failures") or []) or "see `spyglass show`"),
        ))
    if reader.meta.status != "complete":
        result.notes.append(f"the run's status is {reader.meta.status}")
    result.notes.extend(g.notes)
    return result
