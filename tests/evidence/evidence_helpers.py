"""Helpers for evidence tests: events by hand, stored runs built from them, the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from spyglass.events import Alert, Event
from spyglass.evidence.workspace import WorkspaceEvidence
from spyglass.evidence.wscache import digest_of
from spyglass.pipeline import Pipeline, RunContext
from spyglass.store import RunMeta, RunReader, RunWriter, Store, new_run_id
from spyglass.store.writer import Signer


def ev(type: str, pid: int = 100, **kw: Any) -> Event:
    return Event(type=type, pid=pid, **kw)


def proc(pid: int, ppid: int, argv: list[str], cwd: str = "/ws") -> list[Event]:
    """start + exec of one process (its exit comes later: ``exit_``)."""
    return [
        ev("process.start", pid, ppid=ppid),
        ev("process.exec", pid, exe="/usr/bin/" + argv[0].rsplit("/", 1)[-1], argv=argv, cwd=cwd),
    ]


def exit_(pid: int, code: int = 0) -> Event:
    return ev("process.exit", pid, exit_code=code)


def write(pid: int, path: str, type: str = "file.write", **kw: Any) -> Event:
    return ev(type, pid, path=path, **kw)


MakeRun = Callable[..., RunReader]


def record_events(
    store: Store,
    events: Iterable[Event],
    alerts: Sequence[Alert] = (),
    *,
    workspace: Sequence[str] = ("/ws",),
    skills: Sequence[str] = (),
    signer: Signer | None = None,
    sinks: Sequence[object] = (),
    finish: bool = True,
    cwd: str | None = None,
    flush_interval: float = 0.1,
) -> RunReader:
    """Feed events (and alerts) through a pipeline with a RunWriter: a stored run."""
    meta = RunMeta(
        id=new_run_id(),
        command=["agent"],
        cwd=cwd or workspace[0],
        workspace=list(workspace),
        skills=list(skills),
        backend="test",
        started=1,
        spyglass_version="0.1.0",
    )
    writer = RunWriter(store, meta, signer=signer, flush_interval=flush_interval)
    ctx = RunContext(
        run_id=meta.id, root_cwd=meta.cwd, workspace=meta.workspace, run=meta, store=store, run_dir=writer.dir
    )
    pipe = Pipeline([writer, *sinks], ctx)
    pipe.start()
    for e in events:
        pipe.feed(e)
    for a in alerts:
        ctx.raise_alert(a)
    pipe.done()
    if finish:
        writer.finish("complete", exit_code=0)
    else:
        writer.flush()
        writer._stop.set()
    return RunReader(store, meta.id)


#: maps a file shared and writable, writes through the mapping, and writes again when told
MAPPER = """
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 0)
m[0:1] = b"X"
print("mapped", flush=True)
sys.stdin.readline()
m[1:2] = b"Y"
print("written", flush=True)
sys.stdin.readline()
"""


def settled(paths: list[Path], margin_ns: int) -> None:
    """Wait (bounded) until the files' ctimes are older than the margin: they can keep their hashes."""
    newest = max(os.stat(p).st_ctime_ns for p in paths)
    deadline = time.monotonic() + 30
    while time.time_ns() <= newest + margin_ns + 1_000_000:
        assert time.monotonic() < deadline, "the clock does not move"
        time.sleep(0.01)


def workspace(tmp_path: Path, files: dict[str, str]) -> Path:
    """``tmp_path/ws`` holding ``files`` (relative name -> text)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for rel, text in files.items():
        (ws / rel).write_text(text)
    return ws


class Cli:
    """The real ``spyglass`` CLI in a subprocess, with a workspace (its working directory) and a store
    under ``tmp``; ``backend``: the capture backend of its runs (None: the default one)."""

    def __init__(self, tmp: Path, backend: str | None = None) -> None:
        self.ws = tmp / "ws"
        self.ws.mkdir()
        self.store = tmp / "store"
        self.backend = backend
        self.env = dict(os.environ, HOME=str(tmp), LANG="C.UTF-8", PYTHONDONTWRITEBYTECODE="1")
        self.env.pop("SPYGLASS_STORE", None)
        self.env.pop("SPYGLASS_POLICY", None)

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "spyglass", *args], cwd=self.ws, env=self.env,
                              capture_output=True, text=True, timeout=180, check=False)

    def run(self, script: str) -> subprocess.CompletedProcess[str]:
        """``spyglass run`` of a shell script in the workspace."""
        backend = ("--backend", self.backend) if self.backend is not None else ()
        return self("run", *backend, "--store", str(self.store), "--", "/bin/sh", "-c", script)


#: the racy margin of the sealed-hash tests: a file's ctime this much older than the walk is settled
WS_MARGIN_NS = 50_000_000


def run_sink(store: Store, ws: Path, action: Callable[[], object] = lambda: None,
             events: Callable[[], list[Event]] = list) -> tuple[WorkspaceEvidence, Path]:
    """A recorded run of workspace ``ws`` with its workspace evidence: the agent waits for the
    before-walk's hashing, does ``action``, then yields ``events()``."""
    sink = WorkspaceEvidence(racy_margin_ns=WS_MARGIN_NS)

    def agent() -> Iterator[Event]:
        yield ev("process.start", 100)
        if sink._hasher is not None:
            sink._hasher.join(timeout=120)
        action()
        yield from events()

    run = record_events(store, agent(), workspace=[str(ws)], sinks=[sink])
    return sink, run.dir


def sealed_file(store: Path, ws: Path) -> Path:
    """The store's file of sealed hashes for workspace ``ws``."""
    return store / "cache" / f"workspace-{digest_of([str(ws.resolve())])}.bin"
