"""The store side of the eBPF watchdog: a running run whose spyglass died, with the watchdog's
note beside it, is marked monitor-lost with what the note says (even when an earlier command had
already marked it incomplete before the note was written)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from spyglass.store import RunMeta, Store


def _dead_pid() -> int:
    dead = subprocess.Popen(["true"])
    dead.wait()
    return dead.pid


def _running_run_of_a_dead_spyglass(tmp_path: Path) -> tuple[Store, Path]:
    """A store holding one run still marked running whose spyglass is gone: (store, run directory)."""
    s = Store(tmp_path / "store", create=True)
    run_dir = s.runs_dir / "20260101T000000000000Z-abcdef"
    run_dir.mkdir(parents=True)
    s.write_meta(RunMeta(id=run_dir.name, status="running", command=["x"], monitor_pid=_dead_pid(), started=1))
    return s, run_dir


def test_monitor_note_is_read_once_spyglass_is_gone(tmp_path: Path) -> None:
    """The store side of the watchdog: a running run whose spyglass died, with a note, is monitor-lost."""
    s, run_dir = _running_run_of_a_dead_spyglass(tmp_path)
    (run_dir / "monitor-lost.json").write_text(json.dumps({"detail": "monitor-lost: spyglass died", "killed": [7]}))
    s.repair()
    got = s.read_meta(run_dir.name)
    assert got.status == "monitor-lost" and got.extra["monitor_lost"]["killed"] == [7]


def test_a_note_written_after_the_run_was_marked_incomplete_still_counts(tmp_path: Path) -> None:
    s, run_dir = _running_run_of_a_dead_spyglass(tmp_path)
    s.repair()
    assert s.read_meta(run_dir.name).status == "incomplete"
    (run_dir / "monitor-lost.json").write_text(json.dumps({"detail": "monitor-lost: spyglass died"}))
    s.repair()
    assert s.read_meta(run_dir.name).status == "monitor-lost"


def test_benign_twin_a_run_without_a_note_is_incomplete(tmp_path: Path) -> None:
    s, run_dir = _running_run_of_a_dead_spyglass(tmp_path)
    s.repair()
    assert s.read_meta(run_dir.name).status == "incomplete"
