"""An agent that sets the system clock is recorded and alerted under each backend (a clock set back
hides later writes from the witness's end-of-run checks, which go by status change times); a
program that only reads the clock's state stays silent.  The agent is tests/capture/progs/clock.py,
which steps the clock by no more than microseconds (it runs as root here: CI is root)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spyglass.store import RunReader, Store

PROG = Path(__file__).resolve().parent / "progs" / "clock.py"
PY = os.path.realpath(sys.executable)
CLOCK_CALLS = {"settimeofday", "clock_settime", "adjtimex", "clock_adjtime"}

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="setting the clock needs root (CAP_SYS_TIME)")


def _run(tmp_path: Path, backend: str, mode: str) -> RunReader:
    store = tmp_path / "store"
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "-q", "--backend", backend, "--store", str(store), "--", PY,
         str(PROG), mode],
        cwd=tmp_path, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    s = Store(store)
    return RunReader(s, s.resolve("latest"))


def test_the_clock_set_by_the_run_is_recorded_and_critical(tmp_path: Path, capture_backend: str) -> None:
    reader = _run(tmp_path, capture_backend, "set")
    calls = [(e.syscall, e.detail, e.ok, e.errno) for e in reader.events() if e.syscall in CLOCK_CALLS]
    assert calls == [
        # refused (uid 65534): recorded, worded without modes (strace shows only the struct's address)
        ("clock_adjtime", "clock_adjtime CLOCK_REALTIME", False, "EPERM"),  # glibc's adjtimex
        ("adjtimex", "adjtimex", False, "EPERM"),  # the system call itself
        ("settimeofday", "settimeofday", False, "EPERM"),
        # done, as root
        ("clock_settime", "clock_settime CLOCK_REALTIME", True, None),
        ("clock_adjtime", "clock_adjtime CLOCK_REALTIME modes=0x100", True, None),  # ADJ_SETOFFSET
    ], calls
    alerts = [a for a in reader.alerts() if a.rule_id == "evasion-clock-set"]
    assert [a.level for a in alerts] == ["critical", "critical"]
    assert sorted(a.message.split(": ", 1)[1] for a in alerts) == [
        "clock_adjtime CLOCK_REALTIME modes=0x100", "clock_settime CLOCK_REALTIME"]


def test_benign_twin_reading_the_clock_and_its_state_is_silent(tmp_path: Path, capture_backend: str) -> None:
    """adjtimex (glibc's, which is clock_adjtime, and the system call) with modes 0, and with
    ADJ_OFFSET_SS_READ (ntp_gettime, adjtime(NULL, &old)), clock_adjtime with modes 0,
    settimeofday(NULL, NULL), clock_gettime: no event, no alert."""
    reader = _run(tmp_path, capture_backend, "read")
    assert [e for e in reader.events() if e.syscall in CLOCK_CALLS] == []
    assert [a.rule_id for a in reader.alerts()] == []
