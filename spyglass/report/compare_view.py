"""The comparison report: the similarity matrix of several runs as a heat map, with per-task margins.

Runs are ordered by task so that each task's block sits on the diagonal; the
margin column gives each run's mean similarity to the other runs of its task,
and the task table gives the separation margin (homogeneous minus
heterogeneous similarity) from :mod:`spyglass.analysis.similarity`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spyglass.errors import UsageError
from spyglass.store import RunReader

KIND_ORDER = ("combined", "command", "file", "host")


def heat_colour(v: float | None) -> tuple[str, str]:
    """(background, text colour) for a similarity in 0..1; grey for undefined."""
    if v is None:
        return "#eef0f3", "#5e6878"
    v = min(max(v, 0.0), 1.0)
    # white -> #1f4e9c
    r = round(255 + (31 - 255) * v)
    g = round(255 + (78 - 255) * v)
    b = round(255 + (156 - 255) * v)
    return f"#{r:02x}{g:02x}{b:02x}", ("#ffffff" if v > 0.55 else "#1d2330")


def _fmt(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}"


def compare_context(readers: Sequence[RunReader]) -> dict[str, Any]:
    if len(readers) < 2:
        raise UsageError("a comparison needs at least two runs")
    from spyglass.analysis.profile import profile_run
    from spyglass.analysis.similarity import separation, similarity_matrix

    ordered = sorted(readers, key=lambda r: (r.meta.task or "\uffff", r.meta.started, r.id))
    profiles = [profile_run(r) for r in ordered]
    m = similarity_matrix(profiles)
    n = len(ordered)
    tasks = [r.meta.task for r in ordered]
    has_groups = any(tasks.count(t) > 1 for t in set(tasks) if t is not None)
    sep = separation(m) if has_groups else None
    cohesion: dict[str, float] = {}
    if sep is not None:
        for ts in sep.tasks:
            cohesion.update(ts.run_cohesion)
    runs = [
        {
            "id": r.id,
            "short": r.id.split("-")[-1],
            "task": r.meta.task or "-",
            "agent": r.meta.agent_id or "-",
            "events": r.meta.counts.get("events", 0),
            "alerts": r.meta.counts.get("alerts", 0),
            "status": r.meta.status,
        }
        for r in ordered
    ]
    maps = []
    for kind in KIND_ORDER:
        rows = []
        for i in range(n):
            cells = []
            for j in range(n):
                v = m.value(i, j, kind)
                bg, fg = heat_colour(v)
                cells.append(
                    {
                        "v": _fmt(v),
                        "bg": bg,
                        "fg": fg,
                        "title": f"{runs[i]['short']} vs {runs[j]['short']}: {kind} {_fmt(v)}",
                    }
                )
            coh = cohesion.get(ordered[i].id) if kind == "combined" else None
            cbg, cfg = heat_colour(coh)
            rows.append(
                {
                    "run": runs[i],
                    "cells": cells,
                    "task_start": i == 0 or tasks[i] != tasks[i - 1],
                    "margin": {"v": _fmt(coh), "bg": cbg, "fg": cfg},
                }
            )
        maps.append({"kind": kind, "rows": rows})
    task_rows = []
    if sep is not None:
        for ts in sep.tasks:
            task_rows.append(
                {
                    "task": ts.task,
                    "runs": len(ts.runs),
                    "homogeneous": _fmt(ts.homogeneous["combined"]),
                    "heterogeneous": _fmt(ts.heterogeneous["combined"]),
                    "margin": ts.margin["combined"],
                    "margin_text": _fmt(ts.margin["combined"]),
                    "most_different": ts.most_different or "-",
                    "margin_nearest": _fmt(ts.margin_nearest["combined"]),
                    "nearest": ts.nearest or "-",
                    "per_kind": {k: _fmt(ts.margin[k]) for k in ("command", "file", "host")},
                    "outlier": min(ts.run_cohesion.items(), key=lambda kv: kv[1])[0].split("-")[-1]
                    if ts.run_cohesion
                    else "-",
                }
            )
    overall = m.set_similarity(range(n))
    return {
        "runs": runs,
        "maps": maps,
        "tasks": task_rows,
        "singletons": sep.singletons if sep is not None else [],
        "fraction_positive": None
        if sep is None or sep.fraction_positive is None
        else f"{sep.fraction_positive:.0%}",
        "overall": {k: _fmt(v) for k, v in overall.items()},
        "has_groups": has_groups,
    }
