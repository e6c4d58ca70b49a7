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
    the record verifies against its hash chain and final checkpoint.

Everything is computed from the store: events, alerts, the evidence directory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from spyglass.errors import UsageError
from spyglass.events import LEVELS, Alert, level_rank
from spyglass.evidence.changes import WorkspaceChanges
from spyglass.evidence.facts import FactOptions, RunFacts, gather_facts
from spyglass.evidence.outcome import FAIL, PASS, Evidence, GateResult, Outcome
from spyglass.evidence.testruns import DEFAULT_EDIT_IGNORE, DEFAULT_TEST_PATTERNS, TestEvidence
from spyglass.evidence.verify import VerifyResult

if TYPE_CHECKING:
    from spyglass.evidence.claims import Claims
    from spyglass.store import RunReader

REQUIREMENTS: dict[str, str] = {
    "tests-passed-after-last-edit": "the tests ran after the agent's last edit to the workspace and passed",
    "no-alerts-at-or-above": "no alert at or above LEVEL (default high)",
    "skill-used": "the named skill was used: a file of it (other than SKILL.md) read or executed",
    "no-writes-outside-workspace": "no file outside the workspace changed (=GLOB,... allows some paths)",
    "workspace-changed": "the run changed at least one file in the workspace",
    "evidence-verified": "the record verifies against its hash chain and final checkpoint",
}
DEFAULT_REQUIREMENTS: tuple[str, ...] = (
    "evidence-verified",
    "tests-passed-after-last-edit",
    "no-alerts-at-or-above=high",
)
MAX_LISTED = 20


@dataclass(frozen=True)
class Requirement:
    name: str
    arg: str | None
    text: str


def parse_requirement(text: str) -> Requirement:
    raw = text.strip()
    name, sep, arg = raw.partition("=")
    name = name.strip()
    if name not in REQUIREMENTS:
        known = ", ".join(REQUIREMENTS)
        raise UsageError(f"unknown gate requirement {name!r}", hint=f"known: {known}")
    value: str | None = arg.strip() if sep else None
    if name == "no-alerts-at-or-above":
        value = (value or "high").lower()
        if value not in LEVELS:
            raise UsageError(f"{raw}: unknown level {value!r}", hint=f"levels: {', '.join(LEVELS)}")
    elif name == "skill-used" and not value:
        raise UsageError("skill-used needs a skill name: skill-used=NAME")
    elif name in ("tests-passed-after-last-edit", "workspace-changed", "evidence-verified") and value:
        raise UsageError(f"{name} takes no argument (got {raw!r})")
    return Requirement(name, value, raw)


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
        if parts and "=" in parts[-1] and piece.split("=", 1)[0] not in REQUIREMENTS:
            parts[-1] += "," + piece
        else:
            parts.append(piece)
    return parts


@dataclass
class GateOptions:
    test_patterns: Sequence[str] = DEFAULT_TEST_PATTERNS
    edit_ignore: Sequence[str] = DEFAULT_EDIT_IGNORE
    pubkey_raw: bytes | None = None


@dataclass
class GateInputs:
    """What the requirements look at, loaded once and only when needed."""

    reader: RunReader
    options: GateOptions
    _facts: RunFacts | None = None
    _changes: WorkspaceChanges | None = None
    _changes_loaded: bool = False
    _verify: VerifyResult | None = None
    _alerts: list[Alert] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def workspace(self) -> list[str]:
        meta = self.reader.meta
        return list(meta.workspace) or ([meta.cwd] if meta.cwd else [])

    @property
    def facts(self) -> RunFacts:
        if self._facts is None:
            opts = FactOptions(
                test_patterns=self.options.test_patterns,
                edit_ignore=self.options.edit_ignore,
                skill_dirs=self.reader.meta.skills,
            )
            bad: list[str] = []
            self._facts = gather_facts(
                self.reader.events(on_bad_line=lambda p, n, why: bad.append(f"{p.name}:{n}")),
                self.workspace,
                opts,
            )
            if bad:
                self.notes.append(f"{len(bad)} unreadable event line(s) skipped (first: {bad[0]})")
        return self._facts

    @property
    def changes(self) -> WorkspaceChanges | None:
        if not self._changes_loaded:
            from spyglass.evidence.workspace import load_workspace_changes

            self._changes = load_workspace_changes(self.reader.dir)
            self._changes_loaded = True
        return self._changes

    @property
    def verify(self) -> VerifyResult:
        if self._verify is None:
            from spyglass.evidence.verify import verify_run

            self._verify = verify_run(
                self.reader.dir, pubkey_raw=self.options.pubkey_raw, meta=self.reader.meta
            )
        return self._verify

    @property
    def alerts(self) -> list[Alert]:
        if self._alerts is None:
            self._alerts = self.reader.alerts()
        return self._alerts


# -- the requirements ------------------------------------------------------------
def tests_outcome(tests: TestEvidence, name: str, kind: str = "requirement") -> Outcome:
    """Did a test run start after the last edit, and did every such run pass?"""
    ev = Evidence()
    last = tests.last_edit
    if last is not None:
        who = f" by `{last.command}`" if last.command else ""
        ev.details.append(f"last edit: seq {last.seq}, {last.type} {last.path}{who}")
        ev.seqs.append(last.seq)
        ev.files.append(last.path)
    else:
        ev.details.append("no edit to the workspace was seen")
    for nc in tests.not_counted:
        ev.details.append(f"not counted: `{nc.command}` (seq {nc.seq}): {nc.reason}")
    if not tests.runs:
        return Outcome(name=name, kind=kind, status=FAIL, summary="no test run was recorded", evidence=ev)
    if len(tests.runs) > MAX_LISTED:
        ev.details.append(f"{len(tests.runs)} test runs; the last {MAX_LISTED} are listed")
    for r in tests.runs[-MAX_LISTED:]:
        ev.commands.append(r.command)
        ev.seqs.append(r.seq)
        place = "after" if r.after_last_edit else "before"
        ev.details.append(f"test run {r.describe()} {place} the last edit")
    after = tests.after_last_edit()
    if not after:
        latest = tests.runs[-1]
        where = f" (seq {last.seq}: {last.path})" if last is not None else ""
        return Outcome(
            name=name,
            kind=kind,
            status=FAIL,
            evidence=ev,
            summary=f"the workspace was edited{where} after the last test run {latest.describe()}",
        )
    failed = [r for r in after if not r.passed]
    if failed:
        return Outcome(
            name=name,
            kind=kind,
            status=FAIL,
            evidence=ev,
            summary="test run(s) after the last edit did not pass: "
            + "; ".join(r.describe() for r in failed[:3]),
        )
    return Outcome(
        name=name,
        kind=kind,
        status=PASS,
        evidence=ev,
        summary=f"{len(after)} test run(s) after the last edit, all exit 0: "
        + "; ".join(r.describe() for r in after[:3]),
    )


def _req_tests(req: Requirement, g: GateInputs) -> Outcome:
    return tests_outcome(g.facts.tests, req.text)


def _req_alerts(req: Requirement, g: GateInputs) -> Outcome:
    level = req.arg or "high"
    rank = level_rank(level)
    hits = [a for a in g.alerts if level_rank(a.level) >= rank]
    unsaved = [u for u in g.reader.meta.extra.get("unsaved_alerts") or []
               if isinstance(u, dict) and level_rank(str(u.get("level"))) >= rank]
    ev = Evidence()
    for u in unsaved:
        ev.details.append(f"alert not saved: {u.get('rule_id')} ({u.get('level')}) {u.get('message')}")
    if unsaved:
        return Outcome(name=req.text, kind="requirement", status=FAIL, evidence=ev,
                       summary=f"{len(unsaved) + len(hits)} alert(s) at or above {level} "
                               f"({len(unsaved)} fired but could not be saved)")
    for a in hits[:MAX_LISTED]:
        ev.alerts.append(a.seq)
        ev.seqs.extend(s for s in a.event_seqs if s not in ev.seqs)
        cmd = " ".join(a.argv) if a.argv else (a.exe or "")
        ev.details.append(
            f"alert {a.seq}: {a.rule_id} ({a.level}) {a.title}" + (f" — `{cmd}`" if cmd else "")
        )
    if hits:
        return Outcome(
            name=req.text,
            kind="requirement",
            status=FAIL,
            evidence=ev,
            summary=f"{len(hits)} alert(s) at or above {level}",
        )
    below = len(g.alerts)
    extra = f" ({below} below it)" if below else ""
    return Outcome(
        name=req.text,
        kind="requirement",
        status=PASS,
        evidence=ev,
        summary=f"no alert at or above {level}{extra}",
    )


def _req_outside(req: Requirement, g: GateInputs) -> Outcome:
    allowed = [p.strip() for p in (req.arg or "").split(",") if p.strip()]
    from spyglass.evidence.writes import abs_globs

    writes = [w for w in g.facts.outside_writes if not w.transient]
    transient = [w for w in g.facts.outside_writes if w.transient]
    if allowed:
        globs = abs_globs(allowed)
        writes = [w for w in writes if globs.match_abs(w.path) is None]
    ev = Evidence()
    if allowed:
        ev.details.append("allowed: " + ", ".join(allowed))
    for w in writes[:MAX_LISTED]:
        ev.files.append(w.path)
        ev.seqs.extend(w.seqs[:3])
        for c in w.commands:
            if c not in ev.commands:
                ev.commands.append(c)
        ev.details.append(
            f"{w.path}: {', '.join(w.types)} x{w.count} (first seq {w.seqs[0] if w.seqs else '?'})"
        )
    if transient:
        shown = ", ".join(w.path for w in transient[:5]) + (" …" if len(transient) > 5 else "")
        ev.details.append(f"not counted, created and removed again during the run: {shown}")
    roots = ", ".join(g.workspace)
    if writes:
        return Outcome(
            name=req.text,
            kind="requirement",
            status=FAIL,
            evidence=ev,
            summary=f"{len(writes)} path(s) outside the workspace ({roots}) were changed",
        )
    return Outcome(
        name=req.text,
        kind="requirement",
        status=PASS,
        evidence=ev,
        summary=f"no file outside the workspace ({roots}) was changed",
    )


def _req_changed(req: Requirement, g: GateInputs) -> Outcome:
    ch = g.changes
    ev = Evidence()
    if ch is not None:
        for c in ch.all_changes()[:MAX_LISTED]:
            ev.files.append(c.path)
            ev.details.append(
                f"{c.status}: {c.path}" + (f" ({', '.join(c.what)})" if c.status == "modified" else "")
            )
        n = len(ch.added) + len(ch.removed) + len(ch.modified)
        if n:
            return Outcome(
                name=req.text,
                kind="requirement",
                status=PASS,
                evidence=ev,
                summary=f"{len(ch.added)} added, {len(ch.removed)} removed, {len(ch.modified)} "
                "modified (workspace manifests)",
            )
        return Outcome(
            name=req.text,
            kind="requirement",
            status=FAIL,
            evidence=ev,
            summary="the workspace manifests before and after the run are identical",
        )
    ev.details.append("this run has no workspace manifests; judged from the write events")
    writes = sorted(g.facts.workspace_writes.values(), key=lambda w: w.first_seq)
    for w in writes[:MAX_LISTED]:
        ev.files.append(w.path)
        ev.seqs.append(w.first_seq)
    if writes:
        return Outcome(
            name=req.text,
            kind="requirement",
            status=PASS,
            evidence=ev,
            summary=f"{len(writes)} workspace path(s) written (from events; no manifests)",
        )
    return Outcome(
        name=req.text,
        kind="requirement",
        status=FAIL,
        evidence=ev,
        summary="no write to the workspace was recorded (and the run has no manifests)",
    )


def _req_verified(req: Requirement, g: GateInputs) -> Outcome:
    v = g.verify
    ev = Evidence(details=[str(p) for p in v.problems[:MAX_LISTED]] + v.notes)
    counts = ", ".join(f"{s.records} {k}" for k, s in v.streams.items())
    if v.status == "verified":
        return Outcome(
            name=req.text, kind="requirement", status=PASS, evidence=ev, summary=f"verified ({counts})"
        )
    first = v.first_problem
    return Outcome(
        name=req.text,
        kind="requirement",
        status=FAIL,
        evidence=ev,
        summary=f"{v.status}: {first}" if first else v.status,
    )


def _req_skill(req: Requirement, g: GateInputs) -> Outcome:
    from spyglass.evidence.skills import skill_outcome

    return skill_outcome(req.text, req.arg or "", g.reader, g.facts)


_EVALUATORS: dict[str, Callable[[Requirement, GateInputs], Outcome]] = {
    "tests-passed-after-last-edit": _req_tests,
    "no-alerts-at-or-above": _req_alerts,
    "skill-used": _req_skill,
    "no-writes-outside-workspace": _req_outside,
    "workspace-changed": _req_changed,
    "evidence-verified": _req_verified,
}


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
        result.outcomes.append(_EVALUATORS[req.name](req, g))
    if claims is not None:
        from spyglass.evidence.claimcheck import check_claims

        result.outcomes.extend(check_claims(claims, g.facts, g.changes, g.workspace))
    if g._facts is not None:
        result.facts = facts_summary(g._facts, g.workspace)
    if reader.meta.status == "evidence-incomplete":
        # whatever was asked, a record that could not be kept whole does not pass
        result.outcomes.append(Outcome(
            name="evidence-complete", kind="requirement", status=FAIL,
            summary="the run's evidence is incomplete: "
                    + ("; ".join(reader.meta.extra.get("evidence_failures") or []) or "see `spyglass show`"),
        ))
    elif reader.meta.status != "complete":
        result.notes.append(f"the run's status is {reader.meta.status}")
    result.notes.extend(g.notes)
    return result


def resolve_claim_path(path: str, roots: Sequence[str]) -> list[str]:
    """Absolute candidates for a path the agent named (relative paths against each root)."""
    if os.path.isabs(path):
        return [os.path.normpath(path)]
    p = re.sub(r"^\./", "", path)
    return [os.path.normpath(str(Path(r) / p)) for r in roots]
