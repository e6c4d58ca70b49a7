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


def to_sarif(report: dict[str, Any]) -> dict[str, Any]:
    """SARIF 2.1.0 of a report from :func:`to_json` (or a scan): one result per violation, located at
    the script or SKILL.md line; for an uncertain skill also its pre-scan warnings."""
    rules: dict[str, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    for r in report.get("skills", []):
        for v in r["violations"]:
            rid = f"skill/{v['kind']}"
            rules.setdefault(
                rid,
                {
                    "id": rid,
                    "shortDescription": {"text": _KIND_TEXT.get(v["kind"], v["rule"])},
                    "defaultConfiguration": {"level": "error"},
                },
            )
            file, _, line = (v.get("source") or "SKILL.md:1").rpartition(":")
            uri = (
                f"{r['dir'].rstrip('/')}/{file}"
                if file and not file.startswith("/")
                else (file or f"{r['dir']}/SKILL.md")
            )
            out.append(
                {
                    "ruleId": rid,
                    "level": "error",
                    "message": {"text": f"{r['skill']}: {v['message']} ({v['rule']}). Remedy: {v['remedy']}"},
                    "locations": [
                        {
                            "physicalLocation": {
                                "artifactLocation": {"uri": uri},
                                "region": {"startLine": int(line) if line.isdigit() else 1},
                            }
                        }
                    ],
                    "properties": {
                        "skill": r["skill"],
                        "run": v.get("run"),
                        "mode": v.get("mode"),
                        "process": v.get("process"),
                        "event": v.get("event"),
                        "also_rules": v.get("also_rules"),
                    },
                }
            )
        for f in r.get("prescan", []):
            if r["verdict"] != "uncertain" or f["severity"] != "warn":
                continue
            rid = f"skill/prescan/{f['check']}"
            rules.setdefault(
                rid,
                {
                    "id": rid,
                    "shortDescription": {"text": f"Static pre-scan: {f['check']}"},
                    "defaultConfiguration": {"level": "warning"},
                },
            )
            out.append(
                {
                    "ruleId": rid,
                    "level": "warning",
                    "message": {"text": f"{r['skill']}: {f['message']}"},
                    "locations": [
                        {
                            "physicalLocation": {
                                "artifactLocation": {"uri": f"{r['dir']}/{f['file']}"},
                                "region": {"startLine": f["line"]},
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


_CSS = """body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #ddd;padding:.4em .6em;text-align:left;vertical-align:top}th{background:#f4f4f4}
.compliant{color:#17803d;font-weight:600}.violations{color:#b42318;font-weight:600}.uncertain{color:#b54708;font-weight:600}
code{background:#f6f6f6;padding:0 .2em}ul{margin:.2em 0;padding-left:1.2em}.muted{color:#777}"""


def to_html(report: dict[str, Any]) -> str:
    """One self-contained page for a scan (or a verify): summary, then each skill's findings and run reports."""
    from html import escape

    s = report.get("summary", {})
    rows = []
    for r in report.get("skills", []):
        items = []
        for v in r.get("violations", []):
            proc = " ".join((v.get("process", {}).get("argv") or [])[:3])
            items.append(
                f"<li><b>{escape(v['kind'])}</b> {escape(v['message'])} at <code>{escape(str(v.get('source')))}</code>"
                f" <span class=muted>({escape(v.get('mode', ''))}; pid {v.get('process', {}).get('pid')}: "
                f"{escape(proc)})</span><br>remedy: {escape(v['remedy'])}</li>"
            )
        items += [f"<li>? {escape(x)}</li>" for x in r.get("uncertain_because", [])]
        links = " ".join(
            f'<a href="{escape(run["html"])}">{escape(run["mode"])} {run["repeat"]}</a>'
            for run in r.get("runs", [])
            if run.get("html")
        )
        rows.append(
            f"<tr><td>{escape(r['skill'])}<br><span class=muted>{escape(r['dir'])}</span></td>"
            f"<td class={escape(r['verdict'])}>{escape(r['verdict'])}</td><td><ul>{''.join(items)}</ul></td>"
            f"<td>{links}</td><td>{r.get('seconds', 0):.1f}</td></tr>"
        )
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>spyglass skill report</title><style>{_CSS}</style>"
        f"</head><body><h1>Skill verification</h1><p>{s.get('compliant', 0)} compliant, "
        f"{s.get('violations', 0)} with violations, {s.get('uncertain', 0)} uncertain</p>"
        "<table><tr><th>skill</th><th>verdict</th><th>findings</th><th>run reports</th><th>s</th></tr>"
        f"{''.join(rows)}</table></body></html>\n"
    )
