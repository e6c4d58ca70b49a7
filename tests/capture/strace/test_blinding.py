"""The tracer must not be blinded: real agents attack strace; each is recorded, alerted, and the run
is never `complete` while processes went unobserved.  A benign twin signalling its own children
stays silent."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spyglass.store import RunReader, Store

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")

PROG = Path(__file__).resolve().parent / "progs" / "blind.py"
PY = os.path.realpath(sys.executable)


def _run(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess[str], RunReader, int]:
    store = tmp_path / "store"
    pidfile = tmp_path / "agent.pid"
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "--backend", "strace", "--store", str(store), "--", PY, str(PROG),
         mode, str(pidfile)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    s = Store(store)
    return res, RunReader(s, s.resolve("latest")), int(pidfile.read_text())


def _gone(pid: int, timeout: float = 30.0) -> bool:
    """The process is dead (or a zombie) within ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            return True
        if stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] in (b"Z", b"X"):
            return True
        time.sleep(0.1)
    return False


def _rules(reader: RunReader) -> set[str]:
    return {a.rule_id for a in reader.alerts()}


@pytest.mark.parametrize("mode", ["pidfd-sigint", "killpg-sigint", "kill9"])
def test_tracer_stopped_by_the_agent_marks_the_run_monitor_lost(tmp_path: Path, mode: str) -> None:
    res, reader, pid = _run(tmp_path, mode)
    assert reader.meta.status == "monitor-lost", res.stderr
    rules = _rules(reader)
    assert "evasion-monitor-lost" in rules
    if mode != "kill9":  # SIGKILL ends strace before it can print the call that killed it
        assert "evasion-kill-monitor" in rules
    assert _gone(pid), "the blinded agent was left running"
    verify = subprocess.run(
        [sys.executable, "-m", "spyglass", "verify", "--store", str(tmp_path / "store"), "latest"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert verify.returncode != 0 and "monitor" in (verify.stdout + verify.stderr)


def test_stopped_tracer_is_resumed_and_reported(tmp_path: Path) -> None:
    res, reader, _ = _run(tmp_path, "sigstop")
    assert res.returncode == 0, res.stderr
    rules = _rules(reader)
    assert "evasion-kill-monitor" in rules and "evasion-monitor-lost" in rules
    assert any((e.detail or "").startswith("monitor-stopped:") for e in reader.events())


def test_untraced_child_is_killed_and_reported(tmp_path: Path) -> None:
    res, reader, _ = _run(tmp_path, "untraced")
    assert "evasion-untraced-child" in _rules(reader), res.stderr
    ev = [e for e in reader.events() if (e.detail or "").startswith("CLONE_UNTRACED")]
    assert ev and ev[0].target_pid is not None and "killed" in (ev[0].detail or "")
    assert _gone(ev[0].target_pid)  # the agent's waitpid() returned: the hidden child is dead
    assert reader.meta.status == "complete" and res.returncode == 0


def test_signals_to_the_agents_own_children_stay_silent(tmp_path: Path) -> None:
    res, reader, _ = _run(tmp_path, "benign")
    assert res.returncode == 0, res.stderr
    assert reader.meta.status == "complete"
    levels = {a.level for a in reader.alerts()}
    assert not levels & {"medium", "high", "critical"}, [(a.rule_id, a.message) for a in reader.alerts()]


def test_timeout_signalling_its_own_group_is_not_an_attack(tmp_path: Path) -> None:
    store = tmp_path / "store"
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "--backend", "strace", "--store", str(store), "--", "timeout", "0.5",
         "sleep", "30"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 124, res.stderr
    s = Store(store)
    reader = RunReader(s, s.resolve("latest"))
    groups = [e for e in reader.events() if "process group" in (e.detail or "")]
    assert groups, "timeout's kill(0, SIGTERM) is recorded"
    assert reader.meta.status == "complete"
    assert not {a.level for a in reader.alerts()} & {"medium", "high", "critical"}


def test_gate_fails_a_monitor_lost_run(tmp_path: Path) -> None:
    _run(tmp_path, "kill9")
    gate = subprocess.run(
        [sys.executable, "-m", "spyglass", "gate", "--store", str(tmp_path / "store"), "latest"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert gate.returncode != 0 and "tracer was lost" in gate.stdout + gate.stderr
