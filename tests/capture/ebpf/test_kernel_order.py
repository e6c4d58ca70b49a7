"""The reader's merge of the two rings (no root needed: the rings here are lists standing in
for the memory-mapped ones, since the order question is about when records arrive, which a
live program cannot be made to interleave on demand)."""

from __future__ import annotations

import struct
import time
from typing import Any, cast

from spyglass.capture.ebpf.ring import KernelOrder, Ring, record_ts


class _Arrivals:
    """A ring whose reads return what has "arrived" since the last read."""

    def __init__(self) -> None:
        self.pending: list[bytes] = []

    def read(self) -> list[bytes]:
        out, self.pending = self.pending, []
        return out


def _rec(ts: int, tag: bytes) -> bytes:
    return b"\0" * 16 + struct.pack("<Q", ts) + tag


def _now() -> int:
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME)


def _order(*rings: _Arrivals, hold_ns: int = 50_000_000) -> KernelOrder:
    return KernelOrder(cast("list[Ring]", list(rings)), hold_ns=hold_ns)


def test_a_fork_arriving_after_its_childs_first_call_is_still_decoded_first() -> None:
    life, events = _Arrivals(), _Arrivals()
    order = _order(life, events)
    t = _now()
    events.pending = [_rec(t + 2, b"child-open")]  # the child's call is read first ...
    first = order.read()
    life.pending = [_rec(t + 1, b"fork")]  # ... its fork, stamped before it, arrives after
    second = order.read(last=True)
    assert [r[24:] for r in first + second] == [b"fork", b"child-open"]


def test_old_records_go_out_at_once_and_recent_ones_wait_for_the_next_read() -> None:
    life, events = _Arrivals(), _Arrivals()
    order = _order(life, events)
    t = _now()
    events.pending = [_rec(t - 100_000_000, b"old"), _rec(t + 1_000, b"recent")]
    assert [r[24:] for r in order.read()] == [b"old"]
    assert [r[24:] for r in order.read(last=True)] == [b"recent"]
    assert order.read(last=True) == []


def test_records_of_both_rings_come_out_sorted_by_their_stamp() -> None:
    life, events = _Arrivals(), _Arrivals()
    order = _order(life, events, hold_ns=0)
    t = _now() - 10_000_000
    life.pending = [_rec(t + 1, b"fork"), _rec(t + 5, b"exit")]
    events.pending = [_rec(t + 2, b"open"), _rec(t + 4, b"write")]
    out = order.read()
    assert [r[24:] for r in out] == [b"fork", b"open", b"write", b"exit"]
    assert [record_ts(r) for r in out] == sorted(record_ts(r) for r in out)


def test_nothing_is_lost_however_the_reads_fall() -> None:
    life, events = _Arrivals(), _Arrivals()
    order = _order(life, events)
    got: list[Any] = []
    t = _now()
    for i in range(50):
        (life if i % 3 == 0 else events).pending.append(_rec(t + i, b"%d" % i))
        if i % 7 == 0:
            got += order.read()
    got += order.read(last=True)
    assert [int(r[24:]) for r in got] == list(range(50))


class _Backlog:
    """A ring read in steps: each read takes at most ``step`` records; ``pending`` says what is left."""

    def __init__(self, records: list[bytes], step: int) -> None:
        self.records = records
        self.step = step

    def read(self, limit: int = 1 << 30) -> list[bytes]:
        out, self.records = self.records[: self.step], self.records[self.step :]
        return out

    def pending(self) -> int:
        return len(self.records)


def test_a_ring_read_in_steps_holds_back_what_its_unread_records_may_precede() -> None:
    t = _now() - 10_000_000_000  # all old: only the unread rest of the backlog can hold records back
    ms = 1_000_000
    events = _Backlog([_rec(t + i * ms, b"e%d" % i) for i in range(10)], step=3)
    order = KernelOrder(cast("list[Ring]", [events]), hold_ns=ms // 2, chunk=1)
    early = [_rec(t + 5 * ms + 1, b"exit")]  # read ahead (the lifecycle ring): after e5, before e6
    got = order.read(early=early)
    assert order.behind
    assert [r[24:] for r in got] == [b"e0", b"e1"]  # e2 may still be preceded by an unread record
    while order.behind:
        got += order.read()
    got += order.read(last=True)
    names = [r[24:] for r in got]
    assert names == [b"e0", b"e1", b"e2", b"e3", b"e4", b"e5", b"exit", b"e6", b"e7", b"e8", b"e9"]


def test_records_read_ahead_bound_the_watermark_by_when_their_ring_was_read() -> None:
    """The look-ahead reads the lifecycle ring, then (after decoding for the fast lane, or a stall
    under load) the merge reads the events ring: a fork that arrives between the two reads must
    still come out before its child's calls, so the watermark is no later than the look's read."""
    events = _Arrivals()
    order = _order(events, hold_ns=1_000_000)
    looked = _now()  # the look-ahead read the lifecycle ring here: nothing had arrived yet
    time.sleep(0.005)  # the look decodes, the interpreter lock is elsewhere ...
    t = _now()
    fork, child = _rec(t - 3_000_000, b"fork"), _rec(t - 2_000_000, b"child-open")
    events.pending = [child]  # ... the child's call is in the events ring when the merge reads
    first = order.read(early=[], early_ns=looked)
    second = order.read(last=True, early=[fork])  # the fork, read at the next look
    assert [r[24:] for r in first + second] == [b"fork", b"child-open"]
    # the twin: without the look's time, the child's call would have gone out first
    events.pending = [child]
    plain = _order(events, hold_ns=1_000_000)
    assert [r[24:] for r in plain.read(early=[])] == [b"child-open"]
