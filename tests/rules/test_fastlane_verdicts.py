"""The fast lane's verdicts taken by the engine: the engine records the alerts of the full
evaluation (no lane, as ``check`` gives) even when a fact of the run changed between the lane's
look and the engine's (the attacks on the monitor found by an adversarial pass).

Each test plays the same events twice: with the lane running ahead (as the capture's reader
thread does while the pipeline thread is busy) and without it, and compares the recorded alerts.
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import msgspec

from tests.rules.test_engine import HOME, WS

TRACER = 4242  # strace's pid (eBPF: the watchdog's), known to the pipeline only at its first event
TRACER_GROUP = 4240  # its process group (session/monitors.py add_group), likewise


def _alerts(engine: Any) -> list[tuple[str, int, str]]:
    return [(a.rule_id, a.pid, a.message) for a in engine.alerts]


def _record_loop(lane: bool, events: list[Any]) -> Any:
    """What spyglass.session.record does: the lane sees the first events on the reader thread
    (meanwhile the pipeline thread warms the rules up after backend.start()); the pipeline thread
    then learns the tracer's pid (``ctx.monitor_pids.extend``) before it feeds its first event."""
    from spyglass.pipeline import Pipeline, RunContext
    from spyglass.rules.engine import RuleEngine
    from spyglass.rules.ruleset import load_ruleset

    engine = RuleEngine(load_ruleset(), home=HOME, fast_lane=lane)
    meta = SimpleNamespace(extra={"monitor_pgids": [os.getpgrp()]}, monitor_pid=None, status="", mode=None)
    ctx = RunContext(root_cwd=WS, workspace=[WS], monitor_pids=[os.getpid()], run=meta)  # type: ignore[arg-type]
    pipe = Pipeline([engine], ctx)
    pipe.start()
    copies = [msgspec.structs.replace(ev) for ev in events]
    if lane:
        for ev in copies:
            engine.urgent(ev)
    ctx.monitor_pids.append(TRACER)  # record.py: tracer_known, at the pipeline's first event
    meta.extra["monitor_pgids"].append(TRACER_GROUP)  # ... and add_group(groups, tracer)
    for ev in copies:
        pipe.feed(ev)
    pipe.done()
    return engine


def test_a_signal_to_the_tracer_early_in_the_run_is_the_monitor_attack_with_the_lane_too() -> None:
    from spyglass.events import Event

    events = [
        Event(type="process.start", pid=100, ts=1),
        Event(type="process.exec", pid=100, ts=2, exe="/bin/sh", argv=["sh", "-c", "kill -STOP $PPID"], cwd=WS),
        Event(type="sys.sensitive", pid=100, ts=3, syscall="kill", detail="SIGSTOP", target_pid=TRACER),
    ]
    without = _alerts(_record_loop(False, events))
    assert "evasion-kill-monitor" in {r for r, _, _ in without}  # the full evaluation (and check)
    with_lane = _alerts(_record_loop(True, events))
    assert [a for a in without if a not in with_lane] == []  # no alert of the full evaluation is lost


def test_opening_the_tracers_memory_early_in_the_run_is_the_monitor_attack_with_the_lane_too() -> None:
    from spyglass.events import Event

    events = [
        Event(type="process.start", pid=100, ts=1),
        Event(type="process.exec", pid=100, ts=2, exe="/usr/bin/python3", argv=["python3", "a.py"], cwd=WS),
        Event(type="file.read", pid=100, ts=3, path=f"/proc/{TRACER}/mem", flags="O_RDONLY"),
    ]
    without = _alerts(_record_loop(False, events))
    assert "evasion-kill-monitor" in {r for r, _, _ in without}
    with_lane = _alerts(_record_loop(True, events))
    assert [a for a in without if a not in with_lane] == []


def test_a_signal_to_the_tracers_group_early_in_the_run_is_the_monitor_attack_with_the_lane_too() -> None:
    from spyglass.events import Event

    events = [
        Event(type="process.start", pid=100, ts=1),
        Event(type="process.exec", pid=100, ts=2, exe="/bin/sh", argv=["sh", "-c", "kill -STOP -4240"], cwd=WS),
        Event(type="sys.sensitive", pid=100, ts=3, syscall="kill", detail="SIGSTOP to process group 4240",
              target_pid=-TRACER_GROUP),
    ]
    without = _alerts(_record_loop(False, events))
    assert "evasion-kill-monitor" in {r for r, _, _ in without}
    with_lane = _alerts(_record_loop(True, events))
    assert [a for a in without if a not in with_lane] == []


def test_the_look_aheads_process_table_drops_exited_processes() -> None:
    """The eBPF look-ahead (``FastLane.peek``) is fed every process's start and exit from the
    lifecycle ring: its table must stay bounded by the processes alive, as the lane's and the
    pipeline's do (not introduced by the verdicts change: found while reviewing it)."""
    from spyglass.events import Event
    from spyglass.pipeline import Pipeline, RunContext
    from spyglass.rules.engine import RuleEngine
    from spyglass.rules.ruleset import load_ruleset

    engine = RuleEngine(load_ruleset(), home=HOME)
    pipe = Pipeline([engine], RunContext(root_cwd=WS, workspace=[WS]))
    pipe.start()
    assert engine.lane is not None
    engine.lookout(Event(type="process.start", pid=100, ts=1))
    for child in range(101, 2101):  # a build: many short processes
        engine.lookout(Event(type="process.start", pid=child, ppid=100, ts=2))
        engine.lookout(Event(type="process.exit", pid=child, ts=3, exit_code=0))
    engine.lookout(Event(type="process.start", pid=3000, ppid=100, ts=4))
    assert len(engine.lane.ahead.procs.procs) < 10
