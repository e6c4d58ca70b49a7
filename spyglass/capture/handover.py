"""The hand-over from a backend's reader thread to the consumer of ``events()``: bounded.

A reader thread parses what the kernel side reports and puts batches of
events here; ``session.events()`` takes them out on the consumer's thread
(the pipeline).  The queue holds at most ``max_events`` events: when the
consumer falls behind, ``put`` waits, so a burst slows the producer (strace
stops the traced processes at their next traced call; the eBPF rings fill
and count what they cannot hold) instead of growing memory and delaying
every event behind it.  The time spent waiting is counted
(:meth:`Handover.stats`, recorded in run.json ``capture.handover``).

With ``linger`` (seconds), :meth:`Handover.get` lets events gather for up to that
long after the first of them was queued, then hands over everything queued at once
(up to the end of the stream): one wake-up of the consumer per ``linger`` instead of
one per batch, which a busy trace (a batch of one or two lines per read) made most of
the consumer's cost.  The producer does not wake a lingering consumer, unless the
queue is half full or the stream ends.  Only what the queue delays waits: the fast
lane (``urgent``) has seen each event before it is queued.

Before a batch is queued, every event is passed to ``urgent`` (if given), on
the reader's thread: the session's fast lane, where single-event alert and
kill rules are decided without waiting behind the queue (see
:mod:`spyglass.rules.fastlane`).  It must be quick and must not raise.
While ``put`` passes a batch to ``urgent`` and while it waits for room, it
calls ``idle`` (if given) every 32 events and every few milliseconds, outside
the lock: the eBPF reader reads its alert ring there, so a secret read is
decided even while the reader or the consumer is behind.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from spyglass.events import Event
from spyglass.logs import get_logger

log = get_logger("spyglass.capture")

#: events queued at most between a reader thread and the pipeline (strace: a full queue slows the tree)
MAX_QUEUED = 20_000
#: for a producer that cannot be slowed, only made to drop (eBPF: the kernel rings count what they
#: cannot hold), the queue is deeper: memory stays bounded, and a burst is still kept whole
MAX_QUEUED_DROPPING = 100_000
Urgent = Callable[[Event], None]
#: seconds between two calls of ``idle`` while ``put`` waits for room
IDLE_EVERY = 0.005
#: ``idle`` is called after every 32 events the fast lane sees (a power of two, minus one)
IDLE_EVENTS = 31


class Empty(Exception):
    """Nothing arrived before the timeout."""


class Handover:
    """A bounded FIFO of event batches (``None`` ends the stream), one producer, one consumer."""

    def __init__(
        self,
        max_events: int = MAX_QUEUED,
        urgent: Urgent | None = None,
        idle: Callable[[], None] | None = None,
        linger: float = 0.0,
    ) -> None:
        self.max_events = max(1, max_events)
        self.urgent = urgent
        self.idle = idle
        self.linger_ns = max(0, int(linger * 1e9))
        self._items: deque[list[Event] | None] = deque()
        self._queued = 0  # events in _items
        self._first_ns = 0  # when the oldest item now queued was queued (monotonic)
        self._lingering = False  # the consumer waits for more: only a half-full queue or the end wakes it
        self._cond = threading.Condition(threading.Lock())
        self._closed = False  # the consumer is gone: put never waits again
        self.waits = 0  # puts that found the queue full
        self.blocked_ns = 0  # time the producer spent waiting for room
        self.max_queued = 0
        self.urgent_errors = 0

    def put(self, batch: list[Event] | None) -> None:
        """Queue a batch (``None``: the end of the stream, never waits); waits while the queue is full."""
        if batch is not None and self.urgent is not None:
            fn, idle = self.urgent, self.idle
            for i, ev in enumerate(batch):
                try:
                    fn(ev)
                except Exception:
                    self.urgent_errors += 1
                    if self.urgent_errors <= 3:
                        log.exception("the fast lane failed on %s (the event goes on through the queue)", ev.type)
                if idle is not None and i & IDLE_EVENTS == IDLE_EVENTS:
                    idle()
        n = len(batch) if batch else 0
        t0 = 0
        while True:
            with self._cond:
                full = self._full(n)
                if full and not t0:
                    self.waits += 1
                    t0 = time.monotonic_ns()
                if full and self.idle is None:
                    while self._full(n):
                        self._cond.wait(0.5)
                    full = False
                elif full:
                    self._cond.wait(IDLE_EVERY)
                    full = self._full(n)
                if not full:
                    if t0:
                        self.blocked_ns += time.monotonic_ns() - t0
                    if not self._items:
                        self._first_ns = time.monotonic_ns() if self.linger_ns else 0
                    self._items.append(batch)
                    self._queued += n
                    if self._queued > self.max_queued:
                        self.max_queued = self._queued
                    if not self._lingering or batch is None or self._queued * 2 >= self.max_events:
                        self._cond.notify_all()
                    return
            assert self.idle is not None
            self.idle()  # outside the lock: the consumer goes on taking batches meanwhile

    def _full(self, n: int) -> bool:
        """(Lock held) whether ``n`` more events must wait: a batch larger than the bound waits
        only for an empty queue."""
        return n > 0 and self._queued > 0 and self._queued + n > self.max_events and not self._closed

    def get(self, timeout: float | None = None) -> list[Event] | None:
        """The next batch (with ``linger``: every event queued, up to the end of the stream, in one
        batch); ``None`` ends the stream; raises :class:`Empty` after ``timeout`` seconds without one."""
        with self._cond:
            if not self._items:
                if timeout is None:
                    while not self._items:
                        self._cond.wait()
                elif not self._cond.wait_for(lambda: bool(self._items), timeout):
                    raise Empty
            if self.linger_ns:
                return self._take_all()
            batch = self._items.popleft()
            if batch:
                self._queued -= len(batch)
            self._cond.notify_all()
            return batch

    def _take_all(self) -> list[Event] | None:
        """(Lock held, something queued) once the oldest item has waited ``linger`` (or the queue is
        half full, or holds the end): everything up to the end of the stream, as one batch."""
        items = self._items
        self._lingering = True
        try:
            while items[-1] is not None and not self._closed and self._queued * 2 < self.max_events:
                left = self._first_ns + self.linger_ns - time.monotonic_ns()
                if left <= 0:
                    break
                self._cond.wait(left / 1e9)
        finally:
            self._lingering = False
        if items[0] is None:
            items.popleft()
            self._cond.notify_all()
            return None
        out: list[Event] = []
        while items and items[0] is not None:
            batch = items.popleft()
            assert batch is not None
            out += batch
        self._queued -= len(out)
        self._first_ns = time.monotonic_ns() if items else 0
        self._cond.notify_all()
        return out

    def empty(self) -> bool:
        with self._cond:
            return not self._items

    def close(self) -> None:
        """The consumer stopped reading: a waiting producer goes on (and nothing waits again)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def stats(self) -> dict[str, float | int]:
        """For run.json: how often and how long the reader waited for the consumer."""
        return {
            "max_events": self.max_events,
            "waits": self.waits,
            "blocked_s": round(self.blocked_ns / 1e9, 4),
            "max_queued": self.max_queued,
        }
