"""Changes between two runs that try to keep a workspace file's stat (spyglass/evidence/wscache.py).

Each way changes a.txt's content after the run that sealed its hash and puts back what it can of
the stat (size, mtime; the inode, through a delete and a new file that reuses it, or a hard link
renamed over it; the content through a mapping made after the run, or a truncate then an extend):
the next run's before-manifest has the content the file really has.  The benign twin (nothing
changed) takes both hashes unread."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from evidence_helpers import MAPPER, ev, record_events, settled

from spyglass.events import Event
from spyglass.evidence.manifest import decode_manifest
from spyglass.evidence.workspace import WorkspaceEvidence
from spyglass.store import Store

MARGIN_NS = 50_000_000
GOOD, EVIL = b"good\n", b"evil\n"


def _settled(paths: list[Path]) -> None:
    settled(paths, MARGIN_NS)


def _run(store: Store, ws: Path) -> tuple[WorkspaceEvidence, Path]:
    sink = WorkspaceEvidence(racy_margin_ns=MARGIN_NS)

    def agent() -> Iterator[Event]:
        yield ev("process.start", 100)
        if sink._hasher is not None:
            sink._hasher.join(timeout=120)

    run = record_events(store, agent(), workspace=[str(ws)], sinks=[sink])
    return sink, run.dir


def _same_times(path: Path, st: os.stat_result) -> None:
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _reuse_inode(a: Path) -> None:
    st = os.stat(a)
    a.unlink()
    a.write_bytes(EVIL)  # a freed inode number is often given to the next file made
    _same_times(a, st)


def _link_over(a: Path) -> None:
    st = os.stat(a)
    other = a.with_name("other")
    other.write_bytes(EVIL)
    _same_times(other, st)
    os.rename(other, a)


def _map_and_write(a: Path) -> None:
    import mmap

    st = os.stat(a)
    fd = os.open(a, os.O_RDWR)
    try:
        with mmap.mmap(fd, 0) as m:
            m[:] = EVIL
    finally:
        os.close(fd)
    _same_times(a, st)


def _truncate_extend(a: Path) -> None:
    st = os.stat(a)
    os.truncate(a, 0)
    with open(a, "r+b") as f:
        f.write(EVIL)
    _same_times(a, st)


@pytest.mark.parametrize("change", [_reuse_inode, _link_over, _map_and_write, _truncate_extend, None],
                         ids=["inode-reused", "renamed-over", "mapping", "truncate-extend", "benign"])
def test_a_file_changed_between_runs_is_read_again(tmp_path: Path, change: Callable[[Path], None] | None) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    a, b = ws / "a.txt", ws / "b.txt"
    a.write_bytes(GOOD)
    b.write_bytes(b"same\n")
    _settled([a, b])
    store = Store(tmp_path / "store", create=True)
    _run(store, ws)
    if change is not None:
        change(a)
    second, run_dir = _run(store, ws)
    assert second.before is not None and second.before.cached == (1 if change is not None else 2)
    before = decode_manifest((run_dir / "evidence" / "manifest-before.json").read_bytes())
    assert before.by_path()[str(a)].sha256 == hashlib.sha256(a.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", ["hard-link", "same-name"])
def test_a_file_held_mapped_under_another_name_when_a_run_ends_is_not_kept(tmp_path: Path, name: str) -> None:
    """A process holds a.txt mapped shared and writable through a hard link outside the workspace
    (``/proc/PID/maps`` names the link) across the end of a run, and writes through the mapping
    after it (no time changes): the run kept no hash for a.txt, the next run reads it.  The twin
    maps it under its own name."""
    import subprocess
    import sys

    ws = tmp_path / "ws"
    ws.mkdir()
    a, b = ws / "a.txt", ws / "b.txt"
    a.write_bytes(b"abcd\n")
    b.write_bytes(b"same\n")
    mapped = a
    if name == "hard-link":
        mapped = tmp_path / "elsewhere"
        os.link(a, mapped)
    store = Store(tmp_path / "store", create=True)
    mapper = subprocess.Popen([sys.executable, "-c", MAPPER, str(mapped)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert mapper.stdout is not None and mapper.stdin is not None
        assert mapper.stdout.readline() == "mapped\n"
        _settled([a, b])
        _run(store, ws)
        mapper.stdin.write("go\n")
        mapper.stdin.flush()
        assert mapper.stdout.readline() == "written\n"
    finally:
        if mapper.stdin is not None:
            mapper.stdin.close()
        mapper.wait(timeout=60)
    assert a.read_bytes() == b"XYcd\n"
    second, run_dir = _run(store, ws)
    assert second.before is not None and second.before.cached == 1  # b.txt
    before = decode_manifest((run_dir / "evidence" / "manifest-before.json").read_bytes())
    assert before.by_path()[str(a)].sha256 == hashlib.sha256(b"XYcd\n").hexdigest()
