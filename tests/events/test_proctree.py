"""The pipeline's process table evicts exited processes and keeps the ancestry of those alive."""

from __future__ import annotations

from spyglass.events import Event
from spyglass.events.proctree import ProcessTable
from spyglass.pipeline import Pipeline, RunContext


def _start(pid: int, ppid: int | None) -> Event:
    return Event(type="process.start", pid=pid, ppid=ppid)


def _exec(pid: int, argv: list[str]) -> Event:
    return Event(type="process.exec", pid=pid, exe="/usr/bin/" + argv[0], argv=argv)


def _exit(pid: int) -> Event:
    return Event(type="process.exit", pid=pid, exit_code=0)


def _feed(t: ProcessTable, *evs: Event) -> None:
    for ev in evs:
        ev.ts = ev.ts or 1
        t.update(ev)


def test_short_lived_processes_leave_only_the_living() -> None:
    t = ProcessTable(evict=True)
    _feed(t, _start(1, None), _exec(1, ["bash"]))
    for pid in range(2, 10_002):
        _feed(t, _start(pid, 1), _exec(pid, ["ls"]), _exit(pid))
    _feed(t, Event(type="file.read", pid=1, path="/x"))
    assert set(t.procs) == {1} and t.evicted == 10_000
    assert t.get(1) is not None and t.get(1).children == []  # type: ignore[union-attr]


def test_an_exited_parent_stays_while_a_child_lives_and_goes_with_the_last_child() -> None:
    t = ProcessTable(evict=True)
    _feed(t, _start(1, None), _exec(1, ["bash"]), _start(2, 1), _exec(2, ["sh"]), _start(3, 2), _exec(3, ["sleep"]))
    _feed(t, _exit(2), Event(type="file.read", pid=3, path="/x"))
    assert [p.pid for p in t.lineage(3)] == [3, 2, 1]  # the daemonised child keeps its ancestry
    assert [p.argv for p in t.lineage(3)] == [["sleep"], ["sh"], ["bash"]]
    _feed(t, _exit(3), Event(type="file.read", pid=1, path="/x"))
    assert set(t.procs) == {1}  # 3 went, and 2 (exited) with it


def test_sinks_still_see_the_process_on_its_exit_event() -> None:
    seen: list[list[int]] = []

    class Lineage:
        name = "lineage"

        def __init__(self, ctx: RunContext) -> None:
            self.ctx = ctx

        def process_exit(self, ev: Event) -> None:
            seen.append([p.pid for p in self.ctx.procs.lineage(ev.pid)])

    ctx = RunContext()
    pipe = Pipeline([Lineage(ctx)], ctx)
    for ev in (_start(1, None), _start(2, 1), _start(3, 2), _exit(3), _exit(2)):
        pipe.feed(ev)
    assert seen == [[3, 2, 1], [2, 1]]
    assert ctx.procs.evict


def test_without_evict_everything_is_kept() -> None:
    """Benign twin: the report's own table (evict off) keeps every process and reused pids' history."""
    t = ProcessTable()
    _feed(t, _start(1, None), _start(2, 1), _exit(2), _start(2, 1), _exit(2), _exit(1))
    assert set(t.procs) == {1, 2} and len(t.history) == 1 and t.evicted == 0
