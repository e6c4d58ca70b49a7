"""Records the eBPF rings could not take are an alert (``evasion-capture-lost``, high), not only a count.

The flood is real: the real program, a real process opening a file 20,000 times, into a ring
made tiny (64 KiB) with a reader held back until the process exited (the backend's test options
``ring_bytes`` and ``stall_reader``: a flood cannot be made to overflow the default rings and
spill reliably on a shared machine).  The run stays ``complete``; the loss is in ``alerts``,
fails ``check --fail-on high`` (exit 6) and ``gate``.  The benign twin is the same process with
the default rings and reader: nothing lost, no such alert.  :class:`LossWatch` itself is played
with counters fed by the test (when the first loss is told, what the end adds).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from spyglass.capture.ebpf.losses import PREFIX, LossWatch

FLOOD = "import os\nfor i in range(20000): os.close(os.open('f', os.O_WRONLY | os.O_CREAT))"


def _spyglass(store: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPYGLASS_STORE": str(store)}
    return subprocess.run([sys.executable, "-m", "spyglass", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def _flood(tmp_path: Path, **options: Any) -> tuple[Any, list[dict[str, Any]], Path]:
    from spyglass.capture.ebpf import EbpfBackend
    from spyglass.policy import Policy
    from spyglass.rules.sinks import build_sinks
    from spyglass.session.record import RunRequest, record
    from spyglass.store import Store

    store = tmp_path / "s"
    sinks = build_sinks(Policy(), printer=False)  # the live rule engine, as `spyglass run` has it
    out = record(RunRequest(argv=[sys.executable, "-c", FLOOD], cwd=str(tmp_path), backend_options=options),
                 EbpfBackend(), Store(store, create=True), sinks)
    alerts = json.loads(_spyglass(store, "alerts", "latest", "--format", "json", cwd=tmp_path).stdout)
    return out.meta, [a for a in alerts if a["rule_id"] == "evasion-capture-lost"], store


def test_records_lost_in_a_flood_are_an_alert_that_fails_check_and_gate(tmp_path: Path, need_ebpf: None) -> None:
    meta, lost_alerts, store = _flood(tmp_path, ring_bytes=1 << 16, stall_reader=-1)
    lost = meta.capture["lost"]
    assert lost > 0 and meta.status == "complete"
    assert lost_alerts and all(a["level"] == "high" and a["message"].startswith(PREFIX) for a in lost_alerts)
    said = [int(a["message"].split()[1]) for a in lost_alerts]  # "capture-lost: N [more] record(s) ..."
    assert sum(said) == lost, (lost, [a["message"] for a in lost_alerts])  # every lost record told, once
    check = _spyglass(store, "check", "latest", "--fail-on", "high", cwd=tmp_path)
    assert check.returncode == 6, check.stdout + check.stderr  # the same alert when the run is judged again
    gate = _spyglass(store, "gate", "latest", "--require", "no-alerts-at-or-above=high", cwd=tmp_path)
    assert gate.returncode == 1, gate.stdout


def test_benign_twin_a_run_that_lost_nothing_has_no_such_alert(tmp_path: Path, need_ebpf: None) -> None:
    meta, lost_alerts, _ = _flood(tmp_path)
    if meta.capture["lost"]:
        pytest.skip(f"the default rings lost {meta.capture['lost']} records on this machine now")
    assert lost_alerts == []


def test_the_first_loss_is_told_at_once_and_the_end_tells_the_rest() -> None:
    counts: list[tuple[int, list[str]]] = [(0, []), (5, ["file 5"])]
    watch = LossWatch(lambda: counts[0], pid=42, interval=0)
    assert watch.check() == []
    counts[0] = (5, ["file 5"])
    (first,) = watch.check()
    assert first.type == "sys.sensitive" and first.pid == 42 and first.detail is not None
    assert first.detail.startswith(f"{PREFIX} 5 record(s)") and "file 5" in first.detail
    counts[0] = (9, ["file 9"])
    assert watch.check() == []  # told once while the run goes on
    (rest,) = watch.final(12, ["file 11", "exit 1"])
    assert rest.detail is not None and rest.detail.startswith(f"{PREFIX} 7 more record(s)")
    assert "12 in all" in rest.detail
    assert watch.final(12, ["file 11", "exit 1"]) == []
    quiet = LossWatch(lambda: (0, []), pid=42, interval=0)
    assert quiet.check() == [] and quiet.final(0, []) == []


def test_counters_that_cannot_be_read_are_left_to_the_end() -> None:
    def broken() -> tuple[int, list[str]]:
        raise OSError("map gone")

    watch = LossWatch(broken, pid=1, interval=0)
    assert watch.check() == []
    (ev,) = watch.final(3, ["net 3"])
    assert ev.detail is not None and ev.detail.startswith(f"{PREFIX} 3 record(s)")
