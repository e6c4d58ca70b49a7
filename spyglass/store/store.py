"""The run store: one directory per run and an SQLite index.

The default store lives in the user's state directory
(``$XDG_STATE_HOME/spyglass``, else ``~/.local/state/spyglass``), outside any
workspace an agent works in; ``--store`` or ``$SPYGLASS_STORE`` choose another.

Run ids sort by time (``20261130T213512Z-3f9a2c``).  ``RUN`` arguments accept
an id, a unique prefix of one, or ``latest``.  Opening the store repairs the
index: runs whose monitor died are marked ``incomplete`` with what they hold,
and run directories missing from the index are added back.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spyglass.errors import PathError, RunNotFound, StoreError
from spyglass.store.index import Index
from spyglass.store.meta import RunMeta, decode_meta, encode_meta

STORE_ENV = "SPYGLASS_STORE"


def default_store_path(env: Mapping[str, str] | None = None) -> Path:
    """``$SPYGLASS_STORE``, else ``$XDG_STATE_HOME/spyglass``, else ``~/.local/state/spyglass``."""
    env = os.environ if env is None else env
    if env.get(STORE_ENV):
        return Path(env[STORE_ENV])
    base = env.get("XDG_STATE_HOME") or ""
    if not os.path.isabs(base):
        base = os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "state")
    return Path(base) / "spyglass"


def new_run_id(now_ns: int | None = None) -> str:
    now_ns = now_ns or time.time_ns()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now_ns / 1e9))
    return f"{stamp}{(now_ns // 1000) % 1_000_000:06d}Z-{os.urandom(3).hex()}"


def monitor_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot; None: unknown), kept beside the run's
    ``monitor_pid``: a pid is reused, a pid with its start time is not."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _pid_alive(pid: int | None, started: object = None) -> bool:
    """Whether the run's monitor lives: process ``pid``, not a zombie, and (when its start time
    ``started`` was kept) that very process, not another one given its pid since it died."""
    if not pid:
        return False
    foreign = False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        foreign = True  # another user's process: alive, whatever /proc lets us read of it
    # a zombie counts as dead
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return foreign
    if fields[0] == b"Z":
        return False
    return not isinstance(started, int) or len(fields) <= 19 or int(fields[19]) == started


class Store:
    def __init__(
        self,
        root: Path | str | None = None,
        *,
        create: bool = False,
        repair: bool = True,
        readonly: bool = False,
    ) -> None:
        """Open (or with ``create`` make) a store.  ``readonly``: nothing on disk is ever
        written (reading commands; a full disk; an archived read-only copy): the index
        is a private copy and repairs stay in memory."""
        self.root = Path(root) if root is not None else default_store_path()
        self.readonly = readonly and not create
        self._repaired: dict[str, RunMeta] = {}
        if not self.root.is_dir() and not create:
            raise StoreError(
                f"no spyglass store at {self.root}",
                hint="record a run with `spyglass run -- CMD`, or pass --store DIR",
            )
        if not self.readonly:
            try:
                (self.root / "runs").mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise PathError.from_os_error(exc, self.root, "cannot use the store at") from None
        try:
            if self.readonly:
                self.index = Index(self.root / "index.sqlite", readonly=True)
            else:
                (self.root / "runs").mkdir(exist_ok=True)
                self.index = Index(self.root / "index.sqlite")
        except Exception as exc:  # sqlite3.Error and OSError
            raise StoreError(f"cannot open the index of {self.root}: {exc}") from exc
        #: why the index could not be read (read-only opening); the runs are then listed from their directories
        self.index_problem = self.index.problem
        if repair or self.index_problem:
            self.repair()

    # -- paths ---------------------------------------------------------------
    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / run_id

    # -- meta ----------------------------------------------------------------
    def read_meta(self, run_id: str) -> RunMeta:
        repaired = self._repaired.get(run_id)
        if repaired is not None:  # a read-only store keeps its repairs in memory
            return repaired
        path = self.run_dir(run_id) / "run.json"
        try:
            return decode_meta(path.read_bytes())
        except FileNotFoundError as exc:
            raise RunNotFound(f"run {run_id} has no run.json") from exc
        except Exception as exc:
            raise StoreError(f"{path}: unreadable run metadata: {exc}") from exc

    def write_meta(self, meta: RunMeta, *, durable: bool = False) -> None:
        """run.json and the index row (``durable``: the row is on disk when this returns)."""
        if self.readonly:
            raise StoreError(f"{self.root} is opened read-only")
        path = self.run_dir(meta.id) / "run.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_bytes(encode_meta(meta))
        os.replace(tmp, path)
        self.index.upsert(meta, durable=durable)

    # -- lookup --------------------------------------------------------------
    def list_ids(self) -> list[str]:
        return self.index.ids()

    def resolve(self, ref: str) -> str:
        """A run id from an id, a unique prefix, or ``latest``."""
        ids = self.list_ids()
        if not ids:
            raise RunNotFound(f"no runs in {self.root}", hint="record one with `spyglass run -- CMD`")
        if ref == "latest":
            return ids[-1]
        if ref in ids:
            return ref
        hits = [i for i in ids if i.startswith(ref)]
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise RunNotFound(f"no run matches {ref!r}", hint="`spyglass ls` lists the runs")
        raise RunNotFound(f"{ref!r} matches {len(hits)} runs", hint="give more of the id")

    # -- repair --------------------------------------------------------------
    def repair(self) -> list[str]:
        """Mark runs whose monitor died as incomplete; re-index unindexed runs."""
        fixed: list[str] = []
        # run at every start: one query and one listing (a store holds thousands of runs), then a
        # look only at the runs not indexed or not finished
        indexed: dict[str, str] = dict(self.index.statuses())
        runs = str(self.runs_dir)
        try:
            with os.scandir(runs) as listing:
                names = sorted(e.name for e in listing if _is_dir(e))
        except OSError:
            names = []
        for name in names:
            status = indexed.get(name)
            if status is not None and status not in ("running", "incomplete"):
                # a finished run's row: nothing to repair, and no look inside its directory (a stat
                # per run was most of a start's repair with thousands of runs); a row whose
                # run.json went missing is kept with its anchor (``show`` names the missing file)
                del indexed[name]
                continue
            if not os.path.exists(f"{runs}/{name}/run.json"):
                continue
            indexed.pop(name, None)
            late_note = status == "incomplete" and os.path.exists(f"{runs}/{name}/{MONITOR_NOTE}")
            if status is not None and status != "running" and not late_note:
                continue
            d = self.runs_dir / name
            try:
                meta = self.read_meta(name)
            except StoreError:
                continue
            if meta.id != name:  # a directory put aside (or planted) under another name is not that run
                continue
            if late_note and meta.status == "incomplete":  # marked before the watchdog's note was written
                meta.status = "running"
            if meta.status == "running" and not _pid_alive(meta.monitor_pid, meta.extra.get("monitor_start")):
                meta.status = "incomplete"
                lost = _monitor_note(d)
                if lost is not None:  # spyglass was killed and its watchdog said so
                    meta.status = "monitor-lost"
                    meta.extra = {**meta.extra, "monitor_lost": lost}
                meta.counts = dict(meta.counts)
                meta.counts["events"] = _count_lines(d / "events.jsonl")
                meta.counts["alerts"] = _count_lines(d / "alerts.jsonl")
                if self.readonly:
                    self.index.upsert(meta)
                    self._repaired[meta.id] = meta
                else:
                    try:
                        self.write_meta(meta)
                    except OSError:  # a full disk: the next command tries again
                        self.index.upsert(meta)
                fixed.append(name)
            elif status is None:
                self.index.upsert(meta)
                fixed.append(name)
        for stale in indexed:  # rows whose directory is gone
            self.index.delete(stale)
        return fixed


def _is_dir(entry: os.DirEntry[str]) -> bool:
    """``Path.is_dir`` of a listed entry: False when it cannot be told (its stat failed)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


#: the note a capture helper leaves in the run directory when spyglass died during the run
MONITOR_NOTE = "monitor-lost.json"


def _monitor_note(run_dir: Path) -> dict[str, Any] | None:
    """What the eBPF backend's watchdog wrote when spyglass died mid-run (None: no note)."""
    try:
        data = json.loads((run_dir / MONITOR_NOTE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    keep = ("detail", "ts", "monitor_pid", "signals", "alive", "killed", "events_after_total")
    return {k: data[k] for k in keep if k in data}


def _count_lines(path: Path) -> int:
    """Records in a stored stream (block seal lines are not records)."""
    from spyglass.events.codec import record_lines

    try:
        with path.open("rb") as f:
            return sum(1 for _ in record_lines(f))
    except FileNotFoundError:
        return 0
