"""How alike runs are: weighted Jaccard per resource kind, set similarity, separation margin.

For one kind T (command, file, host) and two profiles a, b, with p(r) the share
of the kind's accesses that went to edge r::

    sim_T(a, b) = Σ_r min(p_a(r), p_b(r)) / Σ_r max(p_a(r), p_b(r))

Because the shares of each run sum to 1, Σ max = 2 − Σ min, so only the edges
both runs have need visiting.  A kind neither run touched says nothing and is
left out (None); a kind only one of them touched scores 0.  The combined
similarity is the mean over the kinds that are defined (1.0 if none is).

The similarity of a set of runs is, per kind, the mean pairwise similarity; the
combined set similarity is the mean of those over the kinds.  For runs labelled
by task, the homogeneous similarity of a task is the set similarity of its
runs; the heterogeneous similarity replaces one of them by a run of another
task (averaged over every choice of the run replaced and the replacement); the
separation margin is homogeneous minus heterogeneous, against the most
different other task (``margin``, as the published measure) and, as a stricter
check, against the nearest one (``margin_nearest``).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from spyglass.analysis.profile import KINDS, Profile

K = TypeVar("K", bound=Hashable)


def weighted_jaccard(a: Mapping[K, float], b: Mapping[K, float]) -> float | None:
    """Weighted Jaccard of two weight maps (counts or shares; they are turned into shares)."""
    ta = sum(a.values())
    tb = sum(b.values())
    if ta <= 0 and tb <= 0:
        return None
    if ta <= 0 or tb <= 0:
        return 0.0
    return _jaccard_of_shares({k: v / ta for k, v in a.items()}, {k: v / tb for k, v in b.items()})


def _jaccard_of_shares(pa: Mapping[K, float], pb: Mapping[K, float]) -> float:
    if len(pa) > len(pb):
        pa, pb = pb, pa
    s_min = 0.0
    get = pb.get
    for k, va in pa.items():
        vb = get(k)
        if vb is not None:
            s_min += va if va < vb else vb
    s_max = 2.0 - s_min
    return min(1.0, s_min / s_max) if s_max > 0 else 1.0


class Similarity(msgspec.Struct, frozen=True):
    """Per-kind similarities (None where neither run touched the kind) and their mean."""

    per_kind: dict[str, float | None]
    combined: float

    def to_dict(self) -> dict[str, Any]:
        return {"combined": _r(self.combined), **{k: _r(v) for k, v in self.per_kind.items()}}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _mean(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


class _Shares:
    __slots__ = ("by_kind",)

    def __init__(self, p: Profile) -> None:
        self.by_kind = {k: p.shares(k) for k in KINDS}


def _pair(a: _Shares, b: _Shares) -> Similarity:
    per: dict[str, float | None] = {}
    for k in KINDS:
        pa, pb = a.by_kind[k], b.by_kind[k]
        if not pa and not pb:
            per[k] = None
        elif not pa or not pb:
            per[k] = 0.0
        else:
            per[k] = _jaccard_of_shares(pa, pb)
    comb = _mean(list(per.values()))
    return Similarity(per, 1.0 if comb is None else comb)


def similarity(a: Profile, b: Profile) -> Similarity:
    """Similarity of two runs, per kind and combined."""
    return _pair(_Shares(a), _Shares(b))


class SimilarityMatrix(msgspec.Struct):
    """Pairwise similarities of a list of profiles (symmetric; diagonal 1)."""

    runs: list[str]
    tasks: list[str | None]
    pairs: dict[tuple[int, int], Similarity] = msgspec.field(default_factory=dict)  # i < j

    def get(self, i: int, j: int) -> Similarity:
        if i == j:
            return Similarity(dict.fromkeys(KINDS, 1.0), 1.0)
        return self.pairs[(i, j) if i < j else (j, i)]

    def value(self, i: int, j: int, kind: str = "combined") -> float | None:
        s = self.get(i, j)
        return s.combined if kind == "combined" else s.per_kind[kind]

    def set_similarity(self, members: Sequence[int]) -> dict[str, float | None]:
        """Mean pairwise similarity of a set, per kind, and ``combined`` (mean over kinds)."""
        if len(members) < 2:
            return {"combined": None, **dict.fromkeys(KINDS)}
        pairs = list(itertools.combinations(members, 2))
        per = {k: _mean([self.get(i, j).per_kind[k] for i, j in pairs]) for k in KINDS}
        comb = _mean(list(per.values()))
        return {"combined": 1.0 if comb is None else comb, **per}

    def to_dict(self) -> dict[str, Any]:
        n = len(self.runs)
        out: dict[str, Any] = {"runs": self.runs, "tasks": self.tasks}
        for kind in ("combined", *KINDS):
            out[kind] = [[_r(self.value(i, j, kind)) for j in range(n)] for i in range(n)]
        return out


def similarity_matrix(profiles: Sequence[Profile]) -> SimilarityMatrix:
    shares = [_Shares(p) for p in profiles]
    m = SimilarityMatrix([p.run_id for p in profiles], [p.task for p in profiles])
    for i, j in itertools.combinations(range(len(profiles)), 2):
        m.pairs[(i, j)] = _pair(shares[i], shares[j])
    return m


# -- separation ------------------------------------------------------------------------------------


class TaskSeparation(msgspec.Struct):
    task: str
    runs: list[str]
    homogeneous: dict[str, float | None]
    heterogeneous: dict[str, float | None]
    margin: dict[str, float | None]
    most_different: str | None
    heterogeneous_nearest: dict[str, float | None]
    margin_nearest: dict[str, float | None]
    nearest: str | None
    #: each run's mean combined similarity to the other runs of its task
    run_cohesion: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        def rd(d: Mapping[str, float | None]) -> dict[str, float | None]:
            return {k: _r(v) for k, v in d.items()}

        return {
            "task": self.task,
            "runs": self.runs,
            "homogeneous": rd(self.homogeneous),
            "heterogeneous": rd(self.heterogeneous),
            "margin": rd(self.margin),
            "most_different_task": self.most_different,
            "heterogeneous_nearest": rd(self.heterogeneous_nearest),
            "margin_nearest": rd(self.margin_nearest),
            "nearest_task": self.nearest,
            "run_cohesion": {k: _r(v) for k, v in self.run_cohesion.items()},
        }


class Separation(msgspec.Struct):
    tasks: list[TaskSeparation]
    #: tasks with a single run (no homogeneous set), still used as replacements
    singletons: list[str]

    @property
    def fraction_positive(self) -> float | None:
        ms = [t.margin["combined"] for t in self.tasks if t.margin["combined"] is not None]
        return sum(1 for m in ms if m > 0) / len(ms) if ms else None

    @property
    def fraction_positive_nearest(self) -> float | None:
        ms = [t.margin_nearest["combined"] for t in self.tasks if t.margin_nearest["combined"] is not None]
        return sum(1 for m in ms if m > 0) / len(ms) if ms else None

    def mean_margin(self, kind: str = "combined", nearest: bool = False) -> float | None:
        return _mean([(t.margin_nearest if nearest else t.margin)[kind] for t in self.tasks])

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": [t.to_dict() for t in self.tasks],
            "singleton_tasks": self.singletons,
            "fraction_positive": _r(self.fraction_positive),
            "fraction_positive_nearest": _r(self.fraction_positive_nearest),
            "mean_margin": {k: _r(self.mean_margin(k)) for k in ("combined", *KINDS)},
            "mean_margin_nearest": {k: _r(self.mean_margin(k, True)) for k in ("combined", *KINDS)},
        }


def _diff(a: Mapping[str, float | None], b: Mapping[str, float | None]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for k, va in a.items():
        vb = b.get(k)
        out[k] = None if va is None or vb is None else va - vb
    return out


def _replaced(m: SimilarityMatrix, own: Sequence[int], other: Sequence[int]) -> dict[str, float | None]:
    """Mean set similarity of ``own`` with one run replaced by one of ``other``, over all choices."""
    sets = [[x for x in own if x != i] + [j] for i in own for j in other]
    vals = [m.set_similarity(s) for s in sets]
    return {k: _mean([v[k] for v in vals]) for k in ("combined", *KINDS)}


def separation(matrix: SimilarityMatrix, labels: Sequence[str | None] | None = None) -> Separation:
    """Homogeneous vs heterogeneous similarity per task (labels default to the profiles' tasks)."""
    labels = list(labels) if labels is not None else list(matrix.tasks)
    groups: dict[str, list[int]] = {}
    for i, lab in enumerate(labels):
        if lab is not None:
            groups.setdefault(lab, []).append(i)
    result: list[TaskSeparation] = []
    singletons = sorted(t for t, idx in groups.items() if len(idx) < 2)
    for task in sorted(groups):
        own = groups[task]
        if len(own) < 2:
            continue
        homo = matrix.set_similarity(own)
        others = {u: idx for u, idx in groups.items() if u != task}
        cohesion = {
            matrix.runs[i]: sum(matrix.value(i, j) or 0.0 for j in own if j != i) / (len(own) - 1)
            for i in own
        }
        if not others:
            empty: dict[str, float | None] = {"combined": None, **dict.fromkeys(KINDS)}
            result.append(TaskSeparation(task, [matrix.runs[i] for i in own], homo, empty, empty, None,
                                         empty, empty, None, cohesion))
            continue
        cross = {
            u: sum(matrix.value(i, j) or 0.0 for i in own for j in idx) / (len(own) * len(idx))
            for u, idx in others.items()
        }
        far = min(sorted(cross), key=lambda u: cross[u])
        near = max(sorted(cross), key=lambda u: cross[u])
        het = _replaced(matrix, own, others[far])
        het_near = het if near == far else _replaced(matrix, own, others[near])
        result.append(
            TaskSeparation(
                task=task,
                runs=[matrix.runs[i] for i in own],
                homogeneous=homo,
                heterogeneous=het,
                margin=_diff(homo, het),
                most_different=far,
                heterogeneous_nearest=het_near,
                margin_nearest=_diff(homo, het_near),
                nearest=near,
                run_cohesion=cohesion,
            )
        )
    return Separation(result, singletons)


def compare(profiles: Sequence[Profile], by_task: bool = False) -> dict[str, Any]:
    """Everything ``spyglass compare`` prints, as a JSON-ready dict."""
    m = similarity_matrix(profiles)
    out: dict[str, Any] = {
        "matrix": m.to_dict(),
        "set_similarity": {k: _r(v) for k, v in m.set_similarity(range(len(profiles))).items()},
    }
    if by_task:
        out["separation"] = separation(m).to_dict()
    return out
