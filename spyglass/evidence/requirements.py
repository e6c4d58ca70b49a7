"""Gate requirements: one class each, registered by name.

A requirement is written ``name`` or ``name=argument`` (``--require`` or
``gate:`` in the policy).  Its class checks the argument when the requirement
is read (:meth:`GateRequirement.parse_arg`) and judges a stored run
(:meth:`GateRequirement.evaluate`) from :class:`~spyglass.evidence.gateinputs.GateInputs`.
A new requirement is one more class here with ``@register`` (copy
:class:`WorkspaceChanged`).
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from spyglass.errors import UsageError
from spyglass.events import LEVELS, level_rank
from spyglass.evidence.gateinputs import MAX_LISTED, GateInputs, tests_outcome
from spyglass.evidence.outcome import Evidence, Outcome, judged


class Requirement(msgspec.Struct, frozen=True):
    name: str
    arg: str | None
    text: str


class GateRequirement:
    """One requirement: its name, a line of help, how it reads its argument and judges a run."""

    name: ClassVar[str]
    help: ClassVar[str]

    def parse_arg(self, raw: str, value: str | None) -> str | None:
        """The argument, checked (``raw`` is the whole text, for messages); default: none allowed."""
        if value:
            raise UsageError(f"{self.name} takes no argument (got {raw!r})")
        return value

    def evaluate(self, req: Requirement, g: GateInputs) -> Outcome:
        raise NotImplementedError


#: every requirement by name, in the order of ``spyglass gate --help``
REGISTRY: dict[str, GateRequirement] = {}


def register(cls: type[GateRequirement]) -> type[GateRequirement]:
    REGISTRY[cls.name] = cls()
    return cls



@register
class TestsPassedAfterLastEdit(GateRequirement):
    name = "tests-passed-after-last-edit"
    help = "the tests ran after the agent's last edit to the workspace and passed"

    def evaluate(self, req: Requirement, g: GateInputs) -> Outcome:
        return tests_outcome(g.facts.tests, req.text)


@register
class NoAlertsAtOrAbove(GateRequirement):
    name = "no-alerts-at-or-above"
    help = "no alert at or above LEVEL (default high)"

    def parse_arg(self, raw: str, value: str | None) -> str | None:
        level = (value or "high").lower()
        if level not in LEVELS:
            raise UsageError(f"{raw}: unknown level {level!r}", hint=f"levels: {', '.join(LEVELS)}")
        return level

    def evaluate(self, req: Requirement, g: GateInputs) -> Outcome:
        level = req.arg or "high"
        rank = level_rank(level)
        hits = [a for a in g.alerts if level_rank(a.level) >= rank]
        anchored = g.anchored_alerts
        if anchored is not None:  # the files were changed after the run: count what the index recorded
            top = anchored.max_level
            ev = Evidence(details=[f"the run's files do not match their anchor: {g.anchor_problem}"])
            if anchored.count and (top is None or level_rank(top) >= rank):
                return judged(
                    req.text, "requirement", False,
                    f"the index recorded {anchored.count} alert(s)" + (f" up to {top}" if top else "")
                    + f" for this run; its alerts.jsonl (now {len(g.alerts)}) was changed after the run",
                    ev,
                )
        # alerts that fired but could not be saved (a full disk) count as much as saved ones
        unsaved = [u for u in g.reader.meta.extra.get("unsaved_alerts") or []
                   if isinstance(u, dict) and level_rank(str(u.get("level"))) >= rank]
        ev = Evidence()
        for u in unsaved:
            ev.details.append(f"alert not saved: {u.get('rule_id')} ({u.get('level')}) {u.get('message')}")
        if unsaved:
            return judged(
                req.text, "requirement", False,
                f"{len(unsaved) + len(hits)} alert(s) at or above {level} "
                f"({len(unsaved)} fired but could not be saved)",
                ev,
            )
        for a in hits[:MAX_LISTED]:
            ev.alerts.append(a.seq)
            ev.seqs.extend(s for s in a.event_seqs if s not in ev.seqs)
            cmd = " ".join(a.argv) if a.argv else (a.exe or "")
            ev.details.append(
                f"alert {a.seq}: {a.rule_id} ({a.level}) {a.title}" + (f" — `{cmd}`" if cmd else "")
            )
        if hits:
            return judged(req.text, "requirement", False, f"{len(hits)} alert(s) at or above {level}", ev)
        below = len(g.alerts)
        extra = f" ({below} below it)" if below else ""
        return judged(req.text, "requirement", True, f"no alert at or above {level}{extra}", ev)


@register
class SkillUsed(GateRequirement):
    name = "skill-used"
    help = "the named skill was used: a file of it (other than SKILL.md) read or executed"

    def parse_arg(self, raw: str, value: str | None) -> str | None:
        if not value:
            raise UsageError("skill-used needs a skill name: skill-used=NAME")
        return value

    def evaluate(self, req: Requirement, g: GateInputs) -> Outcome:
        from spyglass.evidence.skills import skill_outcome

        return skill_outcome(req.text, req.arg or "", g.reader, g.facts)


@register
class NoWritesOutsideWorkspace(GateRequirement):
    name = "no-writes-outside-workspace"
    help = "no file outside the workspace changed (=GLOB,... allows some paths)"

    def parse_arg(self, raw: str, value: str | None) -> str | None:
        return value

    def evaluate(self, req: Requirement, g: GateInputs) -> Outcome:
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
            return judged(
                req.text, "requirement", False,
                f"{len(writes)} path(s) outside the workspace ({roots}) were changed",
                ev,
            )
        return judged(req.text, "requirement", True, f"no file outside the workspace ({roots}) was changed", ev)


@register
class WorkspaceChanged(GateRequirement):
    name = "workspace-changed"
    help = "the run changed at least one file in the workspace"

    def evaluate(self, req: Requirement, g: GateInputs) -> Outcome:
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
                return judged(
                    req.text, "requirement", True,
                    f"{len(ch.added)} added, {len(ch.removed)} removed, {len(ch.modified)} "
                    "modified (workspace manifests)",
                    ev,
                )
            return judged(
                req.text, "requirement", False,
                "the workspace manifests before and after the run are identical",
                ev,
            )
        ev.details.append("this run has no workspace manifests; judged from the write events")
        writes = sorted(g.facts.workspace_writes.values(), key=lambda w: w.first_seq)
        for w in writes[:MAX_LISTED]:
            ev.files.append(w.path)
            ev.seqs.append(w.first_seq)
        if writes:
            return judged(
                req.text, "requirement", True,
                f"{len(writes)} workspace path(s) written (from events; no manifests)",
                ev,
            )
        return judged(
            req.text, "requirement", False,
            "no write to the workspace was recorded (and the run has no manifests)",
            ev,
        )


@register
class EvidenceVerified(GateRequirement):
    name = "evidence-verified"
    help = "the record verifies against its hash chain, final checkpoint and anchor, and nothing was lost"

    def evaluate(self, req: Requirement, g: GateInputs) -> Outcome:
        v = g.verify
        ev = Evidence(details=[str(p) for p in v.problems[:MAX_LISTED]] + v.notes)
        counts = ", ".join(f"{s.records} {k}" for k, s in v.streams.items())
        lost = (g.reader.meta.capture or {}).get("lost") or 0
        if v.status == "verified" and isinstance(lost, int) and lost > 0:
            # the chain is intact, but what the kernel dropped was never recorded: a flood can hide a read
            return judged(
                req.text, "requirement", False,
                f"incomplete: the capture ({g.reader.meta.backend}) lost {lost} kernel record(s); "
                f"the chain is intact ({counts}) but the record has gaps",
                ev,
            )
        if v.status == "verified":
            return judged(req.text, "requirement", True, f"verified ({counts})", ev)
        first = v.first_problem
        return judged(req.text, "requirement", False, f"{v.status}: {first}" if first else v.status, ev)
