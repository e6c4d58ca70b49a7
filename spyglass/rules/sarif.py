"""SARIF 2.1.0 and JSON export of a run's alerts, shaped for GitHub code scanning.

Code scanning matches an alert across uploads by its rule, its location and
its ``partialFingerprints``; all three are stable here:

* ``ruleId`` is the rule id.
* The location is the file the alert is about, relative to the repository
  root (the nearest directory above the workspace holding ``.git``, else the
  workspace), when that file lies in the repository.  Otherwise the policy
  file when it lies in the repository (an alert about the run's behaviour
  under it), and always a logical location naming the subject with the run's
  HOME written ``~`` and the workspace ``<workspace>`` (``~/.ssh/id_rsa``,
  ``host evil.example:443``).  Nothing points into the run store, whose path
  changes with every run.
* ``partialFingerprints`` hash the rule id with the alert's message, HOME,
  workspace and numbers abstracted.

The tool has no ``informationUri`` (the project has no public home).  The
document keeps within GitHub's documented upload limits (``GITHUB_LIMITS``):
at most 25,000 results per run (the severest first; code scanning shows the
top 5,000), one location per result, at most 10 tags per rule (the number it
displays).  Run-specific facts (pid, event numbers, run id) sit in
``properties``, which matching ignores.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from spyglass import __version__
from spyglass.events import Alert, Event, level_rank
from spyglass.rules.model import Rule

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SECURITY_SEVERITY = {"info": "1.0", "low": "3.0", "medium": "5.5", "high": "8.0", "critical": "9.5"}
SARIF_LEVEL = {"info": "note", "low": "note", "medium": "warning", "high": "error", "critical": "error"}
#: GitHub code scanning's limits on an uploaded SARIF file (docs.github.com, "SARIF results exceed limit"):
#: hard maxima, and in ``shown_*`` what it displays
GITHUB_LIMITS = {
    "runs_per_file": 20, "results_per_run": 25_000, "rules_per_run": 25_000, "locations_per_result": 1_000,
    "tags_per_rule": 20, "shown_results_per_run": 5_000, "shown_locations_per_result": 100,
    "shown_tags_per_rule": 10, "gzip_bytes": 10 * 1024 * 1024,
}
_NUM = re.compile(r"\d+")


def _abstract(text: str, home: str | None, workspace: Iterable[str]) -> str:
    for w in sorted(workspace, key=len, reverse=True):
        if w:
            text = text.replace(w.rstrip("/"), "<workspace>")
    if home:
        text = text.replace(home.rstrip("/"), "~")
    return text


def fingerprint(alert: Alert, home: str | None, workspace: Iterable[str]) -> str:
    text = _NUM.sub("N", _abstract(alert.message, home, workspace))
    return hashlib.sha256(f"{alert.rule_id}\0{text}".encode()).hexdigest()[:32]


def repository_root(workspace: Iterable[str]) -> Path | None:
    """The git work tree holding the first workspace root, else that root (None without a workspace)."""
    roots = [Path(w) for w in workspace if w]
    if not roots:
        return None
    for d in (roots[0], *roots[0].parents):
        if (d / ".git").exists():
            return d
    return roots[0]


def _rule_descriptor(rule: Rule) -> dict[str, Any]:
    tags = ["security", *rule.tags][: GITHUB_LIMITS["shown_tags_per_rule"]]
    return {
        "id": rule.id,
        "name": "".join(p.capitalize() for p in re.split(r"[-_.]", rule.id)),
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": rule.description or rule.title},
        "help": {"text": rule.description or rule.title},
        "defaultConfiguration": {"level": SARIF_LEVEL[rule.level]},
        "properties": {
            "tags": tags,
            "security-severity": SECURITY_SEVERITY[rule.level],
            "precision": "medium",
            "spyglass-level": rule.level,
            "spyglass-action": rule.action,
        },
    }


def _relative(path: str, root: Path | None) -> str | None:
    if root is None or not path.startswith("/"):
        return None
    r = str(root).rstrip("/")
    if path.startswith(r + "/"):
        rel = path[len(r) + 1 :]
        return None if rel == ".git" or rel.startswith((".git/", ".spyglass/")) else rel
    return None


def _subject(alert: Alert, ev: Event | None, home: str | None, workspace: list[str]) -> tuple[str, str]:
    """(kind, stable name) of what the alert is about."""
    if ev is not None and ev.path:
        return "resource", _abstract(ev.path, home, workspace)
    if ev is not None and (ev.domain or ev.address):
        host = ev.domain or ev.address or "?"
        return "resource", f"host {host}:{ev.port}" if ev.port else f"host {host}"
    if ev is not None and ev.dns_name:
        return "resource", f"dns {ev.dns_name}"
    exe = _abstract(alert.exe or "?", home, workspace)
    return "process", exe


def to_sarif(
    alerts: list[Alert],
    rules: list[Rule],
    meta: Any,
    events: dict[int, Event] | None = None,
    run_dir: Path | None = None,  # kept for callers; the run store is never a location
    policy_source: str | None = None,
) -> dict[str, Any]:
    """A SARIF log (as plain data) for one run."""
    events = events or {}
    workspace = list(getattr(meta, "workspace", []) or []) or ([meta.cwd] if getattr(meta, "cwd", "") else [])
    home = (getattr(meta, "extra", None) or {}).get("home")
    root = repository_root(workspace)
    policy_rel = _relative(str(Path(policy_source).resolve()), root) if policy_source else None
    ordered = sorted(alerts, key=lambda a: (-level_rank(a.level), a.seq))[: GITHUB_LIMITS["results_per_run"]]
    used = {a.rule_id for a in ordered}
    by_id = {r.id: r for r in rules}
    descriptors: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    for rid in sorted(used):
        rule = by_id.get(rid) or Rule(id=rid, title=rid, level="medium")
        index[rid] = len(descriptors)
        descriptors.append(_rule_descriptor(rule))
    results = []
    for a in ordered:
        seq = a.event_seqs[-1] if a.event_seqs else 0
        ev = events.get(seq)
        rel = None
        for p in (ev.path, ev.target) if ev is not None else ():
            rel = _relative(p, root) if p else None
            if rel:
                break
        kind, name = _subject(a, ev, home, workspace)
        location: dict[str, Any] = {
            "logicalLocations": [{"name": name.rsplit("/", 1)[-1] or name, "fullyQualifiedName": name,
                                  "kind": kind}],
        }
        anchor = rel or policy_rel
        if anchor:
            location["physicalLocation"] = {"artifactLocation": {"uri": anchor}}
            if not rel:
                location["physicalLocation"]["region"] = {"startLine": 1}
        results.append({
            "ruleId": a.rule_id,
            "ruleIndex": index[a.rule_id],
            "level": SARIF_LEVEL.get(a.level, "warning"),
            "message": {"text": a.message or a.title},
            "locations": [location],
            "partialFingerprints": {"spyglassFinding/v1": fingerprint(a, home, workspace)},
            "properties": {
                "security-severity": SECURITY_SEVERITY.get(a.level, "5.5"),
                "spyglass-level": a.level,
                "action": a.action,
                "run": getattr(meta, "id", ""),
                "event_seqs": a.event_seqs,
                "pid": a.pid,
                "command_line": " ".join(a.argv) if a.argv else (a.exe or ""),
                "working_directory": a.cwd or "",
                "timestamp_ns": a.ts,
                "lineage": [{"pid": x.pid, "command_line": " ".join(x.argv) if x.argv else (x.exe or "")}
                            for x in a.lineage],
            },
        })
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "spyglass", "version": __version__, "semanticVersion": __version__,
                            "rules": descriptors}},
        "automationDetails": {"id": f"spyglass/{getattr(meta, 'task', None) or 'run'}/{meta.id}"},
        "invocations": [{"executionSuccessful": True,
                         "commandLine": " ".join(getattr(meta, "command", []) or [])}],
        "results": results,
        "columnKind": "unicodeCodePoints",
    }
    if len(ordered) < len(alerts):
        run["properties"] = {"omitted_results": len(alerts) - len(ordered)}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def to_json_report(alerts: list[Alert], rules: list[Rule], meta: Any) -> dict[str, Any]:
    import msgspec

    used = {a.rule_id for a in alerts}
    return {
        "run": msgspec.to_builtins(meta),
        "rules": [
            {"id": r.id, "title": r.title, "level": r.level, "action": r.action, "tags": r.tags,
             "description": r.description}
            for r in rules if r.id in used
        ],
        "alerts": msgspec.to_builtins(alerts),
    }
