"""Partial matches of sequence rules and sliding-window counts."""

from __future__ import annotations

from spyglass.rules.state import MAX_PARTIALS, ProcRef, SequenceTracker, ThresholdCounter

NONE: frozenset[int] = frozenset()


def ref(pid: int, ppid: int | None = None, ancestors: frozenset[int] = NONE) -> ProcRef:
    return ProcRef(pid, ppid, ancestors)


def test_child_scope_follows_the_process_and_its_children() -> None:
    t = SequenceTracker([(1, False, False), (1, False, False)], "child", None)
    assert not t.waiting(1)
    t.feed(0, 1, 1, ref(10, 1), None, None)
    assert t.waiting(1)
    assert t.feed(1, 2, 2, ref(12, 99), None, None) is None  # not a child of 10
    done = t.feed(1, 3, 3, ref(11, 10), None, None)
    assert done is not None and done.seqs == [[1], [3]]
    assert not t.waiting(1)


def test_process_scope_needs_the_same_process() -> None:
    t = SequenceTracker([(1, False, False), (1, False, False)], "process", None)
    t.feed(0, 1, 1, ref(10), None, None)
    t.feed(0, 2, 2, ref(20), None, None)
    assert t.feed(1, 3, 3, ref(30), None, None) is None
    done = t.feed(1, 4, 4, ref(20), None, None)
    assert done is not None and done.seqs == [[2], [4]]
    assert t.waiting(1)  # 10 still waits


def test_lineage_scope_relates_ancestors_and_siblings() -> None:
    t = SequenceTracker([(1, False, False), (1, False, False)], "lineage", None)
    t.feed(0, 1, 1, ref(11, 10, frozenset({10, 1})), None, None)
    assert t.feed(1, 2, 2, ref(50, 40, frozenset({40, 1})), None, None) is None
    assert t.feed(1, 3, 3, ref(12, 10, frozenset({10, 1})), None, None) is not None  # a sibling


def test_keys_and_the_oldest_partial_first() -> None:
    t = SequenceTracker([(1, False, True), (2, True, True)], "run", None)
    for i, key in enumerate(["/a", "/b", "/c"], 1):
        t.feed(0, i, i, ref(1), key, None)
    assert t.feed(1, 10, 10, ref(1), "/b", "x") is None  # one of two
    assert t.feed(1, 11, 11, ref(1), "/b", "x") is None  # the same value does not count twice
    done = t.feed(1, 12, 12, ref(1), "/b", "y")
    assert done is not None and done.key == "/b" and done.seqs == [[2], [10, 12]]
    assert t.feed(1, 13, 13, ref(1), "/zzz", "x") is None


def test_the_cap_drops_the_oldest_and_keeps_the_index_right() -> None:
    t = SequenceTracker([(1, False, True), (1, False, True)], "run", None)
    for i in range(MAX_PARTIALS + 10):
        t.feed(0, i, i, ref(1), f"/f{i}", None)
    assert len(t.partials) == MAX_PARTIALS
    assert t.feed(1, 10_000, 10_000, ref(1), "/f3", None) is None  # evicted
    assert t.feed(1, 10_001, 10_001, ref(1), f"/f{MAX_PARTIALS}", None) is not None
    assert t.waiting(1)


def test_threshold_window_and_distinct_values() -> None:
    c = ThresholdCounter(3, 10, distinct=True)
    assert c.add("k", 0, 1, "a") is None
    assert c.add("k", 1, 2, "a") is None  # not distinct
    assert c.add("k", 2, 3, "b") is None
    assert c.add("k", 20, 4, "c") is None  # a and b fell out of the window
    assert c.add("k", 21, 5, "a") is None
    assert c.add("k", 22, 6, "b") == [4, 5, 6]
    assert c.add("k", 23, 7, "b") is None  # counting starts over
