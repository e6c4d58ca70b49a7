"""SARIF 2.1.0 and JSON export of a run's alerts.

``ruleId`` is the rule id (stable across versions); ``partialFingerprints``
hash the rule id with the alert's subject (the message with numbers, the
run's home and workspace abstracted), so the same finding in another run of
the same task matches; ``security-severity`` follows the level so GitHub
code scanning ranks it.  A result points at the workspace file it concerns
when there is one, else at the event's line in the run's events.jsonl.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from spyglass import __version__
from spyglass.events import Alert, Event
from spyglass.rules.model import Rule

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SECURITY_SEVERITY = {"info": "1.0", "low": "3.0", "medium": "5.5", "high": "8.0", "critical": "9.5"}
SARIF_LEVEL = {"info": "note", "low": "note", "medium": "warning", "high": "error", "critical": "error"}
_NUM = re.compile(r"\d+")


def fingerprint(alert: Alert, home: str | None, workspace: Iterable[str]) -> str:
    text = alert.message
    for w in sorted(workspace, key=len, reverse=True):
        if w:
            text = text.replace(w, "<workspace>")
    if home:
        text = text.replace(home, "~")
    text = _NUM.sub("N", text)
    return hashlib.sha256(f"{alert.rule_id}\0{text}".encode()).hexdigest()[:32]


def _rule_descriptor(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": "".join(p.capitalize() for p in re.split(r"[-_.]", rule.id)),
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": rule.description or rule.title},
        "help": {"text": rule.description or rule.title},
        "defaultConfiguration": {"level": SARIF_LEVEL[rule.level]},
        "properties": {
            "tags": ["security", *rule.tags],
            "security-severity": SECURITY_SEVERITY[rule.level],
            "precision": "medium",
            "spyglass-level": rule.level,
            "spyglass-action": rule.action,
        },
    }


def _under(path: str, roots: Iterable[str]) -> str | None:
    for r in roots:
        r = r.rstrip("/")
        if path.startswith(r + "/"):
            return path[len(r) + 1 :]
    return None


def to_sarif(
    alerts: list[Alert],
    rules: list[Rule],
    meta: Any,
    events: dict[int, Event] | None = None,
    run_dir: Path | None = None,
) -> dict[str, Any]:
    """A SARIF log (as plain data) for one run."""
    events = events or {}
    workspace = list(getattr(meta, "workspace", []) or [])
    home = (getattr(meta, "extra", None) or {}).get("home")
    used = {a.rule_id for a in alerts}
    by_id = {r.id: r for r in rules}
    descriptors: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    for rid in sorted(used):
        rule = by_id.get(rid)
        if rule is None:
            rule = Rule(id=rid, title=rid, level="medium")
        index[rid] = len(descriptors)
        descriptors.append(_rule_descriptor(rule))
    events_uri = f".spyglass/runs/{meta.id}/events.jsonl"
    if run_dir is not None:
        rel = _under(str(run_dir.resolve()), workspace)
        events_uri = f"{rel}/events.jsonl" if rel else (run_dir.resolve() / "events.jsonl").as_uri()
    results = []
    for a in alerts:
        seq = a.event_seqs[-1] if a.event_seqs else 0
        ev = events.get(seq)
        locations: list[dict[str, Any]] = []
        paths = [p for p in ((ev.path, ev.target) if ev is not None else ()) if p]
        for p in paths:
            rel = _under(p, workspace)
            if rel is not None:
                locations.append({"physicalLocation": {"artifactLocation": {"uri": rel, "uriBaseId": "WORKSPACE"}}})
                break
        event_loc: dict[str, Any] = {
            "physicalLocation": {
                "artifactLocation": {"uri": events_uri},
                "region": {"startLine": max(seq, 1)},
            },
            "message": {"text": f"event {seq}"},
        }
        if not locations:
            locations.append(event_loc)
        locations[0] = {**locations[0], "logicalLocations": [
            {"name": (a.exe or "?").rsplit("/", 1)[-1], "fullyQualifiedName": f"pid {a.pid}: {a.exe or '?'}",
             "kind": "process"}]}
        primary_is_event = "region" in locations[0]["physicalLocation"]
        result: dict[str, Any] = {
            "ruleId": a.rule_id,
            "ruleIndex": index[a.rule_id],
            "level": SARIF_LEVEL.get(a.level, "warning"),
            "message": {"text": a.message or a.title},
            "locations": locations,
            "partialFingerprints": {"spyglassFinding/v1": fingerprint(a, home, workspace)},
            "properties": {
                "security-severity": SECURITY_SEVERITY.get(a.level, "5.5"),
                "spyglass-level": a.level,
                "action": a.action,
                "event_seqs": a.event_seqs,
                "pid": a.pid,
                "command_line": " ".join(a.argv) if a.argv else (a.exe or ""),
                "working_directory": a.cwd or "",
                "timestamp_ns": a.ts,
                "lineage": [{"pid": x.pid, "command_line": " ".join(x.argv) if x.argv else (x.exe or "")}
                            for x in a.lineage],
            },
        }
        if not primary_is_event:
            result["relatedLocations"] = [{"id": 1, **event_loc}]
        results.append(result)
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "spyglass",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": "https://github.com/spyglass-dev/spyglass",
                "rules": descriptors,
            }
        },
        "automationDetails": {"id": f"spyglass/{getattr(meta, 'task', None) or 'run'}/{meta.id}"},
        "invocations": [
            {
                "executionSuccessful": True,
                "commandLine": " ".join(getattr(meta, "command", []) or []),
                "workingDirectory": {"uri": Path(meta.cwd).as_uri()} if getattr(meta, "cwd", "") else {"uri": "."},
            }
        ],
        "results": results,
        "columnKind": "unicodeCodePoints",
    }
    if workspace:
        run["originalUriBaseIds"] = {"WORKSPACE": {"uri": Path(workspace[0]).as_uri() + "/"}}
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
