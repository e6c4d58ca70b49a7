"""Skill verdicts as JSON (CI), SARIF 2.1.0 (code scanning) and text (people)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spyglass import __version__
from spyglass.skills.verify import SkillResult

_KIND_TEXT = {
    "undeclared-host": "The skill contacted a host its spec does not declare",
    "secret-read": "The skill read a secret (its spec says secrets: none)",
    "write-outside-scope": "The skill wrote outside the scope its spec allows",
    "destructive": "The skill deleted or changed an input it was given",
    "undeclared-command": "The skill ran a command its spec does not declare",
}


def to_json(results: Sequence[SkillResult]) -> dict[str, Any]:
    counts = {v: sum(1 for r in results if r.verdict == v) for v in ("compliant", "violations", "uncertain")}
    return {"tool": "spyglass", "version": __version__, "summary": counts, "skills": [r.to_dict() for r in results]}


def to_sarif(results: Sequence[SkillResult]) -> dict[str, Any]:
    rules: dict[str, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    for r in results:
        for v in r.violations:
            rid = f"skill/{v.kind}"
            rules.setdefault(
                rid,
                {
                    "id": rid,
                    "shortDescription": {"text": _KIND_TEXT.get(v.kind, v.rule)},
                    "defaultConfiguration": {"level": "error"},
                },
            )
            file, _, line = (v.source or "SKILL.md:1").rpartition(":")
            uri = f"{r.dir.rstrip('/')}/{file}" if file and not file.startswith("/") else (file or f"{r.dir}/SKILL.md")
            out.append(
                {
                    "ruleId": rid,
                    "level": "error",
                    "message": {"text": f"{r.skill}: {v.message} ({v.rule}). Remedy: {v.remedy}"},
                    "locations": [
                        {
                            "physicalLocation": {
                                "artifactLocation": {"uri": uri},
                                "region": {"startLine": int(line) if line.isdigit() else 1},
                            }
                        }
                    ],
                    "properties": {
                        "skill": r.skill,
                        "run": v.run,
                        "mode": v.mode,
                        "process": v.process,
                        "event": v.event,
                        "also_rules": v.rules,
                    },
                }
            )
        for f in r.findings:
            if r.verdict != "uncertain" or f.severity != "warn":
                continue
            rid = f"skill/prescan/{f.check}"
            rules.setdefault(
                rid,
                {
                    "id": rid,
                    "shortDescription": {"text": f"Static pre-scan: {f.check}"},
                    "defaultConfiguration": {"level": "warning"},
                },
            )
            out.append(
                {
                    "ruleId": rid,
                    "level": "warning",
                    "message": {"text": f"{r.skill}: {f.message}"},
                    "locations": [
                        {
                            "physicalLocation": {
                                "artifactLocation": {"uri": f"{r.dir}/{f.file}"},
                                "region": {"startLine": f.line},
                            }
                        }
                    ],
                }
            )
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "spyglass-skill",
                        "version": __version__,
                        "informationUri": "https://github.com/spyglass",
                        "rules": list(rules.values()),
                    }
                },
                "results": out,
            }
        ],
    }


def to_text(r: SkillResult) -> str:
    lines = [f"{r.skill}: {r.verdict.upper()}  ({r.dir}, {len(r.runs)} run(s), {r.seconds:.1f}s)"]
    if r.error:
        lines.append(f"  error: {r.error}")
    for v in r.violations:
        proc = " ".join((v.process.get("argv") or [])[:4])
        lines.append(f"  ✗ [{v.kind}] {v.message}  at {v.source or 'unknown source'}")
        lines.append(f"      process {v.process.get('pid')}: {proc}   ({v.mode} run {v.run})")
        if v.rules:
            lines.append(f"      rule pack: {', '.join(v.rules)}")
        lines.append(f"      remedy: {v.remedy}")
    for reason in r.reasons:
        lines.append(f"  ? {reason}")
    for f in r.findings:
        if f.severity == "info" or r.verdict == "compliant":
            continue
        lines.append(f"  pre-scan {f.where}: {f.message}")
    for run in r.runs:
        if run.html:
            lines.append(f"  report: {run.html}")
    return "\n".join(lines)
