from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spyglass.capture.replay import ReplayBackend
from spyglass.errors import RunNotFound, StoreError
from spyglass.events import Alert, Event
from spyglass.pipeline import Pipeline, RunContext
from spyglass.store import RunMeta, RunReader, RunWriter, Store, new_run_id
from spyglass.store.chain import block_link, genesis, parse_seal, record_crcs


def _events(n: int) -> list[Event]:
    out = [Event(type="process.start", pid=100, ts=1)]
    out += [Event(type="file.read", pid=100, path=f"/w/f{i}", ts=2 + i) for i in range(n)]
    return out


def _record(store: Store, events: list[Event], **meta: object) -> str:
    m = RunMeta(id=new_run_id(), command=["agent"], **meta)  # type: ignore[arg-type]
    writer = RunWriter(store, m)
    pipe = Pipeline([writer], RunContext(run_id=m.id))
    for ev in events:
        pipe.feed(ev)
    pipe.ctx.raise_alert(Alert(rule_id="r1", title="t", level="high", event_seqs=[2]))
    writer.finish("complete", exit_code=0)
    return m.id


def test_write_read_roundtrip_with_chain(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True)
    rid = _record(store, _events(5), task="t1")
    reader = RunReader(store, rid)
    evs = list(reader.events())
    assert [e.seq for e in evs] == list(range(1, 7))
    assert reader.meta.status == "complete"
    assert reader.meta.counts["events"] == 6 and reader.meta.counts["file.read"] == 5
    assert reader.alerts()[0].rule_id == "r1"
    assert reader.meta.extra["max_level"] == "high"
    # one block of six records, sealed: the seal's chain value links the block to the genesis value
    *records, last = (store.run_dir(rid) / "events.jsonl").read_bytes().splitlines()
    seal = parse_seal(last)
    assert len(records) == 6 and seal is not None
    head = block_link(genesis(rid, "events"), b"".join(r + b"\n" for r in records))
    assert seal.chain == head and seal.crc32 == record_crcs(records)
    cp = json.loads((store.run_dir(rid) / "evidence" / "checkpoint.json").read_text())
    assert cp["final"] is True and cp["events"] == 6 and cp["events_head"] == head


def test_ids_sort_by_time_and_resolve(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True)
    a = _record(store, _events(1))
    time.sleep(0.002)
    b = _record(store, _events(1))
    assert a < b
    assert store.resolve("latest") == b
    assert store.resolve(b) == b
    assert store.resolve(b[:-1]) == b
    with pytest.raises(RunNotFound):
        store.resolve("nope")


def test_missing_store_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no spyglass store"):
        Store(tmp_path / "absent")


def test_dead_monitor_run_is_repaired_as_incomplete(tmp_path: Path) -> None:
    """A monitor killed with SIGKILL mid-run: the next open marks the run incomplete, events kept."""
    root = tmp_path / "s"
    code = f"""
import os, time, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from spyglass.store import Store, RunWriter, RunMeta, new_run_id
from spyglass.pipeline import Pipeline, RunContext
from spyglass.events import Event
store = Store({str(root)!r}, create=True)
m = RunMeta(id=new_run_id(), command=['x'])
w = RunWriter(store, m, flush_interval=0.05)
p = Pipeline([w], RunContext(run_id=m.id))
for i in range(50):
    p.feed(Event(type='file.read', pid=1, path=f'/f{{i}}'))
print(m.id, flush=True)
time.sleep(60)
"""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    rid = proc.stdout.readline().strip()
    time.sleep(0.5)
    os.kill(proc.pid, 9)
    proc.wait()
    store = Store(root)
    meta = store.read_meta(rid)
    assert meta.status == "incomplete"
    assert meta.counts["events"] == 50
    assert len(list(RunReader(store, rid).events())) == 50


def test_corrupt_line_is_named_and_skipped(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True)
    rid = _record(store, _events(3))
    path = store.run_dir(rid) / "events.jsonl"
    lines = path.read_bytes().splitlines()
    lines[1] = b'{"seq": 2, "type": broken'
    path.write_bytes(b"\n".join(lines) + b"\n")
    bad: list[tuple[int, str]] = []
    evs = list(RunReader(store, rid).events(on_bad_line=lambda p, n, w: bad.append((n, w))))
    assert len(evs) == 3 and bad and bad[0][0] == 2


def test_index_is_rebuilt_from_run_dirs(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True)
    rid = _record(store, _events(2), task="again")
    store.index.close()
    (tmp_path / "s" / "index.sqlite").unlink()
    for extra in ("-wal", "-shm"):
        p = tmp_path / "s" / f"index.sqlite{extra}"
        if p.exists():
            p.unlink()
    store2 = Store(tmp_path / "s")
    assert store2.resolve("latest") == rid


def test_replay_backend_feeds_stored_events(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True)
    rid = _record(store, _events(4))
    session = ReplayBackend(store.run_dir(rid)).start()
    evs = list(session.events())
    assert [e.path for e in evs[1:]] == [f"/w/f{i}" for i in range(4)]
    assert session.result().root_pid == 100


def test_the_default_store_is_in_the_users_state_directory() -> None:
    from spyglass.store.store import default_store_path

    assert default_store_path({"HOME": "/h"}) == Path("/h/.local/state/spyglass")
    assert default_store_path({"HOME": "/h", "XDG_STATE_HOME": "/x/state"}) == Path("/x/state/spyglass")
    assert default_store_path({"HOME": "/h", "XDG_STATE_HOME": "rel"}) == Path("/h/.local/state/spyglass")
    assert default_store_path({"HOME": "/h", "SPYGLASS_STORE": "/s"}) == Path("/s")


def test_many_processes_open_a_new_store_at_once(tmp_path: Path) -> None:
    """Parallel trials and skill scans open one fresh store together: none may fail with "locked"."""
    code = (
        "import sys, time\n"
        "from spyglass.store import Store\n"
        "t = float(sys.argv[2])\n"
        "time.sleep(max(0.0, t - time.time()))\n"
        "Store(sys.argv[1], create=True)\n"
    )
    start = time.time() + 2.0
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "s"), str(start)],
                              stderr=subprocess.PIPE, text=True) for _ in range(8)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, errors


def test_repair_looks_only_at_runs_not_indexed_or_not_finished(tmp_path: Path) -> None:
    """A store's repair at every start: a finished run's row stays without a look inside its
    directory (even when its run.json went missing: the row keeps its anchor); a row whose
    directory is gone goes; a run directory not indexed is indexed."""
    store = Store(tmp_path / "s", create=True)
    kept, gone, lost = (_record(store, _events(1)) for _ in range(3))
    anchor = store.index.anchor(kept)
    assert anchor is not None
    (store.run_dir(kept) / "run.json").unlink()
    import shutil

    shutil.rmtree(store.run_dir(gone))
    store.index.delete(lost)  # a run the index lost (a crash before its row reached the disk)
    store.index.close()
    again = Store(tmp_path / "s")
    assert again.list_ids() == sorted([kept, lost])
    assert again.index.anchor(kept) == anchor
    assert again.index.anchor(lost) is not None  # from its run.json
    with pytest.raises(RunNotFound, match=r"no run\.json"):
        again.read_meta(kept)
