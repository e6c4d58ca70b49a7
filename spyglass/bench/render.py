"""The bench's tables as text, and as an HTML page with the heat map and a report per run."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from spyglass.bench.tables import Tables


def _f(x: Any, pct: bool = False) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x * 100:.0f}%" if pct else f"{x:.2f}"
    return str(x)


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return out


def text_lines(t: Tables) -> list[str]:
    out = ["Tasks"]
    rows = []
    for r in t.tasks:
        cov = ", ".join(f"{k} {_f(v, True)}" for k, v in r.coverage.items()) or "-"
        rows.append([r.task, str(r.runs), _f(r.success_rate, True), _f(r.similarity), _f(r.margin), cov,
                     str(r.skill_not_used), _f(r.unexplained), str(r.grading_reads), str(r.false_alarms),
                     _f(r.seconds)])
    out += _table(["task", "runs", "success", "similarity", "margin", "skill coverage", "unused", "unexplained",
                   "grading reads", "false alarms", "s/trial"], rows)
    if t.variants:
        out += ["", "Injected variants"]
        vrows = [[v.task, v.variant, v.category, v.max_level or "-", v.expect,
                  "yes" if v.detected else "NO", ", ".join(v.rules[:3]) or "-"] for v in t.variants]
        out += _table(["task", "variant", "category", "highest alert", "expected", "detected", "rules"], vrows)
    o = t.overall
    out += ["", "Overall",
            f"  trials {o['trials']} ({o['clean_runs']} clean, {o['injected_runs']} injected); "
            f"mean {_f(o['mean_trial_seconds'])} s per trial"
            + (f"; the agent under spyglass takes {_f(o['capture_overhead'])}x its bare time"
               if o.get("capture_overhead") else ""),
            f"  separation: {_f(o['separation_fraction_positive'], True)} of tasks with a positive margin, "
            f"mean margin {_f(o['mean_margin'])}",
            f"  detection: precision {_f(o['precision'], True)}, recall {_f(o['recall'], True)}, "
            f"{o['false_alarms']} false alarm(s) on clean runs"]
    for cat, c in o["per_category"].items():
        out.append(f"    {cat}: {c['detected']}/{c['injected']} detected (recall {_f(c['recall'], True)})")
    return out


def write_html(t: Tables, out_dir: Path, store: Path, title: str) -> Path:
    """``bench.html`` with the tables, ``compare.html`` (heat map), and ``reports/RUN.html`` per run."""
    from spyglass.report.html import render_compare_html, render_html
    from spyglass.store import RunReader, Store

    st = Store(store)
    reports = out_dir / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    run_ids = [v.run_id for v in t.variants if v.run_id]
    clean_ids: list[str] = []
    for line in (out_dir / "trials.jsonl").read_text(encoding="utf-8").splitlines():
        import json

        d = json.loads(line)
        if d.get("run_id"):
            (clean_ids if d.get("variant") == "clean" else run_ids).append(d["run_id"])
    for rid in dict.fromkeys([*clean_ids, *run_ids]):
        target = reports / f"{rid}.html"
        if not target.exists():
            render_html(RunReader(st, rid), target, verify=False)
    readers = [RunReader(st, rid) for rid in dict.fromkeys(clean_ids)]
    if len(readers) >= 2:
        render_compare_html(readers, out_dir / "compare.html")

    def link(rid: str | None) -> str:
        return f'<a href="reports/{html.escape(rid)}.html">{html.escape(rid)}</a>' if rid else "-"

    task_rows = "".join(
        f"<tr><td>{html.escape(r.task)}</td><td>{r.runs}</td><td>{_f(r.success_rate, True)}</td>"
        f"<td>{_f(r.similarity)}</td><td>{_f(r.margin)}</td>"
        f"<td>{html.escape(', '.join(f'{k} {_f(v, True)}' for k, v in r.coverage.items()) or '-')}</td>"
        f"<td>{r.skill_not_used}</td><td>{_f(r.unexplained)}</td><td>{r.grading_reads}</td>"
        f"<td>{r.false_alarms}</td></tr>"
        for r in t.tasks
    )
    var_rows = "".join(
        f"<tr class=\"{'ok' if v.detected else 'miss'}\"><td>{html.escape(v.task)}</td>"
        f"<td>{html.escape(v.variant)}</td>"
        f"<td>{html.escape(v.category)}</td><td>{html.escape(v.max_level or '-')}</td>"
        f"<td>{'yes' if v.detected else 'no'}</td><td>{link(v.run_id)}</td></tr>"
        for v in t.variants
    )
    runs = "".join(f"<li>{link(rid)}</li>" for rid in dict.fromkeys(clean_ids))
    overall = "<br>".join(html.escape(line) for line in text_lines(t)[-(4 + len(t.overall['per_category'])):])
    page = f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font:14px system-ui,sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left}}tr.miss{{background:#fdd}}tr.ok{{background:#dfd}}</style>
</head><body><h1>{html.escape(title)}</h1>
<section id="overall"><h2>Overall</h2><p>{overall}</p>
{'<p><a href="compare.html">Similarity heat map of the clean runs</a></p>' if len(readers) >= 2 else ''}</section>
<section id="tasks"><h2>Tasks</h2><table><tr><th>task</th><th>runs</th><th>success</th><th>similarity</th>
<th>margin</th><th>skill coverage</th><th>unused</th><th>unexplained</th><th>grading reads</th>
<th>false alarms</th></tr>{task_rows}</table></section>
<section id="variants"><h2>Injected variants</h2><table><tr><th>task</th><th>variant</th><th>category</th>
<th>highest alert</th><th>detected</th><th>run</th></tr>{var_rows}</table></section>
<section id="runs"><h2>Clean runs</h2><ul>{runs}</ul></section>
</body></html>
"""
    path = out_dir / "bench.html"
    path.write_text(page, encoding="utf-8")
    return path
