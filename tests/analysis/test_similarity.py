"""Weighted Jaccard per kind, set similarity, separation margins, diff."""

from __future__ import annotations

import pytest

from spyglass.analysis import (
    Profile,
    diff_profiles,
    separation,
    similarity,
    similarity_matrix,
    weighted_jaccard,
)
from spyglass.analysis.similarity import compare


def prof(run_id: str, task: str | None = None, **kinds: dict[tuple[str, str], int]) -> Profile:
    p = Profile(run_id=run_id, task=task)
    for kind, edges in kinds.items():
        for (name, op), n in edges.items():
            p.add(kind, name, op, n)
    return p


def test_weighted_jaccard_formula() -> None:
    # shares a: x .75, y .25; b: x .5, y .5 -> Σmin = .75, Σmax = 1.25
    assert weighted_jaccard({"x": 3, "y": 1}, {"x": 1, "y": 1}) == pytest.approx(0.6)
    assert weighted_jaccard({"x": 2}, {"x": 7}) == 1.0
    assert weighted_jaccard({"x": 1}, {"y": 1}) == 0.0
    assert weighted_jaccard({}, {"y": 1}) == 0.0
    assert weighted_jaccard({}, {}) is None
    # counts only matter as shares
    assert weighted_jaccard({"x": 30, "y": 10}, {"x": 5, "y": 5}) == pytest.approx(0.6)


def test_similarity_per_kind_and_combined() -> None:
    a = prof("a", file={("f", "read"): 3, ("g", "read"): 1}, command={("c", "exec"): 1})
    b = prof("b", file={("f", "read"): 1, ("g", "read"): 1}, command={("d", "exec"): 1})
    s = similarity(a, b)
    assert s.per_kind["file"] == pytest.approx(0.6)
    assert s.per_kind["command"] == 0.0
    assert s.per_kind["host"] is None  # neither touched a host: left out
    assert s.combined == pytest.approx(0.3)
    assert s.to_dict() == {"combined": 0.3, "command": 0.0, "file": 0.6, "host": None}


def test_op_is_part_of_the_resource() -> None:
    a = prof("a", file={("f", "read"): 1})
    b = prof("b", file={("f", "write"): 1})
    assert similarity(a, b).combined == 0.0


def test_empty_runs_are_alike() -> None:
    assert similarity(prof("a"), prof("b")).combined == 1.0


def test_matrix_and_set_similarity() -> None:
    ps = [
        prof("a", file={("x", "read"): 1}),
        prof("b", file={("x", "read"): 1}),
        prof("c", file={("x", "read"): 1, ("y", "read"): 1}),
    ]
    m = similarity_matrix(ps)
    assert m.value(0, 1) == 1.0
    assert m.value(0, 2) == pytest.approx(1 / 3)  # Σmin .5 / Σmax 1.5
    assert m.value(2, 2) == 1.0
    s = m.set_similarity([0, 1, 2])
    assert s["file"] == pytest.approx((1 + 1 / 3 + 1 / 3) / 3)
    assert s["combined"] == s["file"]
    assert s["host"] is None
    d = m.to_dict()
    assert d["runs"] == ["a", "b", "c"]
    assert d["combined"][0][2] == round(1 / 3, 4)
    assert d["host"][0][1] is None


def _task_profiles() -> list[Profile]:
    out = []
    for t, files in (("t1", ("a", "b")), ("t2", ("c", "d")), ("t3", ("a", "e"))):
        for r in range(3):
            edges = {(f, "read"): 1 for f in files}
            if r == 2:
                edges[("extra", "read")] = 1
            out.append(prof(f"{t}-{r}", t, file=edges))
    return out


def test_separation_margin_by_hand() -> None:
    sep = separation(similarity_matrix(_task_profiles()))
    assert [t.task for t in sep.tasks] == ["t1", "t2", "t3"]
    t1 = sep.tasks[0]
    # t1 runs: {a,b}, {a,b}, {a,b,extra}: pairs 1, then Σmin 2/3 / Σmax 4/3 = 1/2 twice
    assert t1.homogeneous["file"] == pytest.approx((1 + 0.5 + 0.5) / 3)
    assert t1.most_different == "t2"  # shares nothing with t1
    assert t1.nearest == "t3"  # shares "a"
    # one run replaced by a t2 run: the replacement is 0 to every t1 run (extra aside)
    assert t1.margin["combined"] is not None and t1.margin["combined"] > 0
    assert t1.margin_nearest["combined"] is not None
    assert 0 < t1.margin_nearest["combined"] < t1.margin["combined"]
    assert sep.fraction_positive == 1.0
    assert set(t1.run_cohesion) == {"t1-0", "t1-1", "t1-2"}
    assert t1.run_cohesion["t1-2"] < t1.run_cohesion["t1-0"]


def test_separation_heterogeneous_value() -> None:
    # two tasks, two runs each, identical within a task, disjoint across
    ps = [prof("a1", "a", file={("x", "read"): 1}), prof("a2", "a", file={("x", "read"): 1}),
          prof("b1", "b", file={("y", "read"): 1}), prof("b2", "b", file={("y", "read"): 1})]
    sep = separation(similarity_matrix(ps))
    ta = sep.tasks[0]
    assert ta.homogeneous["combined"] == 1.0
    assert ta.heterogeneous["combined"] == 0.0  # {a_i, b_j}: a single pair, similarity 0
    assert ta.margin["combined"] == 1.0


def test_singleton_tasks_are_reported() -> None:
    ps = [*_task_profiles()[:3], prof("solo", "t9", file={("z", "read"): 1})]
    sep = separation(similarity_matrix(ps))
    assert sep.singletons == ["t9"]
    assert [t.task for t in sep.tasks] == ["t1"]
    assert sep.tasks[0].most_different == "t9"


def test_compare_output() -> None:
    out = compare(_task_profiles(), by_task=True)
    assert set(out) == {"matrix", "set_similarity", "separation"}
    assert out["separation"]["fraction_positive"] == 1.0
    assert set(out["separation"]["tasks"][0]["margin"]) == {"combined", "command", "file", "host"}


def test_diff() -> None:
    a = prof("A", file={("f", "read"): 2, ("g", "read"): 1}, host={("h:443", "connect"): 1})
    b = prof("B", file={("f", "read"): 5, ("k", "write"): 1}, host={("h:443", "connect"): 1})
    d = diff_profiles(a, b)
    assert not d.identical
    fd = d.kinds["file"]
    assert [(e.name, e.op, e.count) for e in fd.only_a] == [("g", "read", 1)]
    assert [(e.name, e.op, e.count) for e in fd.only_b] == [("k", "write", 1)]
    assert [(c.name, c.count_a, c.count_b, c.delta) for c in fd.changed] == [("f", 2, 5, 3)]
    assert not d.kinds["host"] and d.kinds["host"].same == 1
    j = d.to_dict()
    assert j["file"]["changed"][0]["delta"] == 3
    assert diff_profiles(a, a).identical
