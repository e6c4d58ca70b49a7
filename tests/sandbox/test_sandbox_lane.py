"""Sandboxed runs: the fast lane sees each capture event as the sandbox admits it (paths on
the host, machinery dropped) before it is queued, and the capture -> stream bus is bounded.

Real bubblewrap and the real backends (strace; eBPF where it loads, else skipped with the
reason).  No timing assertion: "decided ahead" is the pipeline's event counter when the
alert was announced (below the event's seq) and, under eBPF, the look-ahead's own mark.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from sandbox_helpers import needs_bwrap, run_sandboxed

from spyglass.events import Event
from spyglass.sandbox.session import EventBus, MachineryFilter, SandboxLane
from tests.capture.bounded import close_releases
from tests.capture.burst import Witness, shell_command

BURST = 3000



def _backend(name: str) -> str:
    if name == "ebpf":
        from spyglass.capture.ebpf import probe

        found = probe.static_problem()
        if found is not None:
            pytest.skip(f"eBPF backend unavailable: {found[0]}")
    return name


@needs_bwrap
@pytest.mark.parametrize("backend", ["strace", "ebpf"])
def test_a_honeytoken_read_in_a_burst_is_announced_before_its_event_leaves_the_queue(
    tmp_path: Path, backend: str
) -> None:
    witness = Witness()
    agent = shell_command(BURST, "burst", "~/.ssh/id_rsa", BURST // 2)
    run = run_sandboxed(tmp_path, agent, sinks=[witness], backend=_backend(backend))
    assert len(list((run.ws / "burst").iterdir())) == BURST
    alerts = [a for a in run.alerts() if a.rule_id == "cred-honeytoken-access"]
    assert len(alerts) == 1
    announced = [a for a in witness.announced if a["rule"] == "cred-honeytoken-access"]
    assert len(announced) == 1
    # the lane saw the event as the run records it: the decoy's host path, not the sandbox's
    assert announced[0]["message"] == alerts[0].message
    assert str(tmp_path / "work" / "home" / ".ssh" / "id_rsa") in alerts[0].message
    assert announced[0]["seq"] < alerts[0].event_seqs[0]  # decided before its event was dequeued
    if backend == "ebpf":
        assert announced[0]["peek_hits"] == 1  # from the alert ring, ahead of the burst
    # the capture bus's figures are in run.json, within its bound
    handover = run.outcome.meta.capture["handover"]
    assert 1 <= handover["bus_max_queued"] <= handover["bus_max_events"]
    assert handover["bus_waits"] >= 0 and handover["bus_blocked_s"] >= 0


@needs_bwrap
def test_benign_twin_reading_its_own_file_during_the_burst_is_silent(tmp_path: Path) -> None:
    witness = Witness()
    agent = shell_command(1000, "burst", "notes.txt", 500)
    run = run_sandboxed(tmp_path, agent, sinks=[witness], files={"notes.txt": "mine\n"})
    assert not [a for a in run.alerts() if a.rule_id == "cred-honeytoken-access"]
    assert not witness.announced


def _ev(i: int) -> Event:
    return Event(type="file.create", pid=1, path=f"/w/f{i}")


def test_the_bus_holds_a_bounded_number_of_capture_events_and_counts_the_wait() -> None:
    bus = EventBus(max_capture=3)
    for i in range(3):
        bus.put_capture(_ev(i))
    bus.put(_ev(99))  # a proxy event never waits, full or not
    done = threading.Event()

    def pump() -> None:
        bus.put_capture(_ev(3))  # the fourth waits for room
        done.set()

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    assert not done.wait(0.2)  # cannot proceed: a condition, not a timing
    kinds = [bus.get(timeout=5)[1].path for _ in range(2)]  # type: ignore[union-attr]
    assert done.wait(30)
    rest = []
    while True:
        try:
            rest.append(bus.get(timeout=0.05)[1].path)  # type: ignore[union-attr]
        except Exception:
            break
    assert kinds + rest == ["/w/f0", "/w/f1", "/w/f2", "/w/f99", "/w/f3"]
    stats = bus.stats()
    assert stats["bus_waits"] == 1 and stats["bus_max_queued"] == 3 and stats["bus_max_events"] == 3


def test_closing_the_bus_releases_a_waiting_pump() -> None:
    bus = EventBus(max_capture=1)
    bus.put_capture(_ev(0))
    assert close_releases(lambda: bus.put_capture(_ev(1)), bus.close)


class _Sandbox:
    """The two parts of a prepared sandbox the lane's look-ahead reads (its machinery filter and
    path map), without building one: the run-level tests above use real ones."""

    def __init__(self) -> None:
        self.machinery = MachineryFilter("/usr/bin/bwrap", sys.executable, "/run/spyglass/relay.py")
        self.pathmap = SimpleNamespace(map_event=lambda ev: None)


def _launch(lane: SandboxLane) -> None:
    """The records of a sandbox's launch as the look-ahead reads them: the launcher execs bwrap,
    whose namespace init execs the relay, which starts the agent."""
    for ev in (
        Event(type="process.exec", ts=1, pid=10, exe="/usr/bin/bwrap", argv=["bwrap"]),
        Event(type="process.start", ts=2, pid=12, ppid=10),
        Event(type="process.exec", ts=3, pid=12, exe=sys.executable,
              argv=["python3", "-I", "-S", "/run/spyglass/relay.py", "--", "sh"]),
        Event(type="process.start", ts=4, pid=13, ppid=12),
        Event(type="process.exec", ts=5, pid=13, exe="/bin/sh", argv=["sh"]),
    ):
        lane.look(ev)


def test_the_look_ahead_knows_the_agent_started_before_the_run_does() -> None:
    """The in-order view lags behind a burst (it had not seen the relay start the agent when
    the agent's secret read came through the alert ring, and the read waited in order): the
    look-ahead follows the sandbox's launch from the records it reads itself."""
    seen: list[Event] = []
    lane = SandboxLane(_Sandbox(), None, seen.append)  # type: ignore[arg-type]
    _launch(lane)
    read = Event(type="file.read", ts=6, pid=13, path="/home/u/.ssh/id_rsa")
    lane.look(read)
    assert lane.sb.machinery.relay_pid is None  # the run's own view has seen nothing yet
    assert read in seen


def test_benign_twin_the_sandbox_building_itself_is_not_passed_ahead() -> None:
    seen: list[Event] = []
    lane = SandboxLane(_Sandbox(), None, seen.append)  # type: ignore[arg-type]
    early = Event(type="file.read", ts=2, pid=10, path="/home/u/.ssh/id_rsa")  # before the relay
    lane.look(Event(type="process.exec", ts=1, pid=10, exe="/usr/bin/bwrap", argv=["bwrap"]))
    lane.look(early)
    _launch(lane)
    late = Event(type="file.read", ts=6, pid=10, path="/home/u/.ssh/id_rsa")  # bwrap's, after it
    lane.look(late)
    assert early not in seen and late not in seen
    assert seen and all(e.type.startswith("process.") for e in seen)  # the tree goes on, for the lane's table
