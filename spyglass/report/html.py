"""The self-contained HTML report of a run (``spyglass report RUN --format html``).

One file that works offline: CSS and JS come inline from the package, the
behaviour graph and the activity chart are inline SVG drawn here, and the
interactive parts (process tree, timeline) are drawn by a small script from a
bounded JSON payload.  A content security policy forbids every fetch.

Large runs stay quick to open: the report embeds aggregates, at most
``max_procs`` processes and ``max_events`` timeline events (chosen by
:mod:`spyglass.report.collect`), and says what it left out and which
``spyglass events`` command prints it.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
import time
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from spyglass.events import LEVELS, Alert, Event, level_rank
from spyglass.events.identity import is_failed_probe
from spyglass.report.collect import ReportData, collect_run
from spyglass.report.describe import (
    CATEGORIES,
    command_text,
    describe_event,
    exit_text,
    is_routine_program,
    lineage_root_first,
)
from spyglass.report.graph_svg import GraphInput, Leaf, render_graph_svg
from spyglass.report.histogram_svg import histogram_svg
from spyglass.report.verdict import host_rows, lineage_view, verdict
from spyglass.store import RunReader

MAX_ALERTS = 200
MAX_LIST = 200
MAX_ARGV_CHARS = 400
WRITE_LABELS = {
    "file.create": "created or opened for writing",
    "file.write": "written",
    "file.delete": "deleted",
    "file.rename": "renamed",
    "file.truncate": "truncated",
    "file.mkdir": "directories made",
    "file.chmod": "mode changed",
    "file.chown": "owner changed",
    "file.link": "hard-linked",
    "file.symlink": "symlinks made",
}


# -- package assets -----------------------------------------------------------------------------


@cache
def _asset(kind: str, name: str) -> str:
    return resources.files("spyglass.report").joinpath(kind).joinpath(name).read_text(encoding="utf-8")


def _env() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: _asset("templates", name)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ts"] = fmt_ts
    env.filters["num"] = lambda n: f"{n:,}" if isinstance(n, int) else n
    env.filters["cmd"] = lambda argv, exe=None: command_text(argv, exe)
    env.filters["bytes"] = fmt_bytes
    return env


def json_for_script(payload: Any) -> str:
    """JSON safe to place inside ``<script type="application/json">``."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def fmt_ts(ns: int | None) -> str:
    if not ns:
        return "-"
    return _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def fmt_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


# -- pieces of the view -------------------------------------------------------------------------


def _proc_rows(data: ReportData, max_procs: int) -> tuple[list[dict[str, Any]], int]:
    """Processes in tree order (parents before children), at most ``max_procs``; those with
    alerts and their ancestors always kept."""
    table = data.digest.procs
    procs = table.procs
    t0 = data.meta.started or 0
    keep: set[int] = set()
    for a in data.alerts:
        for p in table.lineage(a.pid):
            keep.add(p.pid)
    order: list[int] = []
    seen: set[int] = set()
    roots = [p.pid for p in procs.values() if p.ppid is None or p.ppid not in procs]
    roots.sort(key=lambda pid: procs[pid].start_ts)
    stack = list(reversed(roots))
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        order.append(pid)
        stack.extend(reversed(procs[pid].children))
    chosen = [pid for pid in order if pid in keep]
    for pid in order:
        if len(chosen) >= max_procs:
            break
        if pid not in keep:
            chosen.append(pid)
    chosen_set = set(chosen)
    rows = []
    for pid in order:
        if pid not in chosen_set:
            continue
        p = procs[pid]
        counts: Mapping[str, int] = data.proc_counts.get(pid, {})
        text = command_text(p.argv, p.exe)
        if len(text) > MAX_ARGV_CHARS:
            text = text[:MAX_ARGV_CHARS] + " …"
        routine = (
            is_routine_program(p.exe, p.argv)
            and not p.children
            and not data.proc_alerts.get(pid)
            and not counts.get("file-change")
            and not counts.get("net")
        )
        rows.append(
            {
                "pid": pid,
                "ppid": p.ppid if p.ppid in chosen_set else None,
                "cmd": text,
                "exe": p.exe,
                "cwd": p.cwd,
                "t": round((p.start_ts - t0) / 1e6) if p.start_ts and t0 else None,
                "dur": round((p.exit_ts - p.start_ts) / 1e6) if p.exit_ts and p.start_ts else None,
                "exit": exit_text(p),
                "bad": bool(p.signal) or (p.exit_code not in (None, 0)),
                "n": {k: v for k, v in counts.items() if v},
                "alerts": data.proc_alerts.get(pid, 0),
                "routine": routine,
            }
        )
    return rows, len(procs)


def _event_row(ev: Event, t0: int, alert_seqs: set[int]) -> list[Any]:
    what = describe_event(ev)
    if len(what) > MAX_ARGV_CHARS:
        what = what[:MAX_ARGV_CHARS] + " …"
    t = round((ev.ts - t0) / 1e6, 1) if ev.ts and t0 else None
    return [
        ev.seq,
        t,
        ev.type,
        ev.pid,
        what,
        None if ev.ok else (ev.errno or "failed"),
        1 if ev.seq in alert_seqs else 0,
        1 if is_failed_probe(ev) else 0,
    ]


def _alert_view(a: Alert, data: ReportData, t0: int) -> dict[str, Any]:
    entries = lineage_root_first(a)
    lineage = [
        {"pid": e.pid, "cmd": command_text(e.argv, e.exe), "cwd": e.cwd, "tool_call": e.tool_call}
        for e in entries
    ]
    argvs = [e.argv for e in entries]
    if not lineage:  # rebuild from the process table when the rule engine left it out
        procs = list(reversed(data.digest.procs.lineage(a.pid)))
        lineage = [{"pid": p.pid, "cmd": p.command_line, "cwd": p.cwd, "tool_call": None} for p in procs]
        argvs = [p.argv for p in procs]
    lineage = lineage_view(lineage, argvs)
    events = []
    for s in a.event_seqs[:20]:
        ev = data.alert_events.get(s)
        if ev is not None:
            events.append(
                {
                    "seq": s,
                    "type": ev.type,
                    "pid": ev.pid,
                    "what": describe_event(ev),
                    "t": round((ev.ts - t0) / 1e9, 3) if ev.ts and t0 else None,
                    "errno": None if ev.ok else ev.errno,
                }
            )
        else:
            events.append(
                {
                    "seq": s,
                    "type": "?",
                    "pid": a.pid,
                    "what": "event not in the record",
                    "t": None,
                    "errno": None,
                }
            )
    return {
        "a": a,
        "level": a.level if a.level in LEVELS else "info",
        "lineage": lineage,
        "events": events,
        "cmd": command_text(a.argv, a.exe) if (a.argv or a.exe) else None,
        "more_events": max(0, len(a.event_seqs) - 20),
    }


def graph_input(data: ReportData) -> GraphInput:
    """The star graph's leaves: from the run's profile, else from the digest."""
    meta = data.meta
    leaves: dict[str, list[Leaf]] = {"command": [], "file": [], "host": []}
    prof = data.profile
    if prof is not None:
        denied = {name for (name, op) in prof.edges["host"] if op.startswith("proxy-deny")}
        for kind in leaves:
            for name, ops in prof.resources(kind).items():
                leaves[kind].append(
                    Leaf(
                        kind,
                        name,
                        dict(ops),
                        (kind, name) in data.alert_resources,
                        kind == "host" and name in denied,
                    )
                )
    else:
        d = data.digest
        cmds: dict[str, int] = {}
        for p in d.procs.procs.values():
            if p.execs:
                key = command_text(p.argv, p.exe, limit=120)
                cmds[key] = cmds.get(key, 0) + p.execs
        leaves["command"] = [
            Leaf("command", k, {"exec": n}, ("command", k) in data.alert_resources) for k, n in cmds.items()
        ]
        files: dict[str, dict[str, int]] = {}
        for t, paths in d.writes.items():
            for path in paths:
                ops = files.setdefault(path, {})
                ops[t.split(".", 1)[1]] = ops.get(t.split(".", 1)[1], 0) + 1
        for path in d.reads:
            files.setdefault(path, {})["read"] = 1
        leaves["file"] = [Leaf("file", k, v, ("file", k) in data.alert_resources) for k, v in files.items()]
        for h in d.hosts.values():
            name = f"{h.domain or h.address}:{h.port}" if h.port is not None else (h.domain or h.address)
            leaves["host"].append(
                Leaf(
                    "host",
                    name,
                    {"connect": h.count},
                    ("host", name) in data.alert_resources,
                    h.decision == "deny",
                )
            )
    title = "run " + meta.id.split("-")[-1]
    return GraphInput(title=title, subtitle=meta.task or meta.agent_id or "", leaves=leaves)


def _verify_view(data: ReportData) -> dict[str, Any] | None:
    v = data.verify
    if v is None:
        return None
    cp = v.checkpoint or {}
    return {
        "status": v.status,
        "problems": [str(p) for p in v.problems[:20]],
        "notes": list(v.notes),
        "events": cp.get("events"),
        "alerts": cp.get("alerts"),
        "head": cp.get("events_head"),
        "final": cp.get("final"),
        "signature": v.signature,
        "signed": bool(cp.get("signature")),
    }


def _coverage_view(data: ReportData) -> list[dict[str, Any]]:
    out = []
    for c in data.coverage:
        try:
            d = c.to_dict()
        except Exception:
            continue
        out.append(d)
    return out


def _gate_view(meta: Any) -> Any:
    extra = meta.extra if isinstance(meta.extra, dict) else {}
    return extra.get("gate")


def _terminal_rows(data: ReportData, t0: int) -> list[list[Any]]:
    """The recorded terminal (``run --record-tty``) as [ms since the run started, who, text] rows."""
    from spyglass.tty import cast_path, lines

    path = cast_path(data.reader_dir)
    if path is None:
        return []
    term = data.meta.extra.get("terminal")
    start = term.get("start_ns") if isinstance(term, dict) else None
    offset_ms = (start - t0) / 1e6 if start and t0 else 0.0
    try:
        return [[round(offset_ms + r.t * 1000, 1), r.who, r.text] for r in lines(path)][:5000]
    except ValueError:
        return []


def build_context(data: ReportData, *, max_procs: int = 2000) -> dict[str, Any]:
    """Everything the template needs (the JSON payload included)."""
    meta = data.meta
    d = data.digest
    t0 = meta.started or (data.timeline.events[0].ts if data.timeline.events else 0)
    procs, procs_total = _proc_rows(data, max_procs)
    alert_seqs = set(data.alert_events)
    tl = data.timeline
    alerts_sorted = sorted(data.alerts, key=lambda a: (-level_rank(a.level), a.seq))
    by_level: dict[str, int] = {}
    for a in data.alerts:
        by_level[a.level] = by_level.get(a.level, 0) + 1
    run_ref = meta.id
    omitted = tl.omitted
    payload = {
        "run": run_ref,
        "procs": procs,
        "procsTotal": procs_total,
        "events": [_event_row(ev, t0, alert_seqs) for ev in tl.events],
        "eventsTotal": tl.total,
        "noise": tl.noise,
        "omitted": omitted,
        "types": sorted(tl.by_type_total),
        "categories": list(CATEGORIES),
        "terminal": _terminal_rows(data, t0),
    }
    writes = {
        t: {"label": WRITE_LABELS.get(t, t), "paths": paths[:MAX_LIST], "more": max(0, len(paths) - MAX_LIST)}
        for t, paths in sorted(
            d.writes.items(), key=lambda kv: list(WRITE_LABELS).index(kv[0]) if kv[0] in WRITE_LABELS else 99
        )
    }
    hosts = host_rows(list(d.hosts.values()), meta)
    verify_view = _verify_view(data)
    status = meta.status
    exit_text = (
        f"exit {meta.exit_code}"
        if meta.exit_code is not None
        else (f"killed by {meta.signal}" if meta.signal else "no exit status")
    )
    return {
        "meta": meta,
        "command": shlex.join(meta.command) if meta.command else "-",
        "duration": f"{meta.duration_s:.2f} s" if meta.duration_s is not None else "-",
        "exit_text": exit_text,
        "status": status,
        "counts": sorted(d.counts.items()),
        "events_total": d.events,
        "failed": d.failed,
        "bad_lines": d.bad_lines[:10],
        "alerts": [_alert_view(a, data, t0) for a in alerts_sorted[:MAX_ALERTS]],
        "alerts_total": len(data.alerts),
        "alerts_by_level": [(lv, by_level[lv]) for lv in reversed(LEVELS) if lv in by_level],
        "n_procs": procs_total,
        "n_procs_shown": len(procs),
        "writes": writes,
        "n_changed": sum(len(p) for p in d.writes.values()),
        "reads": d.reads[:MAX_LIST],
        "reads_more": max(0, len(d.reads) - MAX_LIST),
        "n_reads": len(d.reads),
        "hosts": hosts[:MAX_LIST],
        "dns": sorted(d.dns.items())[:MAX_LIST],
        "proxy": data.proxy[:MAX_LIST],
        "graph_svg": render_graph_svg(graph_input(data)),
        "graph_note": data.profile_note,
        "hist_svg": histogram_svg(data.histogram),
        "timeline_embedded": len(tl.events),
        "timeline_total": tl.total,
        "timeline_noise": tl.noise,
        "timeline_omitted": omitted,
        "verify": verify_view,
        "verdict": verdict([(lv, by_level[lv]) for lv in reversed(LEVELS) if lv in by_level], verify_view,
                           _gate_view(meta)),
        "probes": d.probes,
        "verify_note": data.verify_note,
        "evidence": data.evidence,
        "coverage": _coverage_view(data),
        "gate": _gate_view(meta),
        "still_running": meta.still_running[:MAX_LIST],
        "generated": fmt_ts(time.time_ns()),
        "terminal": bool(payload["terminal"]),
        "payload": json_for_script(payload),
        "css": _asset("static", "report.css"),
        "js": _asset("static", "report.js"),
        "terminal_js": _asset("static", "terminal.js") if payload["terminal"] else "",
    }


def render_html_text(data: ReportData, *, max_procs: int = 2000) -> str:
    return str(_env().get_template("report.html.j2").render(**build_context(data, max_procs=max_procs)))


def render_html(
    reader: RunReader,
    out: Path,
    *,
    max_events: int = 3000,
    max_procs: int = 2000,
    verify: bool = True,
) -> Path:
    """Write the HTML report of ``reader``'s run to ``out``; returns ``out``.

    At most ``max_events`` events and ``max_procs`` processes are embedded; the
    rest are summarised (the page says how to print them with ``spyglass events``).
    """
    data = collect_run(reader, max_events=max_events, with_verify=verify)
    text = render_html_text(data, max_procs=max_procs)
    _write(out, text)
    return out


def html_report_bytes(reader: RunReader, policy_file: Path | None = None, *, max_events: int = 3000) -> bytes:
    """The report as bytes: the ``html`` renderer of ``spyglass report`` (``policy_file`` is unused)."""
    return render_html_text(collect_run(reader, max_events=max_events)).encode("utf-8")


def _write(out: Path, text: str) -> None:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out)


def render_compare_html(readers: Sequence[RunReader], out: Path) -> Path:
    """Write the similarity heat map of ``readers``' runs (with per-task margins) to ``out``."""
    from spyglass.report.compare_view import compare_context

    ctx = compare_context(readers)
    ctx["css"] = _asset("static", "report.css")
    ctx["generated"] = fmt_ts(time.time_ns())
    _write(out, str(_env().get_template("compare.html.j2").render(**ctx)))
    return out
