"""Records the kernel program could not put in its rings, told as an event that a rule alerts on.

A full ring makes the program drop a record and count it (the ``lost`` map, per CPU and
category); it never waits for the reader.  A flood of system calls, or a reader kept from
running, can so hide the one call that matters, and a count in ``run.json`` alone (``capture.lost``)
is easy to miss: the run still ends ``complete``, since every record that was made is in an
intact chain (the store's status says what became of the recording, not how much the kernel
dropped).  So the reader looks at the counters once a second and, the first time they are not
zero, emits a ``sys.sensitive`` event whose detail starts ``capture-lost:``; at the end of the
run one more says how many were lost after it.  The ``evasion-capture-lost`` rule (high) turns
each into an alert: it is in ``alerts``, fails ``--fail-on high``, ``check --fail-on high`` and
the default gate, besides ``gate``'s ``evidence-verified``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from spyglass.events.schema import Event

INTERVAL = 1.0
#: the detail's first word (spyglass/rules/pack/evasion.yaml, evasion-capture-lost)
PREFIX = "capture-lost:"

#: ``read() -> (records lost so far, ["file 12", ...])``
Counters = Callable[[], "tuple[int, list[str]]"]


def lost_detail(new: int, total: int, kinds: list[str], *, final: bool) -> str:
    """``capture-lost: 12 record(s) ...``: what was lost, in which categories."""
    what = ", ".join(kinds) or "kinds unknown"
    if final and new != total:
        return (f"{PREFIX} {new} more record(s) lost by the end of the run, {total} in all ({what}): "
                "the calls they stood for are not recorded")
    return (f"{PREFIX} {total} record(s) the kernel could not put in its full rings ({what}): the calls they "
            "stood for are not recorded (a flood of system calls, or the reader kept from running)")


class LossWatch:
    """The ``lost`` counters, looked at by the reader thread (:meth:`check`) and at the end (:meth:`final`)."""

    def __init__(self, read: Counters, pid: int, interval: float = INTERVAL) -> None:
        self.read = read
        self.pid = pid  # the run's root: the events name it
        self.interval = interval
        self.told = 0  # records lost that an event has told of
        self._next = time.monotonic() + interval

    def check(self) -> list[Event]:
        """At most once per ``interval``, until the first loss is told: its event, else nothing."""
        if self.told:
            return []
        now = time.monotonic()
        if now < self._next:
            return []
        self._next = now + self.interval
        try:
            total, kinds = self.read()
        except Exception:  # counters that cannot be read now are read again at the end
            return []
        return self._tell(total, kinds, final=False)

    def final(self, total: int, kinds: list[str]) -> list[Event]:
        """At the end of the run, with the final counts: the losses no event has told of yet."""
        return self._tell(total, kinds, final=True)

    def _tell(self, total: int, kinds: list[str], *, final: bool) -> list[Event]:
        if total <= self.told:
            return []
        detail = lost_detail(total - self.told, total, kinds, final=final and self.told > 0)
        self.told = total
        return [Event(type="sys.sensitive", ts=time.time_ns(), pid=self.pid, detail=detail)]
