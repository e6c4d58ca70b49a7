"""What the evidence directory of a run holds, in a form the reports can show.

Each part is optional: a run recorded without workspace manifests has no
changes, one without test tracking has no test runs.  Missing parts are
simply absent from the returned dict; the templates say "not recorded".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spyglass.logs import get_logger
from spyglass.store import RunReader

log = get_logger("spyglass.report")

#: file names the evidence component writes, in order of preference
CHANGES_FILES = ("changes.json", "workspace-changes.json", "diff.json")
TESTS_FILES = ("tests.json", "test-runs.json", "testruns.json")
#: diffs longer than this are cut in the report (the full patch stays in the evidence)
MAX_DIFF_CHARS = 20_000
MAX_CHANGES = 300


def _first(evdir: Path, names: tuple[str, ...]) -> Path | None:
    for n in names:
        p = evdir / n
        if p.is_file():
            return p
    return None


def _changes(path: Path) -> dict[str, Any] | None:
    try:
        from spyglass.evidence.changes import read_changes
    except ImportError:
        read_changes = None  # type: ignore[assignment]
    try:
        data = path.read_bytes()
        if read_changes is not None:
            c = read_changes(path)
            items = c.all_changes()
            rows = [
                {
                    "path": ch.path,
                    "status": ch.status,
                    "what": ch.what,
                    "diff": _cut(ch.diff) if ch.diff else None,
                    "diff_note": ch.diff_note,
                }
                for ch in items[:MAX_CHANGES]
            ]
            return {
                "roots": c.roots,
                "changes": rows,
                "omitted": max(0, len(items) - MAX_CHANGES),
                "added": len(c.added),
                "removed": len(c.removed),
                "modified": len(c.modified),
                "complete": c.complete,
                "notes": c.notes,
                "outside": [
                    {"path": w.path, "types": w.types, "count": w.count, "commands": w.commands}
                    for w in c.outside_writes[:MAX_CHANGES]
                ],
                "file": path.name,
            }
        raw = json.loads(data)
        return {"raw": raw, "file": path.name} if isinstance(raw, dict) else None
    except Exception as exc:  # shown as a note, never fatal to the report
        log.warning("%s: cannot read workspace changes: %s", path, exc)
        return {"error": f"{path.name}: {exc}"}


def _cut(diff: str) -> str:
    if len(diff) <= MAX_DIFF_CHARS:
        return diff
    return (
        diff[:MAX_DIFF_CHARS]
        + f"\n… diff cut at {MAX_DIFF_CHARS} characters (the full patch is in the evidence)\n"
    )


def _tests(path: Path) -> dict[str, Any] | None:
    try:
        raw = json.loads(path.read_bytes())
    except Exception as exc:
        log.warning("%s: cannot read test evidence: %s", path, exc)
        return {"error": f"{path.name}: {exc}"}
    if not isinstance(raw, dict):
        return None
    runs = raw.get("runs") or []
    return {
        "runs": [
            {
                "command": r.get("command"),
                "seq": r.get("seq"),
                "exit_code": r.get("exit_code"),
                "signal": r.get("signal"),
                "after_last_edit": r.get("after_last_edit"),
                "passed": r.get("exit_code") == 0 and not r.get("signal"),
            }
            for r in runs
            if isinstance(r, dict)
        ][:100],
        "last_edit": raw.get("last_edit"),
        "file": path.name,
    }


def tests_view(result: Any) -> dict[str, Any]:
    """The report's form of a ``spyglass.evidence.testruns.TestEvidence``."""
    last = result.last_edit
    return {
        "runs": [
            {
                "command": r.command,
                "seq": r.seq,
                "exit_code": r.exit_code,
                "signal": r.signal,
                "after_last_edit": r.after_last_edit,
                "passed": r.passed,
            }
            for r in result.runs[:100]
        ],
        "last_edit": None if last is None else {"seq": last.seq, "path": last.path, "type": last.type},
        "file": None,
    }


def load_evidence(reader: RunReader) -> dict[str, Any]:
    """``{"files": [...], "changes": {...}?, "tests": {...}?, "checkpoint": {...}?}``."""
    evdir = reader.dir / "evidence"
    out: dict[str, Any] = {"files": []}
    if not evdir.is_dir():
        return out
    out["files"] = [
        {"name": p.name, "size": p.stat().st_size} for p in sorted(evdir.iterdir()) if p.is_file()
    ]
    ch = _first(evdir, CHANGES_FILES)
    if ch is not None:
        got = _changes(ch)
        if got is not None:
            out["changes"] = got
    ts = _first(evdir, TESTS_FILES)
    if ts is not None:
        got = _tests(ts)
        if got is not None:
            out["tests"] = got
    return out
