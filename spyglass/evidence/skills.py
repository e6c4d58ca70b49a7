"""The ``skill-used=NAME`` requirement.

A skill is named by its SKILL.md front matter ``name`` or its directory name,
among the skill directories the run recorded (``run --skills``).  It counts
as used when the run read or executed one of its files other than
``SKILL.md``: agents read every SKILL.md when they list their skills at
start-up, so that read alone proves nothing.  A skill that is nothing but a
SKILL.md counts as used when it was read.

Coverage comes from :mod:`spyglass.analysis.coverage` (imported lazily, so
that evidence does not load analysis until a gate asks for a skill).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import msgspec

from spyglass.evidence.facts import RunFacts
from spyglass.evidence.outcome import Evidence, Outcome, judged

if TYPE_CHECKING:
    from spyglass.store import RunReader

SKILL_FILE = "SKILL.md"


class _SkillUse(msgspec.Struct):
    name: str
    dir: str
    files: list[str]  # relative
    touched: dict[str, list[str]] = msgspec.field(default_factory=dict)  # rel -> verbs


def _skill_uses(reader: RunReader) -> list[_SkillUse]:
    from spyglass.analysis.coverage import coverage_run

    out: list[_SkillUse] = []
    for cov in coverage_run(reader):
        out.append(
            _SkillUse(
                cov.skill.name,
                cov.skill.dir,
                list(cov.skill.files),
                {k: list(v) for k, v in cov.touched.items()},
            )
        )
    return out


def skill_outcome(name: str, skill: str, reader: RunReader, facts: RunFacts) -> Outcome:
    ev = Evidence()
    if not reader.meta.skills:
        return judged(
            name, "requirement", False,
            "the run recorded no skill directories (record with `run --skills DIR`)",
            ev,
        )
    uses = _skill_uses(reader)
    match = [u for u in uses if u.name == skill or os.path.basename(u.dir.rstrip("/")) == skill]
    if not match:
        known = ", ".join(sorted({u.name for u in uses})) or "none"
        return judged(name, "requirement", False, f"no skill named {skill!r} among the run's skills ({known})", ev)
    use = match[0]
    ev.details.append(f"skill {use.name} in {use.dir} ({len(use.files)} files)")
    prefix = use.dir.rstrip("/") + "/"
    for accesses in facts.skill_access.values():
        for a in accesses:
            if a.path.startswith(prefix) and a.seq not in ev.seqs:
                ev.seqs.append(a.seq)
    for rel, verbs in sorted(use.touched.items()):
        ev.files.append(rel)
        ev.details.append(f"{rel}: {', '.join(verbs)}")
    others = {k: v for k, v in use.touched.items() if k != SKILL_FILE and ("read" in v or "executed" in v)}
    if others:
        return judged(
            name, "requirement", True,
            f"{len(others)} file(s) of skill {use.name} beyond {SKILL_FILE} read or executed",
            ev,
        )
    if SKILL_FILE in use.touched:
        if use.files == [SKILL_FILE]:
            return judged(name, "requirement", True, f"{SKILL_FILE}, the skill's only file, was read", ev)
        return judged(
            name, "requirement", False,
            f"only {SKILL_FILE} was read (agents read it when listing skills); "
            f"none of the skill's other {len(use.files) - 1} files was read or run",
            ev,
        )
    return judged(
        name, "requirement", False,
        f"none of the {len(use.files)} files of skill {use.name} was read or executed",
        ev,
    )
