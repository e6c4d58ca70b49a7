"""The result of a gate: one outcome per requirement and per claim, each with its evidence."""

from __future__ import annotations

from typing import Any

import msgspec

from spyglass.errors import EXIT_FINDINGS, EXIT_OK

PASS, FAIL, UNCHECKED = "pass", "fail", "unchecked"


class Evidence(msgspec.Struct, omit_defaults=True, kw_only=True):
    seqs: list[int] = msgspec.field(default_factory=list)  # event seqs
    alerts: list[int] = msgspec.field(default_factory=list)  # alert seqs
    files: list[str] = msgspec.field(default_factory=list)
    commands: list[str] = msgspec.field(default_factory=list)
    details: list[str] = msgspec.field(default_factory=list)


class Outcome(msgspec.Struct, kw_only=True):
    name: str  # the requirement as written ("no-alerts-at-or-above=high") or the claim
    kind: str  # requirement | claim
    status: str  # pass | fail | unchecked
    summary: str
    evidence: Evidence = msgspec.field(default_factory=Evidence)

    @property
    def passed(self) -> bool:
        return self.status != FAIL


def judged(name: str, kind: str, ok: bool, summary: str, evidence: Evidence | None = None) -> Outcome:
    """The outcome of requirement or claim ``name`` (``kind``): it passes when ``ok``, else it fails."""
    return Outcome(
        name=name, kind=kind, status=PASS if ok else FAIL, summary=summary, evidence=evidence or Evidence()
    )


class GateResult(msgspec.Struct, kw_only=True):
    run_id: str
    outcomes: list[Outcome] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)
    facts: dict[str, Any] = msgspec.field(default_factory=dict)  # test runs, last edit ...

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outcomes)

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.passed else EXIT_FINDINGS

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.passed]

    def to_dict(self) -> dict[str, Any]:
        data = msgspec.to_builtins(self)
        assert isinstance(data, dict)
        data["passed"] = self.passed
        data["exit_code"] = self.exit_code
        return data


def format_text(result: GateResult, color: bool = False) -> str:
    marks = {PASS: "PASS", FAIL: "FAIL", UNCHECKED: "SKIP"}
    colors = {PASS: "\x1b[32m", FAIL: "\x1b[31m", UNCHECKED: "\x1b[33m"}
    lines: list[str] = [f"gate for run {result.run_id}"]
    for o in result.outcomes:
        mark = marks[o.status]
        if color:
            mark = f"{colors[o.status]}{mark}\x1b[0m"
        label = o.name if o.kind == "requirement" else f"claim {o.name}"
        lines.append(f"  {mark}  {label}: {o.summary}")
        ev = o.evidence
        for d in ev.details:
            lines.append(f"        {d}")
        if ev.commands:
            lines.append(
                "        commands: " + "; ".join(ev.commands[:5]) + (" …" if len(ev.commands) > 5 else "")
            )
        if ev.files:
            lines.append("        files: " + ", ".join(ev.files[:8]) + (" …" if len(ev.files) > 8 else ""))
        if ev.seqs:
            lines.append(
                "        event seqs: "
                + ", ".join(map(str, ev.seqs[:12]))
                + (" …" if len(ev.seqs) > 12 else "")
            )
        if ev.alerts:
            lines.append("        alerts: " + ", ".join(map(str, ev.alerts[:12])))
    for n in result.notes:
        lines.append(f"  note: {n}")
    n_fail = len(result.failed)
    lines.append(
        "gate passed" if result.passed else f"gate failed: {n_fail} of {len(result.outcomes)} not met"
    )
    return "\n".join(lines)
