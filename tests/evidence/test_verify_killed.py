"""`verify` of a run whose spyglass was killed with SIGKILL: incomplete (exit 4), never "tampered";
`changes` of it says the run did not finish (one line, exit 2).

With the eBPF backend the capture's watchdog outlives spyglass, kills the run's processes and
leaves a note; the run reads as `monitor-lost` with no checkpoint.  That is an unfinished run,
as the README's exit codes say.  A run that finished and lost its checkpoint afterwards stays
tampered (exit 3).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.usefixtures("needs_ebpf"), pytest.mark.timeout(120)]


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ, HOME=str(tmp_path), LANG="C.UTF-8", NO_COLOR="1")
    env["SPYGLASS_STORE"] = str(tmp_path / "store")
    return env


def _spy(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spyglass", *args], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def _wait_for(path: Path) -> None:
    while not path.exists():
        time.sleep(0.05)


def _watchdog_of(pid: int) -> bool:
    """A child of ``pid`` runs the eBPF watchdog (spawned before the command starts: a kill at the
    agent's first step is tests/capture/test_monitor_death.py's; this test's subject starts later)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rpartition(b")")[2].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and any(a.endswith(b"/watchdog.py") for a in cmd):
            return True
    return False


def test_sigkilled_spyglass_leaves_an_incomplete_run(tmp_path: Path) -> None:
    env = _env(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    flag = ws / "started"
    p = subprocess.Popen(
        [sys.executable, "-m", "spyglass", "run", "--backend", "ebpf", "--", "sh", "-c",
         f"touch {flag}; exec sleep 60"],
        cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(flag)
        while not _watchdog_of(p.pid):  # (the test's subject is the run after the watchdog is up)
            time.sleep(0.05)
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.wait()
    (run_dir,) = (tmp_path / "store" / "runs").iterdir()
    _wait_for(run_dir / "monitor-lost.json")  # the watchdog noticed
    show = _spy(env, "show", "latest")
    assert show.returncode == 0 and "monitor-lost" in show.stdout, show.stderr
    res = _spy(env, "verify", "latest")
    assert res.returncode == 4, res.stdout + res.stderr
    assert "INCOMPLETE" in res.stdout and "TAMPERED" not in res.stdout
    assert "Traceback" not in res.stderr
    ch = _spy(env, "changes", "latest")
    assert ch.returncode == 2 and ch.stderr.count("\n") == 1, ch.stderr
    assert "no workspace manifest after the run (the run is monitor-lost)" in ch.stderr
    assert "did not finish" in ch.stderr


def test_finished_run_without_its_checkpoint_is_tampered(tmp_path: Path) -> None:
    env = _env(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    r = subprocess.run([sys.executable, "-m", "spyglass", "run", "--backend", "ebpf", "--", "true"], cwd=ws,
                       env=env, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    (run_dir,) = (tmp_path / "store" / "runs").iterdir()
    (run_dir / "evidence" / "checkpoint.json").unlink()
    res = _spy(env, "verify", "latest")
    assert res.returncode == 3 and "TAMPERED" in res.stdout, res.stdout + res.stderr
