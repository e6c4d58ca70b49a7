"""Helpers for the eBPF backend tests: run a script under a backend, normalize events."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from spyglass.capture.base import CaptureResult, LaunchSpec
from spyglass.events.schema import Event

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
WORKLOAD = HERE / "workload.sh"


def ebpf_skip_reason() -> str | None:
    """Why the real program cannot run here (None: it can)."""
    from spyglass.capture.ebpf import probe

    found = probe.static_problem()
    if found is not None:
        return f"eBPF backend unavailable: {found[0]}"
    ok, why = probe.try_load()
    return None if ok else f"eBPF program refused: {why}"


@dataclass
class Captured:
    events: list[Event]
    result: CaptureResult


def run_under(backend: str, script: str, cwd: Path, wait: float = 0.0, **options: object) -> Captured:
    """A shell script under a backend (``$PY`` is this Python); every event and the result."""
    from spyglass.capture import get_backend

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PY": sys.executable, "LANG": "C.UTF-8"}
    spec = LaunchSpec(["/bin/sh", "-c", script], str(cwd), env=env, wait_descendants=wait, options=options)
    session = get_backend(backend).start(spec)
    events = list(session.events())
    return Captured(events, session.result())


def normalize(events: list[Event], ws: Path) -> set[tuple[object, ...]]:
    """What both backends must agree on, independent of pids and timing.

    Files: type, path and target under ``ws`` (relative), success.  Execs: argv and
    cwd.  Exits: the exiting process's argv and status.  Network: loopback
    addresses, the transport and the outcome (ephemeral ports dropped).
    """
    root = str(ws)
    rel = lambda p: None if p is None else ("WS" + p[len(root) :] if p.startswith(root) else p)  # noqa: E731
    argv_of: dict[int, tuple[str, ...]] = {}
    out: set[tuple[object, ...]] = set()
    for ev in events:
        if ev.type == "process.exec" and ev.ok:
            argv_of[ev.pid] = tuple(ev.argv or ())
            out.add(("exec", tuple(ev.argv or ()), rel(ev.cwd)))
        elif ev.type == "process.exit":
            out.add(("exit", argv_of.get(ev.pid), ev.exit_code, ev.signal))
        elif ev.type.startswith("file.") and ev.path and ev.path.startswith(root):
            if ev.type == "file.read" and ev.flags and "O_DIRECTORY" in ev.flags:
                continue  # read-only directory opens are filtered in the kernel (documented)
            out.add((ev.type, rel(ev.path), rel(ev.target), ev.ok))
        elif ev.type.startswith("net.") and ev.address and ev.address.startswith("127."):
            out.add((ev.type, ev.address, ev.transport, ev.ok))
    return out
