"""index.sqlite: one row per run, for listing and lookup.  The run directories
are the truth; the index can always be rebuilt from them."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Any

from spyglass.store.meta import RunMeta

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    task TEXT,
    agent_id TEXT,
    status TEXT NOT NULL,
    exit_code INTEGER,
    signal TEXT,
    started INTEGER,
    ended INTEGER,
    events INTEGER DEFAULT 0,
    alerts INTEGER DEFAULT 0,
    max_level TEXT,
    verdict TEXT,
    backend TEXT,
    command TEXT,
    monitor_pid INTEGER,
    anchor TEXT
);
CREATE INDEX IF NOT EXISTS runs_task ON runs(task);
"""

COLUMNS = (
    "id",
    "task",
    "agent_id",
    "status",
    "exit_code",
    "signal",
    "started",
    "ended",
    "events",
    "alerts",
    "max_level",
    "verdict",
    "backend",
    "command",
    "monitor_pid",
    "anchor",
)


class Index:
    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        """The store's index; ``readonly``: a private in-memory copy, the file is never written.

        A read-only index is copied from the file opened with SQLite's ``mode=ro``
        (then ``immutable=1``, for a store on a read-only medium); when neither
        opens, it starts empty and ``problem`` says why (the caller rebuilds it
        from the run directories)."""
        self.path = path
        self.readonly = readonly
        self.problem: str | None = None
        if readonly:
            self.db = sqlite3.connect(":memory:", isolation_level=None)
            self.db.executescript(_SCHEMA)
            self._copy_from_file(path)
            return
        # Several processes opening a new store at once (parallel trials, skill scans) can meet
        # in SQLite's lock upgrade for the WAL switch, where it answers "locked" at once instead
        # of waiting: try again for a while before giving up.
        deadline = time.monotonic() + 30
        while True:
            try:
                self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
                if self.db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA busy_timeout=30000")
                # commits do not wait for the disk (the WAL is synced at checkpoints); the row that
                # carries a run's final anchor is written durably (upsert(durable=True))
                self.db.execute("PRAGMA synchronous=NORMAL")
                self.db.executescript(_SCHEMA)
                have = {r[1] for r in self.db.execute("PRAGMA table_info(runs)")}
                if "anchor" not in have:  # an index written before anchors existed
                    self.db.execute("ALTER TABLE runs ADD COLUMN anchor TEXT")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                with contextlib.suppress(Exception):
                    self.db.close()
                import random  # only when the store is locked (random is 1 ms of a start)

                time.sleep(0.05 + random.random() * 0.2)

    def _copy_from_file(self, path: Path) -> None:
        if not path.exists():
            self.problem = f"{path} does not exist"
            return
        why = ""
        for query in ("mode=ro", "immutable=1"):
            try:
                src = sqlite3.connect(f"file:{path}?{query}", uri=True, timeout=5)
                try:
                    have = [r[1] for r in src.execute("PRAGMA table_info(runs)")]
                    cols = [c for c in COLUMNS if c in have]
                    if not cols:
                        raise sqlite3.DatabaseError("no runs table")
                    rows = src.execute(f"SELECT {', '.join(cols)} FROM runs").fetchall()
                finally:
                    src.close()
            except sqlite3.Error as exc:
                why = str(exc)
                continue
            marks = ", ".join("?" for _ in cols)
            self.db.executemany(f"INSERT OR REPLACE INTO runs ({', '.join(cols)}) VALUES ({marks})", rows)
            return
        self.problem = f"cannot open {path}: {why}"

    def close(self) -> None:
        self.db.close()

    def upsert(self, meta: RunMeta, *, durable: bool = False) -> None:
        """Insert or replace the run's row; ``durable``: on disk when this returns (one WAL sync).

        Other rows may be lost by a crash right after their commit (never the index's
        consistency): the index is rebuilt from the run directories (Store.repair)."""
        row = {
            "id": meta.id,
            "task": meta.task,
            "agent_id": meta.agent_id,
            "status": meta.status,
            "exit_code": meta.exit_code,
            "signal": meta.signal,
            "started": meta.started,
            "ended": meta.ended,
            "events": meta.counts.get("events", 0),
            "alerts": meta.counts.get("alerts", 0),
            "max_level": meta.extra.get("max_level"),
            "verdict": meta.extra.get("verdict"),
            "backend": meta.backend,
            "command": " ".join(meta.command),
            "monitor_pid": meta.monitor_pid,
            "anchor": meta.extra.get("anchor"),
        }
        cols = ", ".join(COLUMNS)
        marks = ", ".join(f":{c}" for c in COLUMNS)
        if durable and not self.readonly:
            self.db.execute("PRAGMA synchronous=FULL")
        try:
            self.db.execute(f"INSERT OR REPLACE INTO runs ({cols}) VALUES ({marks})", row)
        finally:
            if durable and not self.readonly:
                self.db.execute("PRAGMA synchronous=NORMAL")

    def rows(self, where: str = "", params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        cur = self.db.execute(f"SELECT {', '.join(COLUMNS)} FROM runs {where} ORDER BY id", params)
        return [dict(zip(COLUMNS, r, strict=True)) for r in cur.fetchall()]

    def statuses(self) -> list[tuple[str, str]]:
        """(id, status) of every row (what ``Store.repair`` needs, at every start)."""
        return [(r[0], r[1]) for r in self.db.execute("SELECT id, status FROM runs")]

    def ids(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT id FROM runs ORDER BY id")]

    def anchor(self, run_id: str) -> str | None:
        row = self.db.execute("SELECT anchor FROM runs WHERE id = ?", (run_id,)).fetchone()
        return row[0] if row else None

    def delete(self, run_id: str) -> None:
        self.db.execute("DELETE FROM runs WHERE id = ?", (run_id,))
