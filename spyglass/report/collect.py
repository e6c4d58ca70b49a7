"""Everything a report shows about one run, gathered in one streaming pass.

The pass feeds the run digest (counts, process table, files, hosts), the
behaviour profile (when the analysis package is there), per-process and
per-time-bucket counters, and picks a bounded set of events for the
timeline: every event an alert points at with a few events either side, then
the first events of each tier (process, network, file changes and other
rare events; successful reads; failed reads) until ``max_events``.  Loader,
locale and cache reads are counted, never embedded.  Memory stays bounded by
``max_events`` whatever the size of the run.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from spyglass.events import Alert, Event
from spyglass.logs import get_logger
from spyglass.report.describe import category, command_text
from spyglass.report.digest import RunDigest, digest_events, is_noise_path
from spyglass.store import RunReader

log = get_logger("spyglass.report")

#: events are counted per small time bucket, then folded into at most this many bins
HIST_BINS = 120
_BUCKET_NS = 10_000_000
#: past this many buckets, the bucket width grows tenfold (long runs stay small in memory)
_MAX_BUCKETS = 20_000


class ProxyDecision(msgspec.Struct):
    host: str
    port: int | None
    method: str | None
    decision: str | None
    rule: str | None
    count: int = 0


class Timeline(msgspec.Struct):
    events: list[Event] = msgspec.field(default_factory=list)
    total: int = 0
    noise: int = 0  # loader/locale/cache reads, never embedded
    by_type_total: Counter[str] = msgspec.field(default_factory=Counter)
    by_type_embedded: Counter[str] = msgspec.field(default_factory=Counter)

    @property
    def omitted(self) -> dict[str, int]:
        return {
            t: n - self.by_type_embedded.get(t, 0)
            for t, n in sorted(self.by_type_total.items())
            if n > self.by_type_embedded.get(t, 0)
        }


class Histogram(msgspec.Struct):
    start_ns: int = 0
    bin_ns: int = 0
    #: category -> counts per bin
    series: dict[str, list[int]] = msgspec.field(default_factory=dict)


class ReportData(msgspec.Struct):
    reader_dir: Path
    digest: RunDigest
    timeline: Timeline
    histogram: Histogram
    alert_events: dict[int, Event] = msgspec.field(default_factory=dict)
    proc_counts: dict[int, Counter[str]] = msgspec.field(default_factory=dict)
    proc_alerts: Counter[int] = msgspec.field(default_factory=Counter)
    proxy: list[ProxyDecision] = msgspec.field(default_factory=list)
    profile: Any = None  # spyglass.analysis.profile.Profile when available
    profile_note: str = ""
    verify: Any = None  # spyglass.evidence.verify.VerifyResult when available
    verify_note: str = ""
    evidence: dict[str, Any] = msgspec.field(default_factory=dict)
    #: (kind, profile name) of the commands, files and hosts that alert events touched
    alert_resources: set[tuple[str, str]] = msgspec.field(default_factory=set)
    #: skill coverage (spyglass.analysis.coverage.SkillCoverage) where the run recorded skills
    coverage: list[Any] = msgspec.field(default_factory=list)
    #: why the run's files do not match the anchor the index keeps ("": they match, or no anchor)
    anchor_problem: str = ""
    #: the alerts as the index recorded them (spyglass.evidence.anchorcheck.AnchoredAlerts), with anchor_problem
    anchored_alerts: Any = None

    @property
    def meta(self) -> Any:
        return self.digest.meta

    @property
    def alerts(self) -> list[Alert]:
        return self.digest.alerts


class _Selector:
    """Bounded choice of timeline events (see the module docstring)."""

    def __init__(self, max_events: int, pinned: set[int], context: int) -> None:
        self.max = max(0, max_events)
        self.pinned_seqs = pinned
        self.context = context
        self.tiers: tuple[list[Event], list[Event], list[Event]] = ([], [], [])
        self.pinned: dict[int, Event] = {}
        self.recent: deque[Event] = deque(maxlen=max(context, 1))
        self.after = 0
        self.tl = Timeline()

    def add(self, ev: Event, cat: str) -> None:
        tl = self.tl
        tl.total += 1
        if (
            cat == "file-read"
            and ev.path is not None
            and is_noise_path(ev.path)
            and ev.seq not in self.pinned_seqs
        ):
            tl.noise += 1
            return
        tl.by_type_total[ev.type] += 1
        if ev.seq in self.pinned_seqs:
            for prev in self.recent:
                self.pinned.setdefault(prev.seq, prev)
            self.pinned[ev.seq] = ev
            self.after = self.context
        elif self.after > 0:
            self.after -= 1
            self.pinned.setdefault(ev.seq, ev)
        if self.context:
            self.recent.append(ev)
        tier = 0 if cat != "file-read" else (1 if ev.ok else 2)
        bucket = self.tiers[tier]
        if len(bucket) < self.max:
            bucket.append(ev)

    def finish(self) -> Timeline:
        key, reads, failed = self.tiers
        room = max(self.max - len(self.pinned), 0)
        n_key = min(len(key), max(room * 3 // 5, room - len(reads) - len(failed)))
        n_read = min(len(reads), room - n_key)
        n_failed = min(len(failed), room - n_key - n_read)
        chosen = dict(self.pinned)
        for part in (key[:n_key], reads[:n_read], failed[:n_failed]):
            for ev in part:
                chosen.setdefault(ev.seq, ev)
        tl = self.tl
        tl.events = [chosen[s] for s in sorted(chosen)]
        tl.by_type_embedded = Counter(ev.type for ev in tl.events)
        return tl


class _Buckets:
    """Event counts per (time bucket, category), coarsened as the run grows."""

    def __init__(self) -> None:
        self.width = _BUCKET_NS
        self.counts: Counter[tuple[int, str]] = Counter()

    def add(self, ts: int, cat: str) -> None:
        counts = self.counts
        counts[(ts // self.width, cat)] += 1
        if len(counts) > _MAX_BUCKETS:
            self.width *= 10
            merged: Counter[tuple[int, str]] = Counter()
            for (b, c), n in counts.items():
                merged[(b // 10, c)] += n
            self.counts = merged


def _fold_histogram(acc: _Buckets) -> Histogram:
    buckets = acc.counts
    if not buckets:
        return Histogram()
    first = min(b for b, _ in buckets)
    last = max(b for b, _ in buckets)
    span = last - first + 1
    per_bin = max(1, -(-span // HIST_BINS))
    nbins = -(-span // per_bin)
    series: dict[str, list[int]] = {}
    for (b, cat), n in buckets.items():
        row = series.setdefault(cat, [0] * nbins)
        row[(b - first) // per_bin] += n
    return Histogram(start_ns=first * acc.width, bin_ns=per_bin * acc.width, series=series)


def _profile_builder(reader: RunReader) -> tuple[Any, str]:
    try:
        from spyglass.analysis.normalize import Normalizer
        from spyglass.analysis.profile import Profile, ProfileBuilder, places_for
    except ImportError:
        return None, "the analysis package is not installed; the graph is drawn from the digest"
    meta = reader.meta
    places = places_for(meta, reader.store.root)
    builder = ProfileBuilder(
        Normalizer(places), Profile(run_id=meta.id, task=meta.task, agent_id=meta.agent_id)
    )
    return builder, ""


def _verify(reader: RunReader) -> tuple[Any, str]:
    try:
        from spyglass.evidence.verify import verify_run
    except ImportError:
        return None, "verification is not available in this installation"
    try:
        from spyglass.evidence.anchorcheck import index_anchors

        return verify_run(reader.dir, meta=reader.meta, anchors=index_anchors(reader)), ""
    except Exception as exc:  # a report must still render for a damaged run
        log.warning("verify failed while building the report: %s", exc)
        return None, f"verification could not run: {exc}"


def _test_tracker(reader: RunReader) -> Any:
    """The evidence component's test-run tracker (which test commands ran, after the last edit?)."""
    try:
        from spyglass.evidence.testruns import TestRunTracker
    except ImportError:
        return None
    try:
        return TestRunTracker(workspace=list(reader.meta.workspace or [reader.meta.cwd]))
    except Exception as exc:  # optional section
        log.info("test tracking unavailable: %s", exc)
        return None


def _evidence_files(reader: RunReader, tests: Any) -> dict[str, Any]:
    """Workspace diff from the evidence directory; test runs from the tracker."""
    from spyglass.report.evidence_view import load_evidence, tests_view

    out = load_evidence(reader)
    if "tests" not in out and tests is not None:
        try:
            out["tests"] = tests_view(tests.result())
        except Exception as exc:  # optional section
            log.info("test evidence unavailable: %s", exc)
    return out


def collect_run(
    reader: RunReader,
    *,
    max_events: int = 3000,
    context: int = 3,
    with_profile: bool = True,
    with_verify: bool = True,
) -> ReportData:
    """Read the run once and gather what the reports show (bounded by ``max_events``)."""
    alerts = reader.alerts()
    alert_seqs = {s for a in alerts for s in a.event_seqs}
    sel = _Selector(max_events, alert_seqs, context)
    alert_events: dict[int, Event] = {}
    proc_counts: dict[int, Counter[str]] = {}
    buckets = _Buckets()
    proxy: dict[tuple[str, int | None, str | None, str | None, str | None], ProxyDecision] = {}
    builder, profile_note = _profile_builder(reader) if with_profile else (None, "")
    tests = _test_tracker(reader)
    tests_hook = tests.feed if tests is not None else None
    profile_hook = builder.event if builder is not None else None
    bad: list[tuple[int, str]] = []

    def tap() -> Iterator[Event]:
        for ev in reader.events(on_bad_line=lambda p, n, why: bad.append((n, why))):
            cat = category(ev.type)
            sel.add(ev, cat)
            pc = proc_counts.get(ev.pid)
            if pc is None:
                pc = proc_counts[ev.pid] = Counter()
            pc[cat] += 1
            if ev.ts:
                buckets.add(ev.ts, cat)
            if ev.seq in alert_seqs:
                alert_events[ev.seq] = ev
            if ev.type == "proxy.request":
                key = (ev.domain or ev.address or "?", ev.port, ev.method, ev.decision, ev.rule)
                pd = proxy.get(key)
                if pd is None:
                    pd = proxy[key] = ProxyDecision(*key)
                pd.count += 1
            if profile_hook is not None:
                profile_hook(ev)
            if tests_hook is not None:
                tests_hook(ev)
            yield ev

    digest = digest_events(reader.meta, tap(), alerts)
    digest.bad_lines = bad
    proc_alerts: Counter[int] = Counter(a.pid for a in alerts)
    norm = builder.norm if builder is not None else None
    verify, verify_note = _verify(reader) if with_verify else (None, "not checked for this report")
    return ReportData(
        reader_dir=reader.dir,
        digest=digest,
        timeline=sel.finish(),
        histogram=_fold_histogram(buckets),
        alert_events=alert_events,
        proc_counts=proc_counts,
        proc_alerts=proc_alerts,
        proxy=sorted(proxy.values(), key=lambda p: (p.decision != "deny", p.host, p.port or 0)),
        profile=builder.profile if builder is not None else None,
        profile_note=profile_note,
        verify=verify,
        verify_note=verify_note,
        evidence=_evidence_files(reader, tests),
        alert_resources=_alert_resources(alert_events.values(), norm),
        coverage=_coverage(reader, builder),
    )


def _alert_resources(events: Iterable[Event], norm: Any) -> set[tuple[str, str]]:
    """Profile names of what the alert events touched (raw names without a normalizer)."""
    out: set[tuple[str, str]] = set()
    for ev in events:
        if ev.type == "process.exec":
            out.add(("command", norm.command(ev.exe, ev.argv) if norm else command_text(ev.argv, ev.exe)))
        for p in (ev.path, ev.target):
            if p:
                out.add(("file", norm.path(p) if norm else p))
        if ev.address or ev.domain:
            if norm is not None:
                name = norm.host(ev.address, ev.port, ev.domain, ev.transport)
            else:
                name = (
                    f"{ev.domain or ev.address}:{ev.port}"
                    if ev.port is not None
                    else (ev.domain or ev.address)
                )
            if name:
                out.add(("host", name))
        if ev.dns_name:
            out.add(("host", ev.dns_name.rstrip(".").lower()))
    return out


def _coverage(reader: RunReader, builder: Any) -> list[Any]:
    if builder is None or not reader.meta.skills:
        return []
    try:
        from spyglass.analysis.coverage import skill_coverage
        from spyglass.analysis.skills import find_skills

        return list(skill_coverage(builder.profile, find_skills(reader.meta.skills), builder.norm))
    except Exception as exc:  # optional section; the report renders without it
        log.info("skill coverage unavailable: %s", exc)
        return []
