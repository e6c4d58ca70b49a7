"""The analysis of stored runs: open runs by reference, profile them, compare them.

These are the functions the CLI and evaluation harnesses call; each takes run
references (id, unique prefix or ``latest``) or open :class:`RunReader` objects
and a store (a :class:`Store`, a path, or None for the default store).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from spyglass.analysis.coverage import SkillCoverage, coverage_run
from spyglass.analysis.diff import ProfileDiff, diff_profiles
from spyglass.analysis.normalize import NormalizeRules
from spyglass.analysis.profile import Profile, profile_run
from spyglass.analysis.similarity import compare
from spyglass.analysis.unexplained import DEFAULT_GRADING_PATHS, UnexplainedReport, unexplained
from spyglass.errors import UsageError
from spyglass.store import RunReader, Store

RunRef = str | RunReader
StoreRef = Store | str | Path | None


def _store(store: StoreRef) -> Store:
    return store if isinstance(store, Store) else Store(store)


def open_runs(refs: Iterable[RunRef], store: StoreRef = None) -> list[RunReader]:
    """Readers for run references, in order, without duplicates."""
    readers: list[RunReader] = []
    seen: set[str] = set()
    st: Store | None = None
    for ref in refs:
        if isinstance(ref, RunReader):
            r = ref
        else:
            st = st or _store(store)
            r = RunReader(st, st.resolve(ref))
        if r.id not in seen:
            seen.add(r.id)
            readers.append(r)
    return readers


def runs_of_task(task: str, store: StoreRef = None) -> list[RunReader]:
    """Every stored run labelled with ``task`` (oldest first)."""
    st = _store(store)
    rows = st.index.rows("WHERE task = ?", (task,))
    return [RunReader(st, r["id"]) for r in rows]


def labelled_runs(store: StoreRef = None) -> list[RunReader]:
    """Every stored run that has a task label."""
    st = _store(store)
    return [RunReader(st, r["id"]) for r in st.index.rows("WHERE task IS NOT NULL")]


def _profile_job(args: tuple[str, str, NormalizeRules | None, str | None]) -> Profile:
    root, run_id, rules, home = args
    st = Store(root, repair=False)
    try:
        return profile_run(RunReader(st, run_id), rules, home=home)
    finally:
        st.index.close()


def profile_runs(
    runs: Sequence[RunReader],
    rules: NormalizeRules | None = None,
    *,
    home: str | None = None,
    jobs: int = 1,
) -> list[Profile]:
    """Profiles of several stored runs; ``jobs`` > 1 spreads them over processes."""
    home = home if home is not None else os.path.expanduser("~")
    if jobs <= 1 or len(runs) < 2:
        return [profile_run(r, rules, home=home) for r in runs]
    from concurrent.futures import ProcessPoolExecutor

    args = [(str(r.store.root), r.id, rules, home) for r in runs]
    with ProcessPoolExecutor(max_workers=min(jobs, len(runs))) as pool:
        return list(pool.map(_profile_job, args))


def load_profile(run: RunRef, store: StoreRef = None, rules: NormalizeRules | None = None,
                 *, home: str | None = None) -> Profile:
    """The profile of one stored run."""
    (reader,) = open_runs([run], store)
    return profile_run(reader, rules, home=home if home is not None else os.path.expanduser("~"))


def compare_runs(
    runs: Iterable[RunRef],
    store: StoreRef = None,
    *,
    by_task: bool = False,
    rules: NormalizeRules | None = None,
    jobs: int = 1,
) -> dict[str, Any]:
    """Similarity matrix of the runs and, with ``by_task``, the separation of their tasks."""
    readers = open_runs(runs, store)
    if len(readers) < 2:
        raise UsageError("compare needs at least two runs")
    if by_task:
        unlabelled = [r.id for r in readers if not r.meta.task]
        if unlabelled:
            raise UsageError(
                f"{len(unlabelled)} run(s) have no task label: {', '.join(unlabelled[:3])}",
                hint="record runs with `run --task NAME`, or compare without --by task",
            )
    return compare(profile_runs(readers, rules, jobs=jobs), by_task=by_task)


def diff_runs(
    a: RunRef, b: RunRef, store: StoreRef = None, rules: NormalizeRules | None = None
) -> ProfileDiff:
    """Resources only in A, only in B, and weight changes."""
    ra, rb = (open_runs([x], store)[0] for x in (a, b))
    pa, pb = profile_runs([ra, rb], rules)
    return diff_profiles(pa, pb)


def coverage(
    run: RunRef,
    skill_dirs: Sequence[str] = (),
    store: StoreRef = None,
    rules: NormalizeRules | None = None,
) -> list[SkillCoverage]:
    """Skill coverage of a stored run (skills it recorded plus ``skill_dirs``)."""
    (reader,) = open_runs([run], store)
    return coverage_run(reader, skill_dirs, rules, home=os.path.expanduser("~"))


def unexplained_run(
    run: RunRef,
    baseline: Iterable[RunRef] | None = None,
    store: StoreRef = None,
    *,
    expected: Iterable[str] = (),
    grading_paths: Iterable[str] = DEFAULT_GRADING_PATHS,
    rules: NormalizeRules | None = None,
    jobs: int = 1,
) -> UnexplainedReport:
    """Unexplained activity of a run against a baseline (default: the other runs of its task)."""
    (reader,) = open_runs([run], store)
    expected = list(expected)
    if baseline is None:
        if not reader.meta.task:
            base: list[RunReader] = []
        else:
            base = [r for r in runs_of_task(reader.meta.task, reader.store) if r.id != reader.id]
    else:
        base = [r for r in open_runs(baseline, reader.store if store is None else store) if r.id != reader.id]
    if not base and not expected:
        raise UsageError(
            f"run {reader.id} has no baseline",
            hint="give baseline runs (--baseline REF), record other runs of its task, or expected patterns",
        )
    profiles = profile_runs([reader, *base], rules, jobs=jobs)
    return unexplained(profiles[0], profiles[1:], expected=expected, grading_paths=grading_paths)
