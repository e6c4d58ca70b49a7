"""The reader -> pipeline hand-over: bounded, counts its waits, never waits once closed,
and shows every event to ``urgent`` before it is queued."""

from __future__ import annotations

import threading

import pytest

from spyglass.capture.handover import Empty, Handover
from spyglass.events import Event
from tests.capture.bounded import close_releases


def _batch(n: int) -> list[Event]:
    return [Event(type="file.read", pid=1, path=f"/f{i}") for i in range(n)]


def test_a_full_queue_makes_the_producer_wait_until_the_consumer_takes() -> None:
    h = Handover(max_events=10)
    h.put(_batch(8))
    put_done = threading.Event()

    def producer() -> None:
        h.put(_batch(5))  # 8 + 5 > 10: waits
        put_done.set()

    t = threading.Thread(target=producer, daemon=True)
    t.start()
    assert not put_done.wait(0.2)  # still waiting (a condition, not a timing: it cannot proceed)
    assert len(h.get(timeout=5) or []) == 8
    assert put_done.wait(30)
    assert len(h.get(timeout=5) or []) == 5
    stats = h.stats()
    assert stats["waits"] == 1 and stats["max_events"] == 10 and stats["max_queued"] == 8


def test_a_batch_larger_than_the_bound_passes_alone_and_the_end_never_waits() -> None:
    h = Handover(max_events=4)
    h.put(_batch(9))  # nothing queued: it goes in whole
    h.put(None)
    assert len(h.get(timeout=1) or []) == 9
    assert h.get(timeout=1) is None
    with pytest.raises(Empty):
        h.get(timeout=0.01)


def test_close_releases_a_waiting_producer() -> None:
    h = Handover(max_events=2)
    h.put(_batch(2))
    assert close_releases(lambda: h.put(_batch(2)), h.close)


def test_urgent_sees_each_event_before_it_is_queued_and_its_errors_are_counted() -> None:
    seen: list[str] = []

    def urgent(ev: Event) -> None:
        assert h.empty()  # nothing of this batch is queued yet
        seen.append(ev.path or "")
        if ev.path == "/f1":
            raise ValueError("boom")

    h = Handover(urgent=urgent)
    h.put(_batch(3))
    assert seen == ["/f0", "/f1", "/f2"] and h.urgent_errors == 1
    assert [e.path for e in h.get(timeout=1) or []] == ["/f0", "/f1", "/f2"]


def test_idle_runs_while_the_producer_waits_for_room_and_between_urgent_events() -> None:
    """The eBPF reader's look at its alert ring: called outside the lock, so the consumer can take
    while it runs, every 32 events of the fast lane and while the queue is full."""
    calls: list[int] = []
    room = threading.Event()
    h: Handover

    def idle() -> None:
        calls.append(h._queued)  # the lock is free: this read does not deadlock
        if len(calls) >= 3:
            room.set()

    h = Handover(max_events=64, urgent=lambda ev: None, idle=idle)
    h.put(_batch(64))
    assert len(calls) == 2  # after the 32nd and the 64th event
    done = threading.Event()
    t = threading.Thread(target=lambda: (h.put(_batch(8)), done.set()), daemon=True)
    t.start()
    assert room.wait(30)  # idle keeps being called while the batch waits for room
    assert not done.is_set()
    assert len(h.get(timeout=5) or []) == 64
    assert done.wait(30)
    assert h.stats()["waits"] == 1


def test_lingering_hands_over_what_gathered_as_one_batch_in_order_and_the_end_apart() -> None:
    h = Handover(linger=0.05)
    h.put(_batch(3))
    h.put([])
    h.put([Event(type="file.write", pid=2, path="/g")])
    h.put(None)
    got = h.get(timeout=5)
    assert [e.path for e in got or []] == ["/f0", "/f1", "/f2", "/g"]
    assert h.get(timeout=5) is None
    assert h.stats()["max_queued"] == 4


def test_a_lingering_consumer_is_woken_by_a_half_full_queue_and_by_the_end() -> None:
    # a linger far longer than any test: only the queue's state can end the consumer's wait
    h = Handover(max_events=10, linger=3600)
    got: list[list[Event] | None] = []
    done = threading.Event()

    def consumer() -> None:
        got.append(h.get(timeout=60))
        done.set()

    t = threading.Thread(target=consumer, daemon=True)
    t.start()
    h.put(_batch(2))
    h.put(_batch(3))  # 5 of 10: half full
    assert done.wait(30)
    assert len(got[0] or []) >= 2  # all that was queued when it woke, from the first batch on
    rest = 5 - len(got[0] or [])
    h.put(_batch(1))
    h.put(None)  # the end: no waiting for the linger either
    assert len(h.get(timeout=60) or []) == rest + 1
    assert h.get(timeout=60) is None


def test_lingering_lets_a_producer_that_waits_for_room_go_on() -> None:
    h = Handover(max_events=4, linger=3600)
    h.put(_batch(3))
    put_done = threading.Event()

    def producer() -> None:
        h.put(_batch(3))  # 3 + 3 > 4: waits for the consumer
        put_done.set()

    threading.Thread(target=producer, daemon=True).start()
    assert len(h.get(timeout=60) or []) == 3  # half full already: taken at once
    assert put_done.wait(30)
    h.put(None)
    assert len(h.get(timeout=60) or []) == 3
    assert h.get(timeout=60) is None
