"""RunWriter: the pipeline sink that persists a run as it happens.

Events are appended as JSON lines sealed per block (one hash per block of
up to 1024 records; :mod:`spyglass.store.chain`), and every pending block is
sealed and written at least every ``flush_interval`` seconds by a small
background thread, so a monitor killed with SIGKILL leaves every event it had
handled more than a moment before on disk, sealed.  Alerts are written and
chained one by one, at once.  ``run.json`` says ``running`` until ``finish()``;
the next command that opens the store turns a dead ``running`` run into
``incomplete``.

Faults lose nothing silently: a write that fails (a full disk) is reported
once per file with its cause and path, an alert that could not be saved is
counted (the maximum level is kept in memory from the moment an alert fires)
and named in ``run.json``, and the run ends ``evidence-incomplete``.  A run
directory deleted, renamed or replaced during the run is noticed (the writer
knows its device and inode): it is made again from the event and alert files
the writer still holds open, and the run says so (``extra.run_dir``).  The
final checkpoint's anchor (:func:`~spyglass.store.chain.checkpoint_anchor`)
goes into ``run.json`` and the index, outside the run directory.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import msgspec

from spyglass.errors import StoreWriteError
from spyglass.events import Alert, Event, level_rank
from spyglass.events.codec import encode, encode_canonical
from spyglass.pipeline import RunContext, Sink
from spyglass.store.chain import BlockChain, Chain, checkpoint_anchor
from spyglass.store.meta import RunMeta, encode_meta
from spyglass.store.store import Store, monitor_start

#: signs a checkpoint's canonical bytes, returns {"algorithm", "public_key", "signature"}
Signer = Callable[[bytes], dict[str, str]]


class Checkpoint(msgspec.Struct, kw_only=True):
    run_id: str
    final: bool
    events: int
    events_head: str
    alerts: int
    alerts_head: str
    meta_digest: str
    policy_digest: str | None
    spyglass_version: str
    ts: int
    outcome_digest: str | None = None  # final only: status, exit, end time, stopping rule
    evidence: dict[str, str] | None = None  # final only: evidence file name -> sha256
    signature: dict[str, str] | None = None
    events_format: str | None = None  # "block": events.jsonl is block-sealed (None: one chain value per line)


def meta_digest(meta: RunMeta) -> str:
    """Digest of the parts of run.json fixed at the start of the run."""
    fixed = {
        "id": meta.id,
        "command": meta.command,
        "cwd": meta.cwd,
        "workspace": meta.workspace,
        "task": meta.task,
        "agent_id": meta.agent_id,
        "backend": meta.backend,
        "mode": meta.mode,
        "policy_digest": meta.policy_digest,
        "started": meta.started,
        "skills": meta.skills,
    }
    return hashlib.sha256(encode_canonical(fixed)).hexdigest()


def outcome_digest(meta: RunMeta) -> str:
    """Digest of the parts of run.json settled at the end of the run."""
    fields = {
        "status": meta.status,
        "exit_code": meta.exit_code,
        "signal": meta.signal,
        "ended": meta.ended,
        "stopped_by": meta.stopped_by,
    }
    return hashlib.sha256(encode_canonical(fields)).hexdigest()


def _fid(path: Path | int) -> tuple[int, int] | None:
    """Device and inode of an open file or of a path itself (a symlink is not followed)."""
    try:
        st = os.fstat(path) if isinstance(path, int) else os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _stderr(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


STREAM_FILES = ("events.jsonl", "alerts.jsonl")


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class RunWriter(Sink):
    name = "store"

    def __init__(
        self,
        store: Store,
        meta: RunMeta,
        *,
        flush_interval: float = 0.1,
        checkpoint_interval: float = 60.0,
        signer: Signer | None = None,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.meta = meta
        self.dir: Path = store.run_dir(meta.id)
        self.events_chain = BlockChain(meta.id, "events")
        self.alerts_chain = Chain(meta.id, "alerts")
        self.signer = signer
        self.warn = warn or _stderr
        self.counts: dict[str, int] = {}
        self.max_level = -1
        #: one line per file that could not be written: "cause: path"
        self.failures: list[str] = []
        #: alerts that fired but could not be saved (kept for run.json and the exit code)
        self.unsaved: list[Alert] = []
        #: "deleted" / "replaced" when the run directory went away during the run
        self.dir_problem: str | None = None
        self._failed_paths: set[str] = set()
        self._ctx_unsaved: set[int] | None = None
        self._ctx_failures: list[str] = []
        try:
            self.dir.mkdir(parents=True, exist_ok=False)
            self._events: IO[bytes] = open(self.dir / "events.jsonl", "ab", buffering=1 << 20)  # noqa: SIM115
            self._alerts: IO[bytes] = open(self.dir / "alerts.jsonl", "ab", buffering=0)  # noqa: SIM115
            # read handles: the records survive an unlinked run directory through them
            self._readers: dict[str, IO[bytes]] = {n: open(self.dir / n, "rb") for n in STREAM_FILES}  # noqa: SIM115
            self._dir_id = _fid(self.dir)
            meta.monitor_pid = os.getpid()
            meta.extra["monitor_start"] = monitor_start(meta.monitor_pid)  # (its pid may be reused once it is gone)
            meta.status = "running"
            store.write_meta(meta)
        except (OSError, sqlite3.Error) as exc:
            cause = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            where = exc.filename if isinstance(exc, OSError) and exc.filename else self.dir
            raise StoreWriteError(f"cannot write the run store: {cause}: {where}") from None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._flush_interval = flush_interval
        self._checkpoint_interval = checkpoint_interval
        self._closed = False
        self._flusher = threading.Thread(target=self._flush_loop, name="spyglass-flush", daemon=True)
        self._flusher.start()

    def start(self, ctx: RunContext) -> None:
        self._ctx_unsaved = ctx.unsaved_alerts
        self._ctx_failures = ctx.evidence_failures

    # -- failures ----------------------------------------------------------------
    def _fail(self, exc: OSError, path: Path | str) -> None:
        where = str(exc.filename or path)
        if where in self._failed_paths:
            return
        self._failed_paths.add(where)
        line = f"{exc.strerror or exc}: {where}"
        self.failures.append(line)
        self.warn(f"spyglass: cannot write the run store ({line}); the run will be marked evidence-incomplete")

    # -- hooks -----------------------------------------------------------------
    def event(self, ev: Event) -> None:
        line = encode(ev)
        with self._lock:  # chain and file advance together (a checkpoint never counts an unwritten line)
            if self.events_chain.add(line):
                self._seal_events()
        t = ev.type
        self.counts[t] = self.counts.get(t, 0) + 1

    def _seal_events(self) -> None:
        """Seal the pending block of events and hand it to the file (the lock is held)."""
        data = self.events_chain.seal()
        if data and not self._closed:
            try:
                self._events.write(data)
            except (OSError, ValueError) as exc:
                self._fail(exc if isinstance(exc, OSError) else OSError(str(exc)), self.dir / "events.jsonl")

    def alert(self, alert: Alert) -> None:
        # an alert counts from the moment it fires, saved or not
        self.max_level = max(self.max_level, level_rank(alert.level))
        canonical = encode_canonical(alert)
        saved = True
        with self._lock:
            head, count = self.alerts_chain.head, self.alerts_chain.count
            try:
                self._alerts.write(self.alerts_chain.add(canonical) + b"\n")
            except (OSError, ValueError) as exc:
                self.alerts_chain.head, self.alerts_chain.count = head, count  # the file holds no such line
                saved = False
                self._fail(exc if isinstance(exc, OSError) else OSError(str(exc)), self.dir / "alerts.jsonl")
        if not saved:
            self.unsaved.append(alert)
            if self._ctx_unsaved is not None:
                self._ctx_unsaved.add(alert.seq)

    # -- background flushing -----------------------------------------------------
    def _flush_loop(self) -> None:
        last_cp = time.monotonic()
        while not self._stop.wait(self._flush_interval):
            self.check_dir()
            self.flush()
            if time.monotonic() - last_cp >= self._checkpoint_interval:
                last_cp = time.monotonic()
                try:
                    self.write_checkpoint(final=False)
                except OSError as exc:
                    self._fail(exc, self.dir / "evidence" / "checkpoint.json")

    def flush(self) -> None:
        with self._lock:
            if not self._closed:
                self._seal_events()
                try:
                    self._events.flush()
                except OSError as exc:
                    self._fail(exc, self.dir / "events.jsonl")

    # -- a run directory deleted or replaced under us ----------------------------------
    def check_dir(self) -> None:
        """Notice a run directory (or its record files) deleted, renamed or replaced, and make it again."""
        if self._closed:
            return
        problem = None
        if _fid(self.dir) is None:
            problem = "deleted or renamed"
        elif _fid(self.dir) != self._dir_id:
            problem = "replaced"
        else:
            for name, reader in self._readers.items():
                if _fid(self.dir / name) != _fid(reader.fileno()):
                    problem = f"changed ({name} deleted or replaced)"
        if problem is None:
            return
        try:
            self._restore(problem)
        except OSError as exc:
            self._fail(exc, self.dir)

    def _restore(self, problem: str) -> None:
        with self._lock:
            self._seal_events()
            self._events.flush()
            if _fid(self.dir) is not None and _fid(self.dir) != self._dir_id:  # another directory, a symlink
                os.rename(self.dir, self.dir.with_name(f"{self.dir.name}.replaced-{time.time_ns()}"))
            self.dir.mkdir(parents=True, exist_ok=True)
            for name, reader in list(self._readers.items()):
                path = self.dir / name
                if _fid(path) == _fid(reader.fileno()):
                    continue
                if path.exists():
                    os.rename(path, path.with_name(f"{name}.replaced-{time.time_ns()}"))
                reader.seek(0)
                with open(path, "xb") as out:
                    while block := reader.read(1 << 20):
                        out.write(block)
                reader.close()
                self._readers[name] = open(path, "rb")  # noqa: SIM115
                if name == "events.jsonl":
                    self._events.close()
                    self._events = open(path, "ab", buffering=1 << 20)  # noqa: SIM115
                else:
                    self._alerts.close()
                    self._alerts = open(path, "ab", buffering=0)  # noqa: SIM115
            self._dir_id = _fid(self.dir)
        first = self.dir_problem is None
        self.dir_problem = self.dir_problem or problem
        self.meta.extra["run_dir"] = {
            "problem": f"the run directory was {self.dir_problem} during the run",
            "restored": "events and alerts, from the files spyglass held open",
            "lost": "other files written before (the workspace manifest taken at the start, checkpoints)",
        }
        if first:
            self.warn(f"spyglass: the run directory {self.dir} was {problem} during the run; "
                      "made it again from the events and alerts spyglass still held open")

    # -- checkpoint --------------------------------------------------------------
    def checkpoint(self, final: bool) -> Checkpoint:
        with self._lock:
            if not self._closed:
                self._seal_events()
                self._events.flush()  # every record the checkpoint counts is on disk
            return Checkpoint(
                run_id=self.meta.id,
                final=final,
                events=self.events_chain.sealed,
                events_head=self.events_chain.head,
                alerts=self.alerts_chain.count,
                alerts_head=self.alerts_chain.head,
                meta_digest=meta_digest(self.meta),
                policy_digest=self.meta.policy_digest,
                spyglass_version=self.meta.spyglass_version,
                ts=time.time_ns(),
                events_format="block",
            )

    def write_checkpoint(self, final: bool) -> Checkpoint:
        cp = self.checkpoint(final)
        evdir = self.dir / "evidence"
        evdir.mkdir(exist_ok=True)
        if final:
            cp.outcome_digest = outcome_digest(self.meta)
            cp.evidence = {
                p.name: _sha256_file(p)
                for p in sorted(evdir.iterdir())
                if p.is_file() and not p.name.startswith("checkpoint.json") and not p.name.endswith(".tmp")
            }
        if self.signer is not None:
            cp.signature = self.signer(encode_canonical(msgspec.structs.replace(cp, signature=None)))
        tmp = evdir / "checkpoint.json.tmp"
        tmp.write_bytes(msgspec.json.format(encode_canonical(cp), indent=2) + b"\n")
        os.replace(tmp, evdir / "checkpoint.json")
        return cp

    # -- end of run ----------------------------------------------------------------
    def finish(self, status: str = "complete", **updates: Any) -> RunMeta:
        """Close the files, write the final checkpoint (its anchor into run.json and the index) and run.json."""
        self._stop.set()
        self._flusher.join(timeout=5)
        self.check_dir()
        with self._lock:
            self._seal_events()
            try:
                self._events.flush()
            except OSError as exc:
                self._fail(exc, self.dir / "events.jsonl")
            for f in (self._events, self._alerts, *self._readers.values()):
                try:
                    f.close()
                except OSError as exc:
                    self._fail(exc, self.dir / "events.jsonl")
            self._closed = True
        meta = self.meta
        for k, v in updates.items():
            setattr(meta, k, v)
        for line in self._ctx_failures:  # other sinks' evidence (the workspace manifests)
            if line not in self.failures:
                self.failures.append(line)
        if (self.failures or self.unsaved or self.dir_problem) and status == "complete":
            status = "evidence-incomplete"
        meta.status = status
        if meta.ended is None:
            meta.ended = time.time_ns()
        counts = dict(sorted(self.counts.items()))
        counts["events"] = self.events_chain.count
        counts["alerts"] = self.alerts_chain.count
        meta.counts = counts
        if self.max_level >= 0:
            from spyglass.events import LEVELS

            meta.extra["max_level"] = LEVELS[self.max_level]
        if self.unsaved:
            meta.extra["unsaved_alerts"] = [
                {"level": a.level, "rule_id": a.rule_id, "message": a.message, "pid": a.pid} for a in self.unsaved
            ]
        try:
            cp = self.write_checkpoint(final=True)
            meta.extra["anchor"] = checkpoint_anchor(msgspec.json.decode(encode_canonical(cp)))
        except OSError as exc:
            self._fail(exc, self.dir / "evidence" / "checkpoint.json")
        if self.failures:
            meta.extra["evidence_failures"] = list(self.failures)
            if meta.status == "complete":
                meta.status = "evidence-incomplete"
        try:
            self.store.write_meta(meta, durable=True)  # the final anchor survives a crash right after
        except (OSError, sqlite3.Error) as exc:
            self._fail(exc if isinstance(exc, OSError) else OSError(str(exc)), self.dir / "run.json")
            try:
                self.store.index.upsert(meta)
            except Exception as exc2:  # sqlite3.Error on a full disk
                self.warn(f"spyglass: cannot write the index of {self.store.root} either ({exc2})")
        return meta

    def done(self, ctx: RunContext) -> None:
        self.check_dir()  # before the other sinks write their end-of-run evidence
        self.flush()


def write_meta_file(path: Path, meta: RunMeta) -> None:
    path.write_bytes(encode_meta(meta))
