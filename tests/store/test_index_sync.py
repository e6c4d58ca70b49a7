"""Index writes: only the row that carries a run's final anchor waits for the disk."""

from __future__ import annotations

import time
from pathlib import Path

from spyglass.store import RunMeta, RunWriter, Store, new_run_id


def test_only_the_final_row_is_written_durably(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True)
    db = store.index.db
    assert db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL: commits do not sync
    statements: list[str] = []
    db.set_trace_callback(statements.append)
    meta = RunMeta(id=new_run_id(), command=["true"], cwd=str(tmp_path), started=time.time_ns())
    writer = RunWriter(store, meta)
    start = list(statements)
    assert any(s.startswith("INSERT OR REPLACE INTO runs") for s in start)
    assert not any("synchronous" in s for s in start)  # the "running" row: no sync
    statements.clear()
    done = writer.finish("complete")
    assert done.extra.get("anchor")
    pragmas = [i for i, s in enumerate(statements) if s == "PRAGMA synchronous=FULL"]
    inserts = [i for i, s in enumerate(statements) if s.startswith("INSERT OR REPLACE INTO runs")]
    assert pragmas and inserts and pragmas[0] < inserts[-1]  # the anchor's row is synced
    assert statements[-1] == "PRAGMA synchronous=NORMAL"
    assert store.index.anchor(meta.id) == done.extra["anchor"]
    assert Store(tmp_path / "s").index.anchor(meta.id) == done.extra["anchor"]


def test_a_read_only_index_takes_a_durable_row_in_memory(tmp_path: Path) -> None:
    Store(tmp_path / "s", create=True)
    ro = Store(tmp_path / "s", readonly=True)
    meta = RunMeta(id=new_run_id(), command=["true"], cwd=str(tmp_path), started=time.time_ns())
    ro.index.upsert(meta, durable=True)  # its private copy: no pragma on a file, no error
    assert ro.index.ids() == [meta.id]
    assert Store(tmp_path / "s").index.ids() == []
