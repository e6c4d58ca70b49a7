"""Processes that outlive the agent: recorded for a grace period, then killed, followed, or detached
with a high alert naming them.  Real processes under real strace."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spyglass.store import RunReader, Store

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")

# the agent leaves a daemon behind: a sleep with an argument no other test uses, its pid in a file,
# its output away from the test's pipes (which would otherwise stay open until it exits); the agent
# exits once the daemon runs its program (a detach before the daemon's exec would leave the exec itself
# to fail with ENOSYS under strace's seccomp filter: the very breakage the alert names)
DAEMON = (
    "sleep 47.25 </dev/null >/dev/null 2>&1 & echo $! > daemon.pid; "
    "until grep -qs 47.25 /proc/$!/cmdline; do :; done; exit 0"
)


def _run(tmp_path: Path, *opts: str, script: str = DAEMON) -> tuple[subprocess.CompletedProcess[str], RunReader]:
    store = tmp_path / "store"
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "--backend", "strace", "--store", str(store), *opts, "--", "sh", "-c",
         script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    s = Store(store)
    return res, RunReader(s, s.resolve("latest"))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in (b"Z", b"X")


def _gone(pid: int, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def _daemon(tmp_path: Path) -> int:
    return int((tmp_path / "daemon.pid").read_text())


def _cleanup(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def test_detach_leaves_it_running_with_a_high_alert_naming_it(tmp_path: Path) -> None:
    # without strace's seccomp filter a detached process keeps working as it was
    res, reader = _run(tmp_path, "--wait-descendants", "0.3", "--descendants", "detach", "--no-seccomp")
    pid = _daemon(tmp_path)
    try:
        assert _alive(pid), res.stderr
        alerts = [a for a in reader.alerts() if a.rule_id == "proc-outlived-run"]
        assert len(alerts) == 1 and alerts[0].level == "high"
        assert str(pid) in alerts[0].message and "sleep 47.25" in alerts[0].message
        assert [s["pid"] for s in reader.meta.still_running] == [pid]
    finally:
        _cleanup(pid)


def test_detach_is_the_default_when_observing_and_names_the_seccomp_filter(tmp_path: Path) -> None:
    # with the filter left in it, the process may break (its traced calls get ENOSYS): the user is told
    _, reader = _run(tmp_path, "--wait-descendants", "0.3")
    _cleanup(_daemon(tmp_path))
    alerts = [a for a in reader.alerts() if a.rule_id == "proc-outlived-run"]
    assert len(alerts) == 1 and "ENOSYS" in alerts[0].message


def test_kill_ends_the_tree_with_the_run(tmp_path: Path) -> None:
    res, reader = _run(tmp_path, "--wait-descendants", "0.3", "--descendants", "kill")
    pid = _daemon(tmp_path)
    assert _gone(pid), "the daemon outlived a run with descendants: kill"
    assert res.returncode == 0, res.stderr
    assert reader.meta.still_running == [] and reader.meta.status == "complete"
    assert "proc-outlived-run" not in {a.rule_id for a in reader.alerts()}
    exits = [e for e in reader.events() if e.type == "process.exit" and e.pid == pid]
    assert exits and exits[0].signal == "SIGKILL"
    assert any("killed 1 process" in n for n in reader.meta.capture["notes"])


def test_follow_records_the_daemon_until_it_exits(tmp_path: Path) -> None:
    script = "(sleep 0.5; echo late > late.txt) & exit 0"
    res, reader = _run(tmp_path, "--wait-descendants", "0", "--descendants", "follow", script=script)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "late.txt").exists()
    writes = [e for e in reader.events() if e.type == "file.create" and (e.path or "").endswith("/late.txt")]
    assert writes, "the write after the agent's exit was recorded"
    assert reader.meta.still_running == [] and not list(reader.alerts())


def test_children_that_finish_within_the_grace_period_stay_silent(tmp_path: Path) -> None:
    script = "(sleep 0.2; echo done > done.txt) & exit 0"
    res, reader = _run(tmp_path, "--wait-descendants", "60", "--descendants", "kill", script=script)
    assert res.returncode == 0 and (tmp_path / "done.txt").exists()
    assert reader.meta.still_running == [] and not list(reader.alerts())
    assert not any("killed" in n for n in reader.meta.capture["notes"])
