"""The judge's ordering: a proxy request recorded before its process's start is judged after it."""

from __future__ import annotations

from spyglass.events import Event
from spyglass.skills.judge import _after_their_process


def ev(t: str, pid: int, seq: int, **kw: object) -> Event:
    return Event(type=t, ts=seq, pid=pid, seq=seq, **kw)  # type: ignore[arg-type]


def test_a_request_that_came_before_its_process_follows_that_process_exec() -> None:
    events = [
        ev("process.exec", 10, 1, exe="/bin/bash", argv=["bash", "s.sh"]),
        ev("proxy.request", 11, 2, address="x.test"),  # the proxy's event overtook the capture's
        ev("process.start", 11, 3, ppid=10),
        ev("process.exec", 11, 4, exe="/usr/bin/wget", argv=["wget", "http://x.test/"]),
        ev("process.exit", 11, 5),
    ]
    assert [e.seq for e in _after_their_process(events)] == [1, 3, 4, 2, 5]


def test_requests_in_order_and_of_unknown_processes_stay_where_they_are() -> None:
    events = [
        ev("process.exec", 10, 1, exe="/bin/bash"),
        ev("proxy.request", 10, 2, address="x.test"),
        ev("proxy.request", 99, 3, address="y.test"),  # never seen: the relay's own pid
        ev("process.exit", 10, 4),
    ]
    assert [e.seq for e in _after_their_process(events)] == [1, 2, 3, 4]
