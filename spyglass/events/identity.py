"""What an event means beyond its own fields: the process it belongs to, and whether it is noise.

* ``process.entity_id``: a key for a process that stays unique when the
  kernel reuses its pid.  A process is born at its ``process.start`` (or,
  for the run's first process, at its first event); the key hashes the run
  id, the pid and the event number of that birth, so the same run always
  gives the same keys.
* A failed probe: a ``file.read`` (an open) that failed because the file is
  not there (``ENOENT``, ``ENOTDIR``): a dynamic loader, an interpreter or a
  shell trying paths.  It is recorded (``ok: false``) and folded by default
  in ``spyglass events``, ``show`` and the report.
"""

from __future__ import annotations

import hashlib

from spyglass.events.schema import Event

PROBE_ERRNOS = frozenset({"ENOENT", "ENOTDIR"})


def is_failed_probe(ev: Event) -> bool:
    return not ev.ok and ev.type == "file.read" and ev.errno in PROBE_ERRNOS


class EntityIds:
    """Feed events in order; :meth:`of` gives the entity id of an event's process."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.current: dict[int, str] = {}

    def _new(self, pid: int, seq: int) -> str:
        key = hashlib.sha256(f"{self.run_id}\0{pid}\0{seq}".encode()).hexdigest()[:16]
        self.current[pid] = key
        return key

    def of(self, ev: Event) -> str:
        if ev.type == "process.start":
            return self._new(ev.pid, ev.seq)
        key = self.current.get(ev.pid)
        return key if key is not None else self._new(ev.pid, ev.seq)
