"""A digest of one run: the aggregate that ``show``, the end-of-run summary and
the reports are drawn from.  Built in one streaming pass over the events."""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec

from spyglass.events import FILE_WRITE_TYPES, Alert, Event
from spyglass.events.devices import is_device_path
from spyglass.events.identity import is_failed_probe
from spyglass.events.proctree import ProcessTable
from spyglass.store import RunReader
from spyglass.store.meta import RunMeta

#: files every program opens; left out of the "files read" list
_NOISE_PREFIXES = (
    "/etc/ld.so",
    "/lib/",
    "/lib64/",
    "/usr/lib/",
    "/usr/lib64/",
    "/usr/share/locale/",
    "/usr/lib/locale/",
    "/proc/self/",
    "/dev/null",
    "/dev/tty",
    "/dev/urandom",
    "/sys/",
    "/usr/share/zoneinfo/",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
)


def is_noise_path(path: str) -> bool:
    return path.startswith(_NOISE_PREFIXES) or "/__pycache__/" in path or path.endswith(".pyc")


class HostContact(msgspec.Struct):
    address: str
    port: int | None
    domain: str | None
    transport: str | None
    count: int = 0
    failed: int = 0
    decision: str | None = None  # proxy decision where one was recorded


class RunDigest(msgspec.Struct):
    meta: RunMeta
    counts: Counter[str] = msgspec.field(default_factory=Counter)
    procs: ProcessTable = msgspec.field(default_factory=ProcessTable)
    writes: dict[str, list[str]] = msgspec.field(default_factory=dict)  # type -> paths (first seen order)
    reads: list[str] = msgspec.field(default_factory=list)
    hosts: dict[tuple[str, int | None], HostContact] = msgspec.field(default_factory=dict)
    dns: dict[str, list[str]] = msgspec.field(default_factory=dict)
    alerts: list[Alert] = msgspec.field(default_factory=list)
    bad_lines: list[tuple[int, str]] = msgspec.field(default_factory=list)
    failed: int = 0
    #: failed probes (opens of files that are not there), folded in what is shown
    probes: int = 0

    @property
    def events(self) -> int:
        return sum(self.counts.values())

    def to_json(self) -> dict[str, Any]:
        import msgspec

        return {
            "run": msgspec.to_builtins(self.meta),
            "counts": dict(sorted(self.counts.items())),
            "processes": [
                {
                    "pid": p.pid,
                    "ppid": p.ppid,
                    "exe": p.exe,
                    "argv": p.argv,
                    "cwd": p.cwd,
                    "exit_code": p.exit_code,
                    "signal": p.signal,
                    "detached": p.detached,
                }
                for p in sorted(self.procs.procs.values(), key=lambda p: p.start_ts)
            ],
            "files_written": self.writes,
            "files_read": self.reads,
            "hosts": [msgspec.structs.asdict(h) for h in self.hosts.values()],
            "dns": self.dns,
            "alerts": [msgspec.to_builtins(a) for a in self.alerts],
            "unreadable_lines": [{"line": n, "error": e} for n, e in self.bad_lines],
        }


def digest_events(meta: RunMeta, events: Any, alerts: list[Alert] | None = None) -> RunDigest:
    d = RunDigest(meta=meta, alerts=list(alerts or []))
    seen_w: dict[str, set[str]] = {}
    seen_r: set[str] = set()
    ev: Event
    for ev in events:
        d.counts[ev.type] += 1
        d.procs.update(ev)
        t = ev.type
        if not ev.ok:
            d.failed += 1
            if is_failed_probe(ev):
                d.probes += 1
        if t in FILE_WRITE_TYPES:
            if ev.ok and ev.path and not is_device_path(ev.path):  # /dev/null & co. store nothing
                s = seen_w.setdefault(t, set())
                label = (
                    f"{ev.path} -> {ev.target}"
                    if t in ("file.rename", "file.link") and ev.target
                    else ev.path
                )
                if label not in s:
                    s.add(label)
                    d.writes.setdefault(t, []).append(label)
        elif t == "file.read":
            if ev.ok and ev.path and ev.path not in seen_r and not is_noise_path(ev.path):
                if ev.flags and "O_DIRECTORY" in ev.flags:
                    continue
                seen_r.add(ev.path)
                d.reads.append(ev.path)
        elif t in ("net.connect", "proxy.request"):
            if ev.address is None:
                continue
            key = (ev.address, ev.port)
            h = d.hosts.get(key)
            if h is None:
                h = d.hosts[key] = HostContact(ev.address, ev.port, ev.domain, ev.transport)
            h.count += 1
            if not ev.ok:
                h.failed += 1
            if ev.domain and not h.domain:
                h.domain = ev.domain
            if ev.decision:
                h.decision = ev.decision
        elif t == "net.dns" and ev.dns_name:
            d.dns.setdefault(ev.dns_name, [])
            for a in ev.dns_answers or []:
                if a not in d.dns[ev.dns_name]:
                    d.dns[ev.dns_name].append(a)
    return d


def digest_run(reader: RunReader) -> RunDigest:
    bad: list[tuple[int, str]] = []
    d = digest_events(
        reader.meta,
        reader.events(on_bad_line=lambda p, n, why: bad.append((n, why))),
        reader.alerts(),
    )
    d.bad_lines = bad
    return d
