"""Compact per-process records of agent awareness: memory that stays small over millions of events.

:class:`PidStats` keeps each process's first and last event number and its
event count in flat arrays; :func:`compact` keeps of a process event only
what linking tool calls reads again at the end of the run (command lines
that repeat are stored once), and :func:`expand` makes the event back.
"""

from __future__ import annotations

from array import array

from spyglass.events.schema import Event


class PidStats:
    """pid -> (first seq, last seq, events), in two flat arrays: a few dozen bytes per process."""

    __slots__ = ("_at", "_counts", "_seqs")

    def __init__(self) -> None:
        self._at: dict[int, int] = {}
        self._seqs = array("q")  # first, last of each pid, side by side
        self._counts = array("q")

    def note(self, pid: int, seq: int) -> None:
        i = self._at.get(pid)
        if i is None:
            self._at[pid] = len(self._counts)
            self._seqs.append(seq)
            self._seqs.append(seq)
            self._counts.append(1)
        else:
            self._seqs[2 * i + 1] = seq
            self._counts[i] += 1

    def get(self, pid: int) -> tuple[int, int, int] | None:
        i = self._at.get(pid)
        if i is None:
            return None
        return self._seqs[2 * i], self._seqs[2 * i + 1], self._counts[i]


#: a process event as agent awareness keeps it to link tool calls again at the end:
#: (type, pid, seq, ppid or exit code, exe or signal, argv joined by NUL)
Compact = tuple[str, int, int, int | None, str | None, str | None]


def compact(ev: Event, strings: dict[str, str]) -> Compact | None:
    """The few fields of a process event that linking reads; repeated command lines shared."""
    t = ev.type
    if t == "process.start":
        return (t, ev.pid, ev.seq, ev.ppid, None, None)
    if t == "process.exec" and ev.ok:
        argv = "\0".join(ev.argv) if ev.argv is not None else None
        if argv is not None:
            argv = strings.setdefault(argv, argv)
        exe = strings.setdefault(ev.exe, ev.exe) if ev.exe is not None else None
        return (t, ev.pid, ev.seq, None, exe, argv)
    if t == "process.exit":
        return (t, ev.pid, ev.seq, ev.exit_code, ev.signal, None)
    return None


def expand(c: Compact) -> Event:
    t, pid, seq, num, text, argv = c
    if t == "process.start":
        return Event(type=t, pid=pid, seq=seq, ppid=num)
    if t == "process.exec":
        return Event(type=t, pid=pid, seq=seq, exe=text, argv=argv.split("\0") if argv is not None else None)
    return Event(type=t, pid=pid, seq=seq, exit_code=num, signal=text)
