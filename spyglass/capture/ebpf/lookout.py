"""The eBPF reader's look-ahead: records the fast lane sees before the burst ahead of them.

The program puts an open that reached a secret or one of spyglass's own files
(by device and inode: the ``urgent`` map) on a small ring of its own,
``alert``, and wakes the reader at once.  The reader reads that ring and the
lifecycle ring (fork, exec, exit) eagerly: before each step of the events
ring, and while it waits for room in the hand-over.  A second decoder, fed with
these records only, keeps the process table current (the lifecycle ring is
small and read whole) and decodes them; its events go to ``LaunchSpec.lookout``,
where the rule engine's fast lane decides single-event alert and kill rules
without touching the run's state (see :meth:`spyglass.rules.fastlane.FastLane.peek`).

The records themselves are not consumed out of order: they join the in-order
merge (:class:`~spyglass.capture.ebpf.ring.KernelOrder`) and are decoded again,
in kernel order, by the session's decoder, so the stream, its order and
everything downstream are the same as without the look-ahead.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from spyglass.capture.ebpf.decoder import RecordDecoder
from spyglass.capture.ebpf.ring import Ring, record_ts
from spyglass.events.schema import Event
from spyglass.logs import get_logger

log = get_logger("spyglass.capture")

Hook = Callable[[Event], None]


class Lookout:
    """Reads ``rings`` (lifecycle, alert) ahead of the in-order merge; ``take`` hands their records on."""

    def __init__(self, rings: list[Ring], decoder: RecordDecoder, hook: Hook | None) -> None:
        self.rings = rings
        self.decoder = decoder
        self.hook = hook
        self._early: list[bytes] = []
        self.records = 0  # records read ahead
        self.errors = 0
        #: when the rings were last read (CLOCK_BOOTTIME ns, taken before reading): every record
        #: stamped more than the merge's hold before it was in them (:meth:`KernelOrder.read`)
        self.read_ns: int | None = None

    def start(self, ev: Event) -> None:
        """The root's ``process.start`` (made by the session, not read from a ring)."""
        self._call(ev)

    def look(self) -> None:
        """Read the rings now; decode their records and pass the events to the hook."""
        self.read_ns = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        got: list[bytes] = []
        for r in self.rings:
            got += r.read()
        if not got:
            return
        if len(got) > 1:
            got.sort(key=record_ts)
        self._early += got
        self.records += len(got)
        if self.hook is None:
            return
        for data in got:
            for ev in self.decoder.feed(data):
                self._call(ev)

    def _call(self, ev: Event) -> None:
        if self.hook is None:
            return
        try:
            self.hook(ev)
        except Exception:
            self.errors += 1
            if self.errors <= 3:
                log.exception("the fast lane's look-ahead failed on %s (the event goes on in order)", ev.type)

    def take(self) -> list[bytes]:
        """The records read ahead since the last call (for the in-order merge)."""
        out, self._early = self._early, []
        return out
