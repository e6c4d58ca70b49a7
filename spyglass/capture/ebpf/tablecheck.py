"""Defence in depth for the eBPF process table: a followed process must stay in ``tracked``.

The program follows a process only while its thread-group id is in the
``tracked`` map.  A root agent that deletes itself from that map
(``bpftool map delete``, after ``BPF_MAP_GET_FD_BY_ID``: the
``evasion-bpf-object-grab`` rule) would run on unrecorded.  The reader thread
calls :meth:`TableCheck.check` after each drain; twice a second it compares
the processes the decoder knows to be alive with the map.  A process that is
still running and missing from the map at two checks in a row (an exiting
process leaves the map at its exit tracepoint, a moment before it is a
zombie, so one miss is not enough) is put back and reported as a
``sys.sensitive`` event whose detail starts ``monitor-untracked:``
(``evasion-monitor-lost``, critical).  What the process did between the
deletion and the check, and children it forked meanwhile, are not recorded.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterable

from spyglass.capture.ebpf.libbpf import LibbpfError, map_keys, map_update
from spyglass.events.schema import Event

INTERVAL = 0.5
_U32 = struct.Struct("<I")


class TableCheck:
    def __init__(self, map_fd: int, live: Callable[[], Iterable[int]], running: Callable[[int], bool],
                 notes: list[str], interval: float = INTERVAL) -> None:
        self.map_fd = map_fd
        self.live = live  # pids the decoder saw born (or the root) and not yet exit
        self.running = running  # the pid is a running process (not a zombie)
        self.notes = notes
        self.interval = interval
        self._next = time.monotonic() + interval
        self._missing: set[int] = set()
        self.restored: list[int] = []

    def check(self) -> list[Event]:
        now = time.monotonic()
        if now < self._next:
            return []
        self._next = now + self.interval
        try:
            in_map = {_U32.unpack(k)[0] for k in map_keys(self.map_fd, 4)}
        except (LibbpfError, OSError):
            return []
        out: list[Event] = []
        missing: set[int] = set()
        for pid in self.live():
            if pid in in_map or not self.running(pid):
                continue
            if pid not in self._missing:
                missing.add(pid)  # maybe exiting: judged at the next check
                continue
            try:
                map_update(self.map_fd, _U32.pack(pid), b"\1")
            except (LibbpfError, OSError) as exc:
                detail = (f"monitor-untracked: pid {pid} was removed from the eBPF process table and could not "
                          f"be put back ({exc}): it runs unrecorded")
            else:
                self.restored.append(pid)
                detail = (f"monitor-untracked: pid {pid} was removed from the eBPF process table while it ran "
                          "(a map edited from outside: bpftool map delete?); put back, what it did meanwhile "
                          "is not recorded")
            self.notes.append(detail)
            out.append(Event(type="sys.sensitive", ts=time.time_ns(), pid=pid, detail=detail))
        self._missing = missing
        return out


def argv_of(pid: int) -> list[str] | None:
    """The command line of a live process (None: gone, or a kernel thread)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return [a.decode("utf-8", "surrogateescape") for a in data.rstrip(b"\0").split(b"\0")] if data else None
