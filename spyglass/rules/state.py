"""Bounded per-rule state for threshold and sequence rules.

Windows are measured in event time (``ts``), never the wall clock, so a
replay gives the same answers.  Every structure is capped; when a cap is
reached the oldest entries go first (deterministically).
"""

from __future__ import annotations

import bisect
from collections import deque

import msgspec

MAX_KEYS = 4096
MAX_PARTIALS = 256
MAX_SEQS = 10
MAX_DISTINCT = 10_000


class ProcRef(msgspec.Struct):
    """A process as a sequence step saw it: pid, parent and ancestors."""

    pid: int
    ppid: int | None
    ancestors: frozenset[int]


def related(a: ProcRef, b: ProcRef) -> bool:
    """Same lineage: the same process, one an ancestor of the other, or siblings."""
    return (
        a.pid == b.pid
        or a.pid in b.ancestors
        or b.pid in a.ancestors
        or (a.ppid is not None and a.ppid == b.ppid)
    )


class _Window:
    __slots__ = ("counts", "q")

    def __init__(self) -> None:
        self.q: deque[tuple[int, int, object]] = deque()
        self.counts: dict[object, int] = {}

    def popleft(self, distinct: bool) -> None:
        _, _, v = self.q.popleft()
        if distinct:
            n = self.counts[v] - 1
            if n:
                self.counts[v] = n
            else:
                del self.counts[v]


class ThresholdCounter:
    """Sliding-window counts per key; ``add`` returns the seqs when the count is reached.

    With ``distinct``, an event whose value is already in the window does not count.
    Values must be hashable (the engine passes lists as tuples).
    """

    def __init__(self, count: int, within_ns: int, distinct: bool) -> None:
        self.count = count
        self.within = within_ns
        self.distinct = distinct
        self.keys: dict[object, _Window] = {}

    def add(self, key: object, ts: int, seq: int, value: object = None) -> list[int] | None:
        w = self.keys.get(key)
        if w is None:
            if len(self.keys) >= MAX_KEYS:
                del self.keys[next(iter(self.keys))]
            w = self.keys[key] = _Window()
        q = w.q
        low = ts - self.within
        while q and q[0][0] < low:
            w.popleft(self.distinct)
        if self.distinct:
            if value in w.counts:
                return None
            w.counts[value] = w.counts.get(value, 0) + 1
        q.append((ts, seq, value))
        if len(q) > MAX_DISTINCT:
            w.popleft(self.distinct)
        if len(q) >= self.count:
            seqs = [s for _, s, _ in q]
            del self.keys[key]
            return seqs
        return None


class Partial(msgspec.Struct, eq=False):
    """A sequence rule matched up to ``step``: what it matched so far."""

    uid: int  # creation order
    step: int
    start_ts: int
    procs: list[ProcRef]
    key: str | None = None
    count: int = 0
    seen: set[object] = set()
    seqs: list[list[int]] = []

    def relates(self, ref: ProcRef) -> bool:
        return any(related(p, ref) for p in self.procs)

    def add_proc(self, ref: ProcRef) -> None:
        if all(p.pid != ref.pid for p in self.procs) and len(self.procs) < 16:
            self.procs.append(ref)

    def add_seq(self, step: int, seq: int) -> None:
        while len(self.seqs) <= step:
            self.seqs.append([])
        if len(self.seqs[step]) < MAX_SEQS:
            self.seqs[step].append(seq)


def _insort(items: list[Partial], p: Partial) -> None:
    if not items or items[-1].uid < p.uid:
        items.append(p)
    else:
        bisect.insort(items, p, key=_uid)


def _uid(p: Partial) -> int:
    return p.uid


class SequenceTracker:
    """Partial matches of one sequence rule.

    An event that matched step ``s`` advances the oldest partial match that
    waits at ``s`` and fits it (same scope, same key).  Partial matches are
    indexed by step and by what decides the fit (the key for ``by: run``, the
    first process for ``process`` and ``child``), so finding it does not scan
    them all.  While no partial match waits at a step ``s > 0``
    (``waiting(s)`` is false), an event matching only that step changes
    nothing, so the engine does not test it.
    """

    def __init__(self, steps: list[tuple[int, bool, bool]], by: str, within_ns: int | None) -> None:
        #: per step: (count needed, has distinct field, has key field)
        self.steps = steps
        self.by = by
        self.within = within_ns
        self.partials: list[Partial] = []  # in creation order
        self._uid = 0
        self._oldest: int | None = None  # no partial match started before this ts
        self._reindex()

    def waiting(self, step: int) -> bool:
        return bool(self._at[step])

    # -- indexes -------------------------------------------------------------------
    def _ikey(self, p: Partial) -> object:
        return p.procs[0].pid if self.by in ("process", "child") else p.key

    def _index(self, p: Partial) -> None:
        _insort(self._at[p.step], p)
        _insort(self._idx[p.step].setdefault(self._ikey(p), []), p)

    def _unindex(self, p: Partial) -> None:
        self._at[p.step].remove(p)
        k = self._ikey(p)
        same = self._idx[p.step][k]
        same.remove(p)
        if not same:
            del self._idx[p.step][k]

    def _reindex(self) -> None:
        n = len(self.steps) + 1
        self._at: list[list[Partial]] = [[] for _ in range(n)]
        self._idx: list[dict[object, list[Partial]]] = [{} for _ in range(n)]
        for p in self.partials:
            self._index(p)
        self._oldest = min((p.start_ts for p in self.partials), default=None)

    # -- matching ------------------------------------------------------------------
    def _fits(self, p: Partial, ref: ProcRef, key: str | None) -> bool:
        by = self.by
        if by == "process" and all(x.pid != ref.pid for x in p.procs):
            return False
        if by == "lineage" and not p.relates(ref):
            return False
        if by == "child" and p.procs[0].pid not in (ref.pid, ref.ppid):
            return False
        return not (key is not None and p.key is not None and p.key != key)

    def _first_fit(self, step: int, ref: ProcRef, key: str | None) -> Partial | None:
        """The oldest partial match waiting at ``step`` that this event fits."""
        by = self.by
        if by == "lineage":
            for p in self._at[step]:
                if self._fits(p, ref, key):
                    return p
            return None
        idx = self._idx[step]
        if by == "run":
            if key is None:
                waiting = self._at[step]
                return waiting[0] if waiting else None
            groups = [idx.get(key), idx.get(None)]
        else:
            groups = [idx.get(ref.pid)]
            if by == "child" and ref.ppid is not None and ref.ppid != ref.pid:
                groups.append(idx.get(ref.ppid))
        best: Partial | None = None
        for items in groups:
            for p in items or ():
                if key is None or p.key is None or p.key == key:
                    if best is None or p.uid < best.uid:
                        best = p
                    break
        return best

    def _expire(self, ts: int) -> None:
        """Drop partial matches that started longer than ``within`` before ``ts``."""
        if self.within is None or self._oldest is None:
            return
        low = ts - self.within
        if self._oldest >= low:
            return
        self.partials = [p for p in self.partials if p.start_ts >= low]
        self._reindex()

    def feed(self, step: int, ts: int, seq: int, ref: ProcRef, key: str | None, value: object) -> Partial | None:
        """One event matched ``step``; returns the partial if it completed the sequence."""
        self._expire(ts)
        need, has_distinct, _ = self.steps[step]
        p = self._first_fit(step, ref, key)
        if p is not None:
            if has_distinct:
                if value in p.seen:
                    return None
                if len(p.seen) < MAX_DISTINCT:
                    p.seen.add(value)
            if step == 0 and need == 1:
                # a repeat of the first step refreshes the window of a waiting match
                p.start_ts = ts
                p.add_seq(0, seq)
                return None
            p.count += 1
            p.add_seq(step, seq)
            p.add_proc(ref)
            set_key = key is not None and p.key is None
            if set_key or p.count >= need:
                self._unindex(p)
                if set_key:
                    p.key = key
                if p.count >= need:
                    p.step += 1
                    p.count = 0
                    p.seen = set()
                    if p.step == len(self.steps):
                        self.partials = [
                            q for q in self.partials
                            if q is not p and not (q.step == step and self._fits(q, ref, key))
                        ]
                        self._reindex()
                        return p
                self._index(p)
            return None
        if step == 0:
            if need == 1:
                # a waiting match at a later step already covers this one
                q = self._first_fit(1, ref, key)
                if q is not None:
                    q.start_ts = ts
                    q.add_seq(0, seq)
                    return None
            self._uid += 1
            p = Partial(uid=self._uid, step=0, start_ts=ts, procs=[ref], key=key)
            if has_distinct:
                p.seen.add(value)
            p.count = 1
            p.add_seq(0, seq)
            if p.count >= need:
                p.step, p.count, p.seen = 1, 0, set()
            if len(self.partials) >= MAX_PARTIALS:
                self._unindex(self.partials.pop(0))
            self.partials.append(p)
            self._index(p)
            if self._oldest is None or ts < self._oldest:
                self._oldest = ts
        return None
