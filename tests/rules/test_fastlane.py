"""The fast lane: a secret read inside a burst of new files is alerted before its event
leaves the reader -> pipeline queue, recorded once, and (enforce) kills the agent.

Real processes under the real backend (strace; ``SPYGLASS_TEST_BACKEND=ebpf`` for
eBPF).  No timing assertions: "before its event leaves the queue" is a condition,
the pipeline's event counter when the alert was announced is below the event's seq.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.rules.conftest import make_home

BURST = 3000
KILL_BOUND = 20000

AGENT = r"""
import os, sys
n, out = int(sys.argv[1]), sys.argv[2]
os.makedirs(out, exist_ok=True)
for i in range(n // 2):
    open(os.path.join(out, f"a{i}"), "w").close()
with open(os.path.expanduser("~/.ssh/id_rsa")) as f:
    f.read()
for i in range(n // 2, n):
    open(os.path.join(out, f"b{i}"), "w").close()
"""


class Witness:
    """A sink that notes the pipeline's event counter whenever an alert is announced or recorded."""

    name = "witness"

    def __init__(self) -> None:
        self.announced: list[tuple[str, int]] = []
        self.recorded: list[tuple[str, int]] = []
        self.pipeline: Any = None

    def start(self, ctx: Any) -> None:
        self.pipeline = ctx.pipeline

    def announce(self, alert: Any) -> None:
        self.announced.append((alert.rule_id, self.pipeline.seq))

    def alert(self, alert: Any) -> None:
        self.recorded.append((alert.rule_id, self.pipeline.seq))


def _run(tmp_path: Path, n: int, policy_text: str | None, agent: str = AGENT,
         ) -> tuple[Any, Any, Witness, list[str], Path]:
    if shutil.which("strace") is None:
        pytest.skip("strace not installed")
    from spyglass.capture import get_backend
    from spyglass.policy import load_policy
    from spyglass.rules import build_sinks
    from spyglass.session.record import RunRequest, record
    from spyglass.store import Store

    ws = tmp_path / "ws"
    ws.mkdir()
    home = make_home(tmp_path)
    (ws / "agent.py").write_text(agent)
    policy_path = None
    if policy_text is not None:
        policy_path = ws / "spyglass.yaml"
        policy_path.write_text(policy_text)
    policy = load_policy(policy_path, ws)
    err = io.StringIO()
    sinks = build_sinks(policy, home=str(home), stream=err)
    witness = Witness()
    out = ws / "burst"
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONDONTWRITEBYTECODE": "1"}
    store = Store(tmp_path / "store", create=True)
    outcome = record(
        RunRequest(argv=[sys.executable, str(ws / "agent.py"), str(n), str(out)], cwd=str(ws), env=env,
                   workspace=[str(ws)], mode=policy.mode, extra={"home": str(home)}),
        get_backend(os.environ.get("SPYGLASS_TEST_BACKEND", "strace")), store, [*sinks, witness],
    )
    return outcome, sinks[0], witness, err.getvalue().splitlines(), out


def test_secret_read_in_a_burst_is_announced_before_its_event_is_dequeued(tmp_path: Path) -> None:
    outcome, engine, witness, lines, out = _run(tmp_path, BURST, None)
    from spyglass.store import RunReader, Store

    assert len(list(out.iterdir())) == BURST  # observe: the burst ran to its end
    reads = [a for a in engine.alerts if a.rule_id == "cred-secret-read"]
    assert len(reads) == 1, [a.message for a in reads]
    seq = reads[0].event_seqs[0]
    announced = [s for r, s in witness.announced if r == "cred-secret-read"]
    assert len(announced) == 1
    # announced while its event had not reached the pipeline yet (nor any event after it)
    assert announced[0] < seq
    # recorded once, with the event's seq, in the store too
    stored = [a for a in RunReader(Store(tmp_path / "store"), outcome.meta.id).alerts()
              if a.rule_id == "cred-secret-read"]
    assert len(stored) == 1 and stored[0].event_seqs == [seq]
    assert [r for r, _ in witness.recorded].count("cred-secret-read") == 1
    # the live line is printed once
    assert sum("cred-secret-read" in line for line in lines) == 1
    # the hand-over's figures are in run.json
    handover = outcome.meta.capture["handover"]
    assert handover["max_events"] > 0 and handover["waits"] >= 0 and handover["max_queued"] >= 1


def test_kill_rule_in_a_burst_stops_the_agent_from_the_fast_lane(tmp_path: Path) -> None:
    policy = "mode: enforce\nrules:\n  overrides:\n    cred-secret-read: {action: kill}\n"
    outcome, engine, witness, _lines, out = _run(tmp_path, KILL_BOUND, policy)
    assert engine.stopped_by == "cred-secret-read"
    assert outcome.capture.signal == "SIGKILL"
    # killed during the burst: the second half never completed
    assert len(list(out.iterdir())) < KILL_BOUND
    announced = [s for r, s in witness.announced if r == "cred-secret-read"]
    kills = [a for a in engine.alerts if a.rule_id == "cred-secret-read"]
    assert len(announced) == 1 and len(kills) == 1
    assert announced[0] < kills[0].event_seqs[0]


def test_benign_twin_burst_without_secret_is_silent(tmp_path: Path) -> None:
    """The same burst reading a file that is no secret: nothing announced, nothing recorded."""
    outcome, engine, witness, _lines, _out = _run(tmp_path, 1000, None, AGENT.replace("~/.ssh/id_rsa", "~/.bashrc"))
    assert not [a for a in engine.alerts if a.rule_id == "cred-secret-read"]
    assert not [r for r, _ in witness.announced if r == "cred-secret-read"]
    assert outcome.exit_code == 0


class _Heard:
    """A sink that keeps the alerts announced to it."""

    def __init__(self, into: list[Any]) -> None:
        self.into = into

    def announce(self, alert: Any) -> None:
        self.into.append(alert)


def _play(engine: Any, pipe: Any, events: list[Any], urgent: bool = True) -> list[Any]:
    """Copies of ``events``, each shown to the fast lane first (``urgent``), then fed in order to the
    pipeline: the engine's recorded alerts, as plain data."""
    import msgspec

    copies = [msgspec.structs.replace(ev) for ev in events]
    if urgent:
        for ev in copies:
            engine.urgent(ev)
    for ev in copies:
        pipe.feed(ev, renumber=False)
    pipe.done()
    return [msgspec.to_builtins(a) for a in engine.alerts]


def test_the_lane_running_ahead_changes_no_alert() -> None:
    """The lane sees the whole stream before the engine sees any of it (a reader far ahead of a
    busy pipeline): the recorded alerts are exactly those of the engine alone, and every alert
    the lane announced is among them."""
    from spyglass.pipeline import Pipeline, RunContext
    from spyglass.rules.engine import RuleEngine
    from spyglass.rules.ruleset import load_ruleset
    from tests.rules.test_engine import HOME, WS, stream

    rs = load_ruleset()
    for seed in (1, 2, 4):
        events = stream(2000, seed)
        runs = []
        announced: list[Any] = []
        for lane in (False, True):
            engine = RuleEngine(rs, home=HOME, fast_lane=lane)
            pipe = Pipeline([engine, _Heard(announced)], RunContext(root_cwd=WS, workspace=[WS]))
            pipe.start()
            runs.append(_play(engine, pipe, events, urgent=lane))
        assert runs[0] == runs[1]
        assert announced
        recorded = {(a["rule_id"], a["pid"], a["message"]) for a in runs[1]}
        assert all((a.rule_id, a.pid, a.message) in recorded for a in announced)
        assert engine.lane is not None and not engine.lane.verdicts  # each taken by the engine, in order
        assert engine._late  # ... which ran only the other matchers of those events


def test_the_printer_says_an_announced_alert_once_and_again_when_it_was_not_saved() -> None:
    from spyglass.events import Alert
    from spyglass.pipeline import RunContext
    from spyglass.rules.printer import AlertPrinter

    out = io.StringIO()
    ctx = RunContext()
    printer = AlertPrinter(out, color=False)
    printer.start(ctx)
    a = Alert(rule_id="cred-secret-read", title="t", level="high", pid=7, message="m")
    printer.announce(a)
    a.seq = 1
    printer.alert(a)
    assert out.getvalue().count("cred-secret-read") == 1 and "NOT SAVED" not in out.getvalue()
    b = Alert(rule_id="cred-secret-read", title="t", level="high", pid=8, message="m")
    printer.announce(b)
    b.seq = 2
    ctx.unsaved_alerts.add(2)
    printer.alert(b)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and lines[-1].endswith("[NOT SAVED: the store could not be written]")
    machine = io.StringIO()
    jp = AlertPrinter(machine, fmt="json")
    jp.start(RunContext())
    jp.announce(a)
    assert machine.getvalue() == ""  # JSON lines wait for the recorded alert (its seq, its event)
    jp.alert(a)
    assert '"seq":1' in machine.getvalue()


def test_events_seen_ahead_of_order_are_announced_once_and_change_no_alert() -> None:
    """The eBPF look-ahead: lifecycle events and reads are shown to the lane ahead of the stream
    (``peek``, their own copies, as a second decoder makes them), then everything comes in order.
    The recorded alerts are those of the engine alone; nothing is announced twice."""
    import msgspec

    from spyglass.pipeline import Pipeline, RunContext
    from spyglass.rules.engine import RuleEngine
    from spyglass.rules.ruleset import load_ruleset
    from tests.rules.test_engine import HOME, WS, stream

    rs = load_ruleset()
    events = stream(2000, 3)
    runs = []
    announced: list[Any] = []
    engine = None
    for ahead in (False, True):
        engine = RuleEngine(rs, home=HOME)
        pipe = Pipeline([engine, _Heard(announced)], RunContext(root_cwd=WS, workspace=[WS]))
        pipe.start()
        if ahead:
            announced.clear()
            for ev in events:
                if ev.type.startswith("process.") or ev.type == "file.read":
                    engine.lookout(msgspec.structs.replace(ev))
        runs.append(_play(engine, pipe, events))
    assert engine is not None and engine.lane is not None
    assert runs[0] == runs[1]
    keys = [(a.rule_id, a.pid, a.message) for a in announced]
    assert engine.lane.peek_hits > 0 and len(keys) == len(set(keys))
    recorded = {(a["rule_id"], a["pid"], a["message"]) for a in runs[1]}
    assert set(keys) <= recorded
    assert not engine.lane.peeked  # every event announced ahead was reached in order


def test_a_secret_read_seen_ahead_of_an_exec_is_printed_once() -> None:
    """The look-ahead decides a read with a process table of its own: when it sees the read before
    the exec that precedes it in order, its message names the command before the exec ("sh read
    secret ..."), the recorded one the command after it ("cat read secret ...").  The live printer
    says it once all the same (it matches the two by rule, process and event time), and the alert
    is recorded once.  A second read of the same kind by another process is a line of its own."""
    import msgspec

    from spyglass.events import Event
    from spyglass.pipeline import Pipeline, RunContext
    from spyglass.rules.engine import RuleEngine
    from spyglass.rules.printer import AlertPrinter
    from spyglass.rules.ruleset import load_ruleset
    from tests.rules.test_engine import HOME, WS

    key = f"{HOME}/.ssh/id_rsa"
    events = [
        Event(type="process.start", pid=100, ts=1),
        Event(type="process.exec", pid=100, ts=2, exe="/usr/bin/sh", argv=["sh", "-c", "x"], cwd=WS),
        Event(type="process.start", pid=101, ppid=100, ts=3),
        Event(type="process.exec", pid=101, ts=4, exe="/usr/bin/sh", argv=["sh"], cwd=WS),
        Event(type="process.exec", pid=101, ts=5, exe="/usr/bin/cat", argv=["cat", key], cwd=WS),
        Event(type="file.read", pid=101, ts=6, path=key),
        Event(type="process.start", pid=102, ppid=100, ts=7),
        Event(type="process.exec", pid=102, ts=8, exe="/usr/bin/head", argv=["head", key], cwd=WS),
        Event(type="file.read", pid=102, ts=9, path=key),
    ]
    out = io.StringIO()
    engine = RuleEngine(load_ruleset(), home=HOME)
    printer = AlertPrinter(out, color=False)
    pipe = Pipeline([engine, printer], RunContext(root_cwd=WS, workspace=[WS]))
    pipe.start()
    for ev in [*events[:4], events[5]]:  # ahead: the read of 101 before its second exec
        engine.lookout(msgspec.structs.replace(ev))
    recorded = _play(engine, pipe, events)
    reads = [a for a in recorded if a["rule_id"] == "cred-secret-read"]
    assert [(a["pid"], a["message"].split()[0]) for a in reads] == [(101, "cat"), (102, "head")]
    assert engine.lane is not None and engine.lane.peek_hits == 1
    lines = [ln for ln in out.getvalue().splitlines() if "cred-secret-read" in ln]
    assert len(lines) == 2, lines
    assert "sh read secret" in lines[0]  # the line as announced ahead: it named the command before the exec


def test_the_engine_leaves_the_lanes_matchers_to_the_lane() -> None:
    """An event the lane saw: the engine runs only the other matchers of its type and takes the
    lane's hits (one evaluation each).  An event the lane never saw (the session's own) runs
    every matcher: its alert is raised all the same."""
    from spyglass.events import Event
    from spyglass.pipeline import Pipeline, RunContext
    from spyglass.rules.engine import RuleEngine
    from spyglass.rules.ruleset import load_ruleset
    from tests.rules.test_engine import HOME, WS

    engine = RuleEngine(load_ruleset(), home=HOME)
    pipe = Pipeline([engine], RunContext(root_cwd=WS, workspace=[WS]))
    pipe.start()
    assert engine.lane is not None and engine.compiled is not None
    secret = f"{HOME}/.ssh/id_rsa"
    start = [Event(type="process.start", pid=100, ts=1),
             Event(type="process.exec", pid=100, ts=2, exe="/usr/bin/cat", argv=["cat"], cwd=WS)]
    for ev in start:
        engine.urgent(ev)
        pipe.feed(ev)
    read = Event(type="file.read", pid=100, ts=3, path=secret, flags="O_RDONLY")
    compiled = engine.compiled
    assert compiled.build is not None and compiled.build_late is not None
    rule_of = {i: engine.rules[m.rule_index].id for i, m in enumerate(engine._matchers)}
    full, late = compiled.build("file.read"), compiled.build_late("file.read")
    assert full is not None
    assert "cred-secret-read" in {rule_of[i] for i in full(read, engine.fx)}
    assert late is None or "cred-secret-read" not in {rule_of[i] for i in late(read, engine.fx)}

    engine.urgent(read)
    assert [i for i in engine.lane.verdicts[id(read)][1] if rule_of[i] == "cred-secret-read"]
    pipe.feed(read)
    assert not engine.lane.verdicts
    assert [a.rule_id for a in engine.alerts].count("cred-secret-read") == 1

    unseen = Event(type="file.read", pid=100, ts=4, path=f"{HOME}/.aws/credentials", flags="O_RDONLY")
    pipe.feed(unseen)  # never shown to the lane
    assert [a.rule_id for a in engine.alerts].count("cred-secret-read") == 2


def test_the_lanes_process_table_is_the_pipelines() -> None:
    """Exited processes leave the lane's table when they leave the pipeline's (at the next process
    event), so a rule reading the process table decides the same on both sides."""
    from spyglass.events import Event
    from spyglass.pipeline import Pipeline, RunContext
    from spyglass.rules.engine import RuleEngine
    from spyglass.rules.ruleset import load_ruleset
    from tests.rules.test_engine import HOME, WS

    engine = RuleEngine(load_ruleset(), home=HOME)
    pipe = Pipeline([engine], RunContext(root_cwd=WS, workspace=[WS]))
    pipe.start()
    assert engine.lane is not None
    evs = [Event(type="process.start", pid=100, ts=1),
           Event(type="process.exec", pid=100, ts=2, exe="/bin/sh", argv=["sh"], cwd=WS)]
    for child in range(101, 140):
        evs += [Event(type="process.start", pid=child, ppid=100, ts=3),
                Event(type="process.exec", pid=child, ts=4, exe="/bin/true", argv=["true"]),
                Event(type="file.read", pid=child, ts=5, path=f"{WS}/x{child}"),
                Event(type="process.exit", pid=child, ts=6, exit_code=0),
                Event(type="file.read", pid=100, ts=7, path=f"{WS}/y{child}")]
    for ev in evs:
        engine.urgent(ev)
        pipe.feed(ev)
        assert engine.lane.fx.procs.procs.keys() == pipe.ctx.procs.procs.keys()
    assert engine.lane.fx.procs.evicted == pipe.ctx.procs.evicted > 0
