"""Retention: keep a store within limits of age, total size and runs per task.

``plan()`` decides which runs go without touching anything (``prune
--dry-run`` prints it); ``apply()`` deletes them, index row first, then the
run directory, so that a crash half-way leaves at worst a directory that the
next ``Store`` repair re-indexes, never an index row pointing at nothing.

What is never deleted:

* runs still recording (status ``running``), and the newest run;
* runs whose highest alert is at or above ``keep_level`` (default ``high``),
  unless the caller says ``keep_level=None`` (``prune --include-alerts``).

The oldest runs go first.  Age and per-task limits are applied first, then
total size (oldest first again) until the store fits.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from spyglass.events import LEVELS, level_rank
from spyglass.store.store import Store
from spyglass.units import parse_age, parse_size


class Limits(msgspec.Struct, frozen=True):
    max_age: int | None = None  # seconds
    max_total_bytes: int | None = None
    max_runs_per_task: int | None = None
    #: runs with an alert at or above this level are kept (None: no such protection)
    keep_level: str | None = "high"

    @classmethod
    def parse(
        cls, max_age: str | int | None = None, max_size: str | int | None = None,
        max_runs_per_task: int | None = None, keep_level: str | None = "high",
    ) -> Limits:
        """Limits from the words a user writes (``30d``, ``5G``); ``ValueError`` names the bad one."""
        return cls(
            max_age=parse_age(max_age) if max_age is not None else None,
            max_total_bytes=parse_size(max_size) if max_size is not None else None,
            max_runs_per_task=max_runs_per_task,
            keep_level=keep_level,
        )

    @property
    def empty(self) -> bool:
        return self.max_age is None and self.max_total_bytes is None and self.max_runs_per_task is None


class RunEntry(msgspec.Struct):
    id: str
    task: str | None
    status: str
    started: int  # ns since epoch
    max_level: str | None
    size: int


class Decision(msgspec.Struct):
    run: RunEntry
    reason: str


class Plan(msgspec.Struct):
    delete: list[Decision] = msgspec.field(default_factory=list)
    kept_protected: list[Decision] = msgspec.field(default_factory=list)
    total_before: int = 0
    total_after: int = 0
    runs_before: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "runs_before": self.runs_before,
            "runs_deleted": len(self.delete),
            "bytes_before": self.total_before,
            "bytes_after": self.total_after,
            "delete": [{"id": d.run.id, "task": d.run.task, "bytes": d.run.size, "reason": d.reason}
                       for d in self.delete],
            "kept": [{"id": d.run.id, "task": d.run.task, "reason": d.reason} for d in self.kept_protected],
        }


def dir_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def entries(store: Store) -> list[RunEntry]:
    """Every indexed run with its size on disk, oldest first."""
    out = []
    for row in store.index.rows():
        out.append(RunEntry(
            id=row["id"], task=row["task"], status=row["status"] or "", started=row["started"] or 0,
            max_level=row["max_level"], size=dir_size(store.run_dir(row["id"])),
        ))
    return out


def _protected(run: RunEntry, limits: Limits, newest: str | None) -> str | None:
    if run.status == "running":
        return "still recording"
    if run.id == newest:
        return "newest run"
    if limits.keep_level is not None and run.max_level in LEVELS and \
            level_rank(run.max_level) >= level_rank(limits.keep_level):
        return f"has a {run.max_level} alert (kept at {limits.keep_level} and above; --include-alerts deletes it)"
    return None


def plan(runs: Iterable[RunEntry], limits: Limits, *, now_ns: int | None = None) -> Plan:
    runs = sorted(runs, key=lambda r: r.id)  # ids sort by time
    now_ns = now_ns if now_ns is not None else time.time_ns()
    out = Plan(runs_before=len(runs), total_before=sum(r.size for r in runs))
    newest = runs[-1].id if runs else None
    going: dict[str, str] = {}
    protected: dict[str, str] = {}

    def want(run: RunEntry, reason: str) -> bool:
        why = _protected(run, limits, newest)
        if why is not None:
            protected.setdefault(run.id, why)
            return False
        going.setdefault(run.id, reason)
        return True

    if limits.max_age is not None:
        cutoff = now_ns - limits.max_age * 1_000_000_000
        for r in runs:
            if r.started and r.started < cutoff:
                want(r, f"older than {_fmt_age(limits.max_age)}")
    if limits.max_runs_per_task is not None:
        by_task: dict[str, list[RunEntry]] = {}
        for r in runs:
            if r.task:
                by_task.setdefault(r.task, []).append(r)
        for task, rs in by_task.items():
            alive = [r for r in rs if r.id not in going]
            excess = len(alive) - limits.max_runs_per_task
            for r in alive:  # oldest first
                if excess <= 0:
                    break
                if want(r, f"more than {limits.max_runs_per_task} runs of task {task!r}"):
                    excess -= 1
    if limits.max_total_bytes is not None:
        total = sum(r.size for r in runs if r.id not in going)
        for r in runs:
            if total <= limits.max_total_bytes:
                break
            if r.id in going:
                continue
            if want(r, f"store over {_fmt_size(limits.max_total_bytes)}"):
                total -= r.size
    out.delete = [Decision(r, going[r.id]) for r in runs if r.id in going]
    out.kept_protected = [Decision(r, protected[r.id]) for r in runs if r.id in protected and r.id not in going]
    out.total_after = out.total_before - sum(d.run.size for d in out.delete)
    return out


def apply(store: Store, the_plan: Plan) -> list[str]:
    """Delete the planned runs; returns the ids deleted.  Index row first, then the directory."""
    done = []
    for d in the_plan.delete:
        if store.run_dir(d.run.id).is_symlink():  # not a run directory of this store: leave it, say so
            d.reason = "skipped: the run directory is a symlink"
            continue
        store.index.delete(d.run.id)
        shutil.rmtree(store.run_dir(d.run.id), ignore_errors=True)
        done.append(d.run.id)
    the_plan.delete = [d for d in the_plan.delete if d.run.id in done]
    return done


def _fmt_size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"  # pragma: no cover


def _fmt_age(seconds: int) -> str:
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


fmt_size = _fmt_size

__all__ = ["Limits", "Plan", "apply", "entries", "fmt_size", "parse_age", "parse_size", "plan"]
