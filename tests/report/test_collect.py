from __future__ import annotations

from pathlib import Path

from spyglass.events import Alert, Event
from spyglass.pipeline import Pipeline, RunContext
from spyglass.report.collect import collect_run
from spyglass.store import RunMeta, RunReader, RunWriter, Store, new_run_id


def _run(tmp_path: Path, n_reads: int, alert_at: int) -> RunReader:
    store = Store(tmp_path / "s", create=True)
    m = RunMeta(id=new_run_id(), command=["a"], started=10**9)
    w = RunWriter(store, m)
    pipe = Pipeline([w], RunContext(run_id=m.id))
    pipe.feed(Event(type="process.start", pid=1, ts=10**9))
    for i in range(n_reads):
        pipe.feed(Event(type="file.read", pid=1, ts=10**9 + i * 10**6, path=f"/w/f{i}"))
        pipe.feed(Event(type="file.read", pid=1, ts=10**9 + i * 10**6, path="/usr/lib/libc.so.6"))
    pipe.feed(Event(type="net.connect", pid=1, ts=2 * 10**9, address="10.0.0.1", port=443))
    w.alert(Alert(rule_id="r", title="t", level="high", event_seqs=[alert_at], pid=1))
    w.finish("complete", exit_code=0)
    return RunReader(store, m.id)


def test_timeline_is_bounded_and_keeps_alert_context(tmp_path: Path) -> None:
    reader = _run(tmp_path, 2000, alert_at=3000)
    data = collect_run(reader, max_events=100, context=2, with_verify=False)
    tl = data.timeline
    seqs = [e.seq for e in tl.events]
    assert len(seqs) <= 100 and seqs == sorted(seqs)
    assert {2996, 2998, 3000, 3002, 3004} <= set(seqs)  # the alert's event and its non-noise neighbours
    assert tl.total == 4002 and tl.noise >= 1990
    assert tl.omitted["file.read"] > 1900
    assert "net.connect" in tl.by_type_embedded  # rare events are not crowded out by reads
    assert data.alert_events[3000].path is not None


def test_histogram_and_per_process_counts(tmp_path: Path) -> None:
    data = collect_run(_run(tmp_path, 50, alert_at=2), with_verify=False)
    h = data.histogram
    assert sum(sum(v) for v in h.series.values()) == 102
    assert data.proc_counts[1]["file-read"] == 100
    assert data.verify is None and data.profile is not None
