"""Running a bench: every (task, variant, repeat) trial, in parallel, resumable.

Finished trials are appended to ``BENCH_DIR/trials.jsonl`` as they end; a
bench started again on the same directory skips them, so a crashed or
interrupted bench continues where it stopped.  ``--jobs`` trials run at once
(default: the number of cores); each is a ``spyglass run`` of its own.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import msgspec

from spyglass.bench.inject import Injection, applies
from spyglass.bench.suite import Suite
from spyglass.bench.trial import AgentSpec, TrialPlan, TrialResult, run_trial

STATE = "trials.jsonl"
CONFIG = "bench.json"


class BenchConfig(msgspec.Struct):
    suite: Suite
    agent: AgentSpec
    out: Path
    repeat: int = 3
    injections: list[Injection] = msgspec.field(default_factory=list)
    jobs: int = 0
    sandbox: bool = False
    policy: Path | None = None
    #: also run each task's agent once without spyglass, for the capture overhead
    measure_overhead: bool = False


def plan_trials(cfg: BenchConfig) -> list[TrialPlan]:
    plans: list[TrialPlan] = []
    for task in cfg.suite.tasks:
        for rep in range(1, cfg.repeat + 1):
            plans.append(TrialPlan(task=task, variant="clean", rep=rep))
        if cfg.measure_overhead:
            plans.append(TrialPlan(task=task, variant="bare", rep=1))
        for inj in cfg.injections:
            if applies(inj, task.skills):
                plans.append(TrialPlan(task=task, variant=inj.id, rep=1, injection=inj))
    return plans


def load_done(out: Path) -> dict[str, TrialResult]:
    """Trials already finished in ``out`` (a torn last line from a crash is ignored)."""
    done: dict[str, TrialResult] = {}
    path = out / STATE
    if not path.exists():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
            r = TrialResult(**data)
        except (ValueError, TypeError):
            continue
        if r.error is None and (r.run_id or r.variant == "bare"):
            done[r.id] = r
    return done


def _identity(cfg: BenchConfig) -> dict[str, Any]:
    """What makes trials of two invocations the same experiment (repeats, tasks and injections may grow)."""
    return {"suite": str(cfg.suite.dir), "agent": {"kind": cfg.agent.kind, "argv": list(cfg.agent.argv)},
            "sandbox": cfg.sandbox, "policy": str(cfg.policy) if cfg.policy else None}


def run_bench(cfg: BenchConfig, progress: Callable[[int, int, TrialResult | None], None] | None = None,
              stop: threading.Event | None = None) -> list[TrialResult]:
    """Run the trials not yet done; returns every finished trial's result (old and new), in plan order.

    A bench directory belongs to one experiment: resuming it with another agent, suite, policy or
    sandbox setting is refused (its finished trials would be counted as the new experiment's)."""
    from spyglass.errors import UsageError

    cfg.out.mkdir(parents=True, exist_ok=True)
    ident = _identity(cfg)
    saved_path = cfg.out / CONFIG
    if saved_path.exists() and (cfg.out / STATE).exists():
        try:
            saved = json.loads(saved_path.read_text(encoding="utf-8"))
        except ValueError:
            saved = {}
        before = {k: saved.get(k) for k in ident}
        if before != ident:
            changed = ", ".join(k for k in ident if before.get(k) != ident[k])
            raise UsageError(f"{cfg.out} holds trials of another experiment ({changed} differ)",
                             hint="give another --out, or --fresh to start this bench directory over")
    saved_path.write_text(json.dumps({
        **ident, "repeat": cfg.repeat, "injections": [i.id for i in cfg.injections],
        "tasks": [t.name for t in cfg.suite.tasks],
    }, indent=2) + "\n")
    plans = plan_trials(cfg)
    done = load_done(cfg.out)
    todo = [p for p in plans if p.id not in done]
    total = len(plans)
    finished = len(plans) - len(todo)
    if progress is not None:
        progress(finished, total, None)
    jobs = cfg.jobs or os.cpu_count() or 1
    lock = threading.Lock()
    state = (cfg.out / STATE).open("a", encoding="utf-8")
    try:
        with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="trial") as pool:
            pending: set[Future[TrialResult]] = set()
            queue = list(todo)
            while queue or pending:
                while queue and len(pending) < jobs and not (stop is not None and stop.is_set()):
                    plan = queue.pop(0)
                    pending.add(pool.submit(run_trial, plan, cfg.agent, cfg.out, sandbox=cfg.sandbox,
                                            policy=cfg.policy))
                if not pending:
                    break
                completed, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for fut in completed:
                    res = fut.result()
                    with lock:
                        state.write(json.dumps(res.to_json()) + "\n")
                        state.flush()
                        os.fsync(state.fileno())
                    if res.error is None and (res.run_id or res.variant == "bare"):
                        done[res.id] = res
                    finished += 1
                    if progress is not None:
                        progress(finished, total, res)
    finally:
        state.close()
    return [done[p.id] for p in plans if p.id in done]


def failed_trials(out: Path) -> list[dict[str, Any]]:
    """Trials whose last attempt failed (no run recorded, or an error)."""
    last: dict[str, dict[str, Any]] = {}
    path = out / STATE
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                data = json.loads(line)
            except ValueError:
                continue
            last[data.get("id", "")] = data
    return [d for d in last.values() if d.get("error") or (not d.get("run_id") and d.get("variant") != "bare")]


class Eta:
    """Seconds left from the trials finished so far (this session's pace)."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.start_done: int | None = None

    def left(self, done: int, total: int) -> float | None:
        if self.start_done is None:
            self.start_done = done
            return None
        made = done - self.start_done
        if made <= 0:
            return None
        return (time.monotonic() - self.t0) / made * (total - done)


def summarize_errors(results: Iterable[TrialResult]) -> list[str]:
    return [f"{r.id}: {r.error}" for r in results if r.error]
