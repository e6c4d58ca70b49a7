"""The Python API over a store: selecting runs, comparing, baselines."""

from __future__ import annotations

from pathlib import Path

import pytest

from spyglass import analysis
from spyglass.capture.replay import ReplayBackend
from spyglass.errors import UsageError
from spyglass.events import Event
from spyglass.session.record import RunRequest, record
from spyglass.store import Store


def _run(store: Store, ws: Path, task: str | None, files: list[str]) -> str:
    ws.mkdir(exist_ok=True)
    evs = [Event(type="file.read", pid=5, path=f"{ws}/{f}") for f in files]
    return record(RunRequest(argv=["x"], cwd=str(ws), task=task), ReplayBackend(evs), store).meta.id


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store", create=True)


def test_runs_of_task_and_compare(store: Store, tmp_path: Path) -> None:
    a = _run(store, tmp_path / "a", "t", ["x", "y"])
    b = _run(store, tmp_path / "b", "t", ["x", "y"])
    c = _run(store, tmp_path / "c", "u", ["z"])
    assert [r.id for r in analysis.runs_of_task("t", store)] == [a, b]
    assert {r.id for r in analysis.labelled_runs(store)} == {a, b, c}
    out = analysis.compare_runs([a, b, c, a], store)  # duplicates are dropped
    assert out["matrix"]["runs"] == [a, b, c]
    assert out["matrix"]["file"][0][1] == 1.0 and out["matrix"]["file"][0][2] == 0.0
    with pytest.raises(UsageError):
        analysis.compare_runs([a], store)


def test_profile_runs_in_processes(store: Store, tmp_path: Path) -> None:
    ids = [_run(store, tmp_path / f"w{i}", "t", ["f", f"g{i}"]) for i in range(3)]
    readers = analysis.open_runs(ids, store)
    serial = analysis.profile_runs(readers)
    parallel = analysis.profile_runs(readers, jobs=2)
    assert [p.edges for p in serial] == [p.edges for p in parallel]
    assert [p.run_id for p in parallel] == ids


def test_unexplained_run_baselines(store: Store, tmp_path: Path) -> None:
    a = _run(store, tmp_path / "a", "t", ["x"])
    b = _run(store, tmp_path / "b", "t", ["x", "secret"])
    other = _run(store, tmp_path / "o", None, ["x", "secret"])
    rep = analysis.unexplained_run(b, store=store)  # default: the other runs of task t
    assert rep.baseline == [a]
    assert [i.name for i in rep.items] == ["<WS>/secret"]
    assert analysis.unexplained_run(b, [other], store).items == []
    assert analysis.unexplained_run(other, store=store, expected=["<WS>/**"]).items == []
    with pytest.raises(UsageError, match="no baseline"):
        analysis.unexplained_run(other, store=store)


def test_diff_runs(store: Store, tmp_path: Path) -> None:
    a = _run(store, tmp_path / "a", "t", ["x"])
    b = _run(store, tmp_path / "b", "t", ["x", "x"])
    d = analysis.diff_runs(a, b, store)
    assert [(c.name, c.count_a, c.count_b) for c in d.kinds["file"].changed] == [("<WS>/x", 1, 2)]
