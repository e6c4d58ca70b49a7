"""The ``skill-used=NAME`` requirement.

A skill is named by its SKILL.md front matter ``name`` or its directory name,
among the skill directories the run recorded (``run --skills``).  It counts
as used when the run read or executed one of its files other than
``SKILL.md``: agents read every SKILL.md when they list their skills at
start-up, so that read alone proves nothing.  A skill that is nothing but a
SKILL.md counts as used when it was read.

Coverage comes from :mod:`spyglass.analysis.coverage` (imported here, lazily,
so that evidence does not depend on analysis at import time); without it, a
smaller built-in check over the same events is used.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from spyglass.evidence.facts import RunFacts
from spyglass.evidence.outcome import FAIL, PASS, Evidence, Outcome

if TYPE_CHECKING:
    from spyglass.store import RunReader

SKILL_FILE = "SKILL.md"


@dataclass
class _SkillUse:
    name: str
    dir: str
    files: list[str]  # relative
    touched: dict[str, list[str]] = field(default_factory=dict)  # rel -> verbs


def _front_matter_name(skill_md: Path) -> str | None:
    try:
        text = skill_md.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    m = re.match(r"---\s*\n(.*?)\n(?:---|\.\.\.)\s*(?:\n|$)", text, re.S)
    if not m:
        return None
    nm = re.search(r"^name:\s*['\"]?([^'\"\n]+?)['\"]?\s*$", m.group(1), re.M)
    return nm.group(1).strip() if nm else None


def _builtin_uses(reader: RunReader, facts: RunFacts) -> list[_SkillUse]:
    out: list[_SkillUse] = []
    for d in reader.meta.skills:
        root = Path(d)
        if root.name == SKILL_FILE:
            root = root.parent
        dirs = (
            [root]
            if (root / SKILL_FILE).is_file()
            else sorted(p.parent for p in root.glob("*/" + SKILL_FILE))
        )
        for sd in dirs or [root]:
            files = (
                sorted(
                    str(p.relative_to(sd))
                    for p in sd.rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith(".")
                )
                if sd.is_dir()
                else []
            )
            name = _front_matter_name(sd / SKILL_FILE) or sd.name
            use = _SkillUse(name, str(sd), files)
            prefix = str(sd).rstrip("/") + "/"
            for accesses in facts.skill_access.values():
                for a in accesses:
                    if a.path.startswith(prefix):
                        verbs = use.touched.setdefault(a.path[len(prefix) :], [])
                        verb = "executed" if a.how == "exec" else "read"
                        if verb not in verbs:
                            verbs.append(verb)
            out.append(use)
    return out


def _analysis_uses(reader: RunReader) -> list[_SkillUse] | None:
    try:
        from spyglass.analysis.coverage import coverage_run
    except ImportError:
        return None
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
        return Outcome(
            name=name,
            kind="requirement",
            status=FAIL,
            evidence=ev,
            summary="the run recorded no skill directories (record with `run --skills DIR`)",
        )
    uses = _analysis_uses(reader)
    if uses is None:
        uses = _builtin_uses(reader, facts)
        ev.details.append("skill coverage analysis not available: built-in check used")
    match = [u for u in uses if u.name == skill or os.path.basename(u.dir.rstrip("/")) == skill]
    if not match:
        known = ", ".join(sorted({u.name for u in uses})) or "none"
        return Outcome(
            name=name,
            kind="requirement",
            status=FAIL,
            evidence=ev,
            summary=f"no skill named {skill!r} among the run's skills ({known})",
        )
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
        return Outcome(
            name=name,
            kind="requirement",
            status=PASS,
            evidence=ev,
            summary=f"{len(others)} file(s) of skill {use.name} beyond {SKILL_FILE} read or executed",
        )
    if SKILL_FILE in use.touched:
        if use.files == [SKILL_FILE]:
            return Outcome(
                name=name,
                kind="requirement",
                status=PASS,
                evidence=ev,
                summary=f"{SKILL_FILE}, the skill's only file, was read",
            )
        return Outcome(
            name=name,
            kind="requirement",
            status=FAIL,
            evidence=ev,
            summary=f"only {SKILL_FILE} was read (agents read it when listing skills); "
            f"none of the skill's other {len(use.files) - 1} files was read or run",
        )
    return Outcome(
        name=name,
        kind="requirement",
        status=FAIL,
        evidence=ev,
        summary=f"none of the {len(use.files)} files of skill {use.name} was read or executed",
    )
