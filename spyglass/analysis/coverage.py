"""Skill coverage: which of a skill's files the run read, executed or wrote.

coverage = |files of the skill the run read, executed or wrote| / |files of the skill|

A file counts once however often and however it was touched (listing a
directory touches no file).  A skill whose coverage is 0 gets the finding
``skill-not-used``; a skill used without its ``SKILL.md`` being read gets
``skill-md-not-read`` (info).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from spyglass.analysis.normalize import Normalizer, NormalizeRules, RunPlaces
from spyglass.analysis.profile import Profile, ProfileBuilder, places_for
from spyglass.analysis.skills import SKILL_FILE, Skill, find_skills
from spyglass.events import Event

if TYPE_CHECKING:
    from spyglass.store import RunReader

#: op in the profile -> the verb coverage reports
TOUCH_OPS: Final[dict[str, str]] = {
    "read": "read",
    "exec": "executed",
    "write": "written",
    "create": "written",
    "rename-to": "written",
}


class Finding(msgspec.Struct, frozen=True):
    id: str
    level: str
    skill: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "level": self.level, "skill": self.skill, "message": self.message}


class SkillCoverage(msgspec.Struct):
    skill: Skill
    #: relative file -> verbs (read / executed / written)
    touched: dict[str, list[str]] = msgspec.field(default_factory=dict)
    findings: list[Finding] = msgspec.field(default_factory=list)

    @property
    def untouched(self) -> list[str]:
        return [f for f in self.skill.files if f not in self.touched]

    @property
    def coverage(self) -> float | None:
        n = len(self.skill.files)
        return len(self.touched) / n if n else None

    @property
    def used(self) -> bool:
        return bool(self.touched)

    def files_with(self, verb: str) -> list[str]:
        return [f for f, verbs in self.touched.items() if verb in verbs]

    def parts(self) -> dict[str, dict[str, int]]:
        """Per part of the Agent Skills layout: files touched and total."""
        out: dict[str, dict[str, int]] = {}
        for f in self.skill.files:
            d = out.setdefault(self.skill.part(f), {"touched": 0, "total": 0})
            d["total"] += 1
            d["touched"] += f in self.touched
        return out

    def to_dict(self) -> dict[str, Any]:
        cov = self.coverage
        return {
            "skill": self.skill.name,
            "dir": self.skill.dir,
            "description": self.skill.description,
            "agent_skill": self.skill.agent_skill,
            "coverage": None if cov is None else round(cov, 4),
            "used": self.used,
            "files": len(self.skill.files),
            "touched": {f: v for f, v in sorted(self.touched.items())},
            "read": self.files_with("read"),
            "executed": self.files_with("executed"),
            "written": self.files_with("written"),
            "untouched": self.untouched,
            "parts": self.parts(),
            "findings": [f.to_dict() for f in self.findings],
            "problems": list(self.skill.problems),
        }


def skill_coverage(profile: Profile, skills: Sequence[Skill], normalizer: Normalizer) -> list[SkillCoverage]:
    """Coverage of each skill by a profile built with ``normalizer`` (same places and rules)."""
    files = profile.edges["file"]
    ops_by_name: dict[str, set[str]] = {}
    for name, op in files:
        verb = TOUCH_OPS.get(op)
        if verb is not None:
            ops_by_name.setdefault(name, set()).add(verb)
    out: list[SkillCoverage] = []
    for sk in skills:
        cov = SkillCoverage(sk)
        for rel in sk.files:
            verbs = ops_by_name.get(normalizer.path(f"{sk.dir}/{rel}"))
            if verbs:
                cov.touched[rel] = sorted(verbs)
        if sk.files and not cov.touched:
            cov.findings.append(
                Finding(
                    "skill-not-used", "medium", sk.name,
                    f"the run read, executed or wrote none of the {len(sk.files)} files of skill {sk.name!r}",
                )
            )
        elif sk.agent_skill and SKILL_FILE not in cov.touched and cov.touched:
            cov.findings.append(
                Finding("skill-md-not-read", "info", sk.name,
                        f"files of skill {sk.name!r} were used but its {SKILL_FILE} was never read")
            )
        out.append(cov)
    return out


def _skill_roots(skills: Sequence[Skill], given: Sequence[str]) -> list[str]:
    return list(dict.fromkeys([*given, *(s.dir for s in skills)]))


def coverage_of_events(
    events: Iterable[Event],
    skills: Sequence[Skill],
    places: RunPlaces | None = None,
    rules: NormalizeRules | None = None,
) -> list[SkillCoverage]:
    """Coverage straight from an event stream (one pass)."""
    base = places or RunPlaces()
    places = msgspec.structs.replace(base, skills=tuple(_skill_roots(skills, list(base.skills))))
    builder = ProfileBuilder(Normalizer(places, rules))
    builder.feed(events)
    return skill_coverage(builder.profile, skills, builder.norm)


def coverage_run(
    run: RunReader,
    skill_dirs: Sequence[str] = (),
    rules: NormalizeRules | None = None,
    *,
    home: str | None = None,
) -> list[SkillCoverage]:
    """Coverage of a stored run, for the skills it recorded (``run --skills``) and ``skill_dirs``."""
    import os

    # one entry per directory however it is spelled (./skills/pdf, /abs/skills/pdf, a symlink)
    dirs = list(dict.fromkeys(os.path.realpath(d) for d in [*run.meta.skills, *skill_dirs]))
    # a skill found twice (recorded, and inside a --skills collection) is listed once
    skills = list({os.path.realpath(s.dir): s for s in find_skills(dirs)}.values())
    rules = rules or NormalizeRules()
    places = places_for(run.meta, run.store.root, home=home, skills=dirs)
    return coverage_of_events(run.events(), skills, places, rules)


def format_coverage_text(items: Sequence[SkillCoverage]) -> str:
    if not items:
        return "no skills: give skill directories with --skills DIR (or record them with `run --skills`)"
    out: list[str] = []
    for c in items:
        cov = c.coverage
        n = len(c.skill.files)
        shown = "n/a (no files)" if cov is None else f"{cov:.0%} ({len(c.touched)}/{n} files)"
        out.append(f"skill {c.skill.name}: {shown}   {c.skill.dir}")
        for rel in c.skill.files:
            verbs = c.touched.get(rel)
            mark = ", ".join(verbs) if verbs else "never touched"
            out.append(f"  {'✓' if verbs else '·'} {rel:<40} {mark}")
        for f in c.findings:
            out.append(f"  finding {f.id} ({f.level}): {f.message}")
        for p in c.skill.problems:
            out.append(f"  note: {p}")
    return "\n".join(out)
