"""RunWriter: the pipeline sink that persists a run as it happens.

Events and alerts are appended as hash-chained JSON lines and flushed at
least every ``flush_interval`` seconds by a small background thread, so a
monitor killed with SIGKILL leaves every event it had handled more than a
moment before on disk.  ``run.json`` says ``running`` until ``finish()``;
the next command that opens the store turns a dead ``running`` run into
``incomplete``.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import msgspec

from spyglass.events import Alert, Event, level_rank
from spyglass.events.codec import encode_canonical
from spyglass.pipeline import RunContext, Sink
from spyglass.store.chain import Chain
from spyglass.store.meta import RunMeta, encode_meta
from spyglass.store.store import Store

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
    ) -> None:
        self.store = store
        self.meta = meta
        self.dir: Path = store.run_dir(meta.id)
        self.dir.mkdir(parents=True, exist_ok=False)
        self.events_chain = Chain(meta.id, "events")
        self.alerts_chain = Chain(meta.id, "alerts")
        self.signer = signer
        self.counts: dict[str, int] = {}
        self.max_level = -1
        self._events: IO[bytes] = open(self.dir / "events.jsonl", "ab", buffering=1 << 20)  # noqa: SIM115
        self._alerts: IO[bytes] = open(self.dir / "alerts.jsonl", "ab", buffering=0)  # noqa: SIM115
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._flush_interval = flush_interval
        self._checkpoint_interval = checkpoint_interval
        self._closed = False
        meta.monitor_pid = os.getpid()
        meta.status = "running"
        store.write_meta(meta)
        self._flusher = threading.Thread(target=self._flush_loop, name="spyglass-flush", daemon=True)
        self._flusher.start()

    # -- hooks -----------------------------------------------------------------
    def event(self, ev: Event) -> None:
        canonical = encode_canonical(ev)
        with self._lock:  # chain and file advance together (a checkpoint never counts an unwritten line)
            self._events.write(self.events_chain.add(canonical) + b"\n")
        self.counts[ev.type] = self.counts.get(ev.type, 0) + 1

    def alert(self, alert: Alert) -> None:
        canonical = encode_canonical(alert)
        with self._lock:
            self._alerts.write(self.alerts_chain.add(canonical) + b"\n")
        self.max_level = max(self.max_level, level_rank(alert.level))

    # -- background flushing -----------------------------------------------------
    def _flush_loop(self) -> None:
        last_cp = time.monotonic()
        while not self._stop.wait(self._flush_interval):
            self.flush()
            if time.monotonic() - last_cp >= self._checkpoint_interval:
                last_cp = time.monotonic()
                self.write_checkpoint(final=False)

    def flush(self) -> None:
        with self._lock:
            if not self._closed:
                self._events.flush()

    # -- checkpoint --------------------------------------------------------------
    def checkpoint(self, final: bool) -> Checkpoint:
        with self._lock:
            if not self._closed:
                self._events.flush()  # every record the checkpoint counts is on disk
            return Checkpoint(
                run_id=self.meta.id,
                final=final,
                events=self.events_chain.count,
                events_head=self.events_chain.head,
                alerts=self.alerts_chain.count,
                alerts_head=self.alerts_chain.head,
                meta_digest=meta_digest(self.meta),
                policy_digest=self.meta.policy_digest,
                spyglass_version=self.meta.spyglass_version,
                ts=time.time_ns(),
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
        """Close the files, write the final checkpoint and run.json."""
        self._stop.set()
        self._flusher.join(timeout=5)
        with self._lock:
            self._events.flush()
            self._events.close()
            self._alerts.close()
            self._closed = True
        meta = self.meta
        for k, v in updates.items():
            setattr(meta, k, v)
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
        self.write_checkpoint(final=True)
        self.store.write_meta(meta)
        return meta

    def done(self, ctx: RunContext) -> None:
        self.flush()


def write_meta_file(path: Path, meta: RunMeta) -> None:
    path.write_bytes(encode_meta(meta))
