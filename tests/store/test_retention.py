"""Retention: `spyglass prune` keeps a store within limits and the index consistent.

Runs are recorded for real (`spyglass run` of short commands under strace),
then aged by rewriting their start time in run.json and the index, since a
test cannot wait thirty days.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from spyglass.store import Store
from spyglass.store.retention import Limits, RunEntry, plan
from spyglass.units import parse_age, parse_size

DAY = 86400 * 1_000_000_000


def _entry(i: int, *, task: str | None = "t", level: str | None = None, size: int = 100,
           age_days: float = 0, status: str = "complete", now: int = 1_000 * DAY) -> RunEntry:
    return RunEntry(id=f"2026{i:04d}", task=task, status=status, started=int(now - age_days * DAY),
                    max_level=level, size=size)


def test_units() -> None:
    assert parse_size("500M") == 500 * 1024**2
    assert parse_size("2 GiB") == 2 * 1024**3
    assert parse_size(1234) == 1234
    assert parse_age("30d") == 30 * 86400
    assert parse_age("12h") == 12 * 3600
    assert parse_age("90") == 90
    for bad in ("lots", "5X", ""):
        with pytest.raises(ValueError):
            parse_size(bad)
    for bad in ("forever", "3y", "d"):
        with pytest.raises(ValueError):
            parse_age(bad)


def test_plan_age_task_and_size_oldest_first() -> None:
    now = 1_000 * DAY
    runs = [_entry(i, age_days=10 - i, size=100) for i in range(10)]  # 0 is the oldest
    p = plan(runs, Limits(max_age=5 * 86400), now_ns=now)
    assert [d.run.id for d in p.delete] == [r.id for r in runs[:5]]  # ages 10..6 days
    p = plan(runs, Limits(max_runs_per_task=3), now_ns=now)
    assert [d.run.id for d in p.delete] == [r.id for r in runs[:7]]
    p = plan(runs, Limits(max_total_bytes=450), now_ns=now)
    assert [d.run.id for d in p.delete] == [r.id for r in runs[:6]]
    assert p.total_before == 1000 and p.total_after == 400


def test_plan_protects_alerts_running_and_newest() -> None:
    now = 1_000 * DAY
    runs = [
        _entry(1, age_days=50, level="critical"),
        _entry(2, age_days=40, level="high"),
        _entry(3, age_days=30, level="medium"),
        _entry(4, age_days=20, status="running"),
        _entry(5, age_days=10),
    ]
    p = plan(runs, Limits(max_age=86400), now_ns=now)
    assert [d.run.id for d in p.delete] == [runs[2].id]
    kept = {d.run.id: d.reason for d in p.kept_protected}
    assert set(kept) == {runs[0].id, runs[1].id, runs[3].id, runs[4].id}
    assert "critical" in kept[runs[0].id] and "still recording" in kept[runs[3].id]
    assert kept[runs[4].id] == "newest run"
    # asked to: alerts no longer protect, a running run and the newest still do
    p = plan(runs, Limits(max_age=86400, keep_level=None), now_ns=now)
    assert [d.run.id for d in p.delete] == [runs[0].id, runs[1].id, runs[2].id]


def _age_run(store_dir: Path, run_id: str, days: float) -> None:
    """Move a recorded run's start back in time (run.json and the index)."""
    store = Store(store_dir)
    meta = store.read_meta(run_id)
    meta.started = time.time_ns() - int(days * DAY)
    store.write_meta(meta)


def _record(spy: Any, tmp_path: Path, *argv: str, task: str) -> str:
    res = spy("run", "-q", "--task", task, "--", *argv)
    assert res.exit_code in (0, 6), res.output
    out = spy("ls", "--format", "json")
    return str(json.loads(out.stdout)[-1]["id"])


@pytest.mark.slow
def test_prune_real_store(spy: Any, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n")
    monkeypatch.setenv("HOME", str(home))
    old_clean = _record(spy, tmp_path, "true", task="a")
    old_alert = _record(spy, tmp_path, "cat", str(home / ".ssh" / "id_rsa"), task="a")
    mid = _record(spy, tmp_path, "true", task="a")
    new = _record(spy, tmp_path, "true", task="a")
    _age_run(store_dir, old_clean, 40)
    _age_run(store_dir, old_alert, 40)
    _age_run(store_dir, mid, 2)

    dry = spy("prune", "--max-age", "30d", "--dry-run", "--format", "json")
    assert dry.exit_code == 0, dry.output
    data = json.loads(dry.stdout)
    assert [d["id"] for d in data["delete"]] == [old_clean]
    assert data["dry_run"] is True
    assert old_alert in {k["id"] for k in data["kept"]}
    assert (store_dir / "runs" / old_clean).is_dir()  # nothing deleted on a dry run

    res = spy("prune", "--max-age", "30d")
    assert res.exit_code == 0, res.output
    assert f"deleted {old_clean}" in res.stdout and "deleted 1 of 4 runs" in res.stdout
    assert not (store_dir / "runs" / old_clean).exists()
    ids = [r["id"] for r in json.loads(spy("ls", "--format", "json").stdout)]
    assert ids == [old_alert, mid, new]  # the index agrees with the directories

    # per task, alerts included on request
    res = spy("prune", "--max-runs-per-task", "1", "--include-alerts", "--format", "json")
    assert res.exit_code == 0, res.output
    assert {d["id"] for d in json.loads(res.stdout)["delete"]} == {old_alert, mid}
    ids = [r["id"] for r in json.loads(spy("ls", "--format", "json").stdout)]
    assert ids == [new]
    assert sorted(p.name for p in (store_dir / "runs").iterdir()) == [new]


def test_prune_needs_a_limit_and_rejects_bad_ones(spy: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = spy("prune")
    assert res.exit_code == 2 and "no retention limit" in res.output
    res = spy("prune", "--max-age", "forever")
    assert res.exit_code == 2 and "not an age" in res.output
    assert "Traceback" not in res.output


def test_policy_retention_is_validated_with_position(tmp_path: Path) -> None:
    from spyglass.policy import PolicyError, load_policy

    pol = tmp_path / "p.yaml"
    pol.write_text("retention:\n  max_age: 30d\n  max_size: lots\n")
    with pytest.raises(PolicyError) as err:
        load_policy(pol, tmp_path)
    assert ":3:" in str(err.value) and "not a size" in str(err.value)
    pol.write_text("retention:\n  max_age: 30d\n  max_runs_per_task: 5\n  keep_level: critical\n")
    p = load_policy(pol, tmp_path)
    assert p.retention.enabled and p.retention.max_runs_per_task == 5 and p.retention.keep_level == "critical"


@pytest.mark.slow
def test_run_applies_the_policy_retention(spy: Any, store_dir: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    pol = tmp_path / "p.yaml"
    pol.write_text("retention:\n  max_runs_per_task: 2\n")
    for _ in range(3):
        res = spy("run", "-q", "--policy", str(pol), "--task", "t", "--", "true")
        assert res.exit_code == 0, res.output
    ids = [r["id"] for r in json.loads(spy("ls", "--format", "json").stdout)]
    assert len(ids) == 2
    assert len(list((store_dir / "runs").iterdir())) == 2


def test_a_symlinked_run_directory_is_left_and_reported(tmp_path: Path) -> None:
    from spyglass.store.retention import apply, entries

    store = Store(tmp_path / "s", create=True)
    from spyglass.pipeline import Pipeline, RunContext
    from spyglass.store import RunMeta, RunWriter, new_run_id

    ids = []
    for _ in range(2):
        meta = RunMeta(id=new_run_id(), command=["x"], started=time.time_ns())
        w = RunWriter(store, meta)
        Pipeline([w], RunContext(run_id=meta.id))
        w.finish("complete", exit_code=0)
        ids.append(meta.id)
    elsewhere = tmp_path / "elsewhere"
    (store.run_dir(ids[0])).rename(elsewhere)
    store.run_dir(ids[0]).symlink_to(elsewhere)
    p = plan(entries(store), Limits(max_runs_per_task=None, max_age=0, keep_level=None), now_ns=time.time_ns() + 10**12)
    assert ids[0] in [d.run.id for d in p.delete]
    done = apply(store, p)
    assert ids[0] not in done and elsewhere.is_dir() and store.run_dir(ids[0]).is_symlink()
    assert ids[0] in store.index.ids()  # the index still agrees with what is on disk
