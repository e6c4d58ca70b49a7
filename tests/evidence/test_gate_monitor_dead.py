"""``gate`` of a run whose monitor died with nobody to say what followed (``incomplete``): the agent
kills spyglass's watchdog, then spyglass, and works on unrecorded.  Whatever the requirements, such a
run fails ``run-observed``, as a ``monitor-lost`` run does: killing the watchdog too must not turn a
rejected run into one that passes (``--require no-writes-outside-workspace`` finds nothing recorded
outside the workspace, since nothing after the kill is recorded).  The benign twin: a run that ended
as usual passes the same requirement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spyglass.store import RunReader, Store

PY = os.path.realpath(sys.executable)

pytestmark = pytest.mark.timeout(180)

#: the agent kills spyglass's watchdog (its parent's child running watchdog.py), then spyglass
KILL_BOTH = r"""
import os, signal, time
me, spy = os.getpid(), os.getppid()
for _ in range(600):
    found = None
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            stat = open(f"/proc/{entry}/stat", "rb").read()
            cmd = open(f"/proc/{entry}/cmdline", "rb").read()
        except OSError:
            continue
        helper = any(a.endswith(b"/watchdog.py") for a in cmd.split(b"\0"))
        if int(stat[stat.rfind(b")") + 2 :].split()[1]) == spy and helper:
            found = int(entry)
    if found:
        break
    time.sleep(0.05)
os.kill(found, signal.SIGKILL)
os.kill(spy, signal.SIGKILL)
time.sleep(0.5)
"""


def _with_pid(pid: int) -> subprocess.Popen[bytes] | None:
    """A process outside the run that gets ``pid`` (the kernel's next pid set just below it), or None."""
    for _ in range(50):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        proc = subprocess.Popen(["sleep", "120"], start_new_session=True)
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    return None


def _gate(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spyglass", "gate", "--store", str(store), *args, "latest"],
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_run_whose_monitor_and_watchdog_were_killed_fails_the_gate(tmp_path: Path, capture_backend: str) -> None:
    store = tmp_path / "store"
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "--backend", capture_backend, "--store", str(store), "--",
         PY, "-c", KILL_BOTH],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=False,
        start_new_session=True,
    )  # fmt: skip
    assert res.returncode == -9
    s = Store(store)
    s.repair()
    assert RunReader(s, s.resolve("latest")).meta.status == "incomplete"
    gate = _gate(store, "--require", "no-writes-outside-workspace")
    assert gate.returncode == 1 and "run-observed" in gate.stdout, gate.stdout + gate.stderr


def test_spyglass_s_pid_given_to_another_process_does_not_keep_the_run_running(tmp_path: Path,
                                                                              capture_backend: str) -> None:
    """pids wrap (32768 of them by default): once spyglass is dead its pid may be any process's, one
    the agent left or another; the run is still found dead, not ``running`` (which no gate rejects)."""
    if not os.access("/proc/sys/kernel/ns_last_pid", os.W_OK):
        pytest.skip("the next pid cannot be chosen here (not root)")
    store = tmp_path / "store"
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "--backend", capture_backend, "--store", str(store), "--",
         PY, "-c", KILL_BOTH],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=False,
    )  # fmt: skip
    assert res.returncode == -9  # (started in this group: no session or group of its own pins its pid)
    monitor = json.loads(next(store.glob("runs/*/run.json")).read_text())["monitor_pid"]
    other = _with_pid(monitor)
    if other is None:
        pytest.skip(f"pid {monitor} went to another process first")
    try:
        s = Store(store)
        s.repair()
        assert RunReader(s, s.resolve("latest")).meta.status == "incomplete"
        gate = _gate(store, "--require", "no-writes-outside-workspace")
        assert gate.returncode == 1 and "run-observed" in gate.stdout, gate.stdout + gate.stderr
    finally:
        other.kill()
        other.wait()


def test_benign_twin_a_run_that_ended_passes_the_same_requirement(tmp_path: Path, capture_backend: str) -> None:
    store = tmp_path / "store"
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "--backend", capture_backend, "--store", str(store), "--",
         PY, "-c", "open('out.txt', 'w').write('x')"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=False,
    )  # fmt: skip
    assert res.returncode == 0
    gate = _gate(store, "--require", "no-writes-outside-workspace")
    assert gate.returncode == 0 and "run-observed" not in gate.stdout, gate.stdout + gate.stderr
