"""Processes that outlive the agent: recorded for a grace period, then killed, followed, or detached
with a high alert naming them.  Real processes under each real backend (strace, eBPF)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from spyglass.store import RunReader, Store

# the agent leaves a daemon behind: a sleep with an argument no other test uses, its pid in a file,
# its output away from the test's pipes (which would otherwise stay open until it exits); the agent
# exits once the daemon runs its program (a detach before the daemon's exec would leave the exec itself
# to fail with ENOSYS under strace's seccomp filter: the very breakage the alert names)
DAEMON = (
    "sleep 47.25 </dev/null >/dev/null 2>&1 & echo $! > daemon.pid; "
    "until grep -qs 47.25 /proc/$!/cmdline; do :; done; exit 0"
)


#: a setsid, double-forked daemon: reparented away from the agent, in a session of its own
SETSID_DAEMON = (
    "(setsid sh -c 'echo $$ > daemon.pid; exec sleep 47.5' </dev/null >/dev/null 2>&1 &); "
    "until grep -qs 47.5 /proc/$(cat daemon.pid 2>/dev/null || echo 0)/cmdline; do :; done; exit 0"
)


def _run(tmp_path: Path, backend: str, *opts: str, script: str = DAEMON
         ) -> tuple[subprocess.CompletedProcess[str], RunReader]:
    res = _cli(tmp_path, backend, *opts, script=script)
    s = Store(tmp_path / "store")
    return res, RunReader(s, s.resolve("latest"))


def _cli(tmp_path: Path, backend: str, *opts: str, script: str) -> subprocess.CompletedProcess[str]:
    """``spyglass run``; its output through files, not pipes: with ``follow`` a recorder (and strace)
    may hold spyglass's stdio after ``run`` has returned, as a terminal would be held."""
    store = tmp_path / "store"
    argv = [sys.executable, "-m", "spyglass", "run", "--backend", backend, "--store", str(store), *opts, "--",
            "sh", "-c", script]
    with open(tmp_path / "out.txt", "w+") as out, open(tmp_path / "err.txt", "w+") as err:
        proc = subprocess.run(argv, cwd=tmp_path, stdout=out, stderr=err, text=True, timeout=180, check=False)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(argv, proc.returncode, out.read(), err.read())


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


def test_detach_leaves_it_running_with_a_high_alert_naming_it(tmp_path: Path, capture_backend: str) -> None:
    # without strace's seccomp filter a detached process keeps working as it was
    res, reader = _run(tmp_path, capture_backend, "--wait-descendants", "0.3", "--descendants", "detach",
                       "--no-seccomp")
    pid = _daemon(tmp_path)
    try:
        assert _alive(pid), res.stderr
        alerts = [a for a in reader.alerts() if a.rule_id == "proc-outlived-run"]
        assert len(alerts) == 1 and alerts[0].level == "high"
        assert str(pid) in alerts[0].message and "sleep 47.25" in alerts[0].message
        assert [s["pid"] for s in reader.meta.still_running] == [pid]
    finally:
        _cleanup(pid)


def test_detach_is_the_default_when_observing_and_says_what_stays_in_it(tmp_path: Path, capture_backend: str) -> None:
    # strace: with the filter left in it, the process may break (its traced calls get ENOSYS): the user
    # is told.  eBPF: nothing was ever put in it
    _, reader = _run(tmp_path, capture_backend, "--wait-descendants", "0.3")
    pid = _daemon(tmp_path)
    try:
        alerts = [a for a in reader.alerts() if a.rule_id == "proc-outlived-run"]
        assert len(alerts) == 1
        if capture_backend == "strace":
            assert "ENOSYS" in alerts[0].message
        else:
            assert "nothing of spyglass stays inside it" in alerts[0].message and _alive(pid)
    finally:
        _cleanup(pid)


def test_kill_ends_the_tree_with_the_run(tmp_path: Path, capture_backend: str) -> None:
    res, reader = _run(tmp_path, capture_backend, "--wait-descendants", "0.3", "--descendants", "kill")
    pid = _daemon(tmp_path)
    assert _gone(pid), "the daemon outlived a run with descendants: kill"
    assert res.returncode == 0, res.stderr
    assert reader.meta.still_running == [] and reader.meta.status == "complete"
    assert "proc-outlived-run" not in {a.rule_id for a in reader.alerts()}
    exits = [e for e in reader.events() if e.type == "process.exit" and e.pid == pid]
    assert exits and exits[0].signal == "SIGKILL"
    assert any("killed 1 process" in n for n in reader.meta.capture["notes"])


def test_a_setsid_double_forked_daemon_is_still_in_the_tree(tmp_path: Path, capture_backend: str) -> None:
    """Reparented and in a session of its own, it is still the run's: killed with ``kill``."""
    res, reader = _run(tmp_path, capture_backend, "--wait-descendants", "0.3", "--descendants", "kill",
                       script=SETSID_DAEMON)
    pid = _daemon(tmp_path)
    try:
        assert _gone(pid), "the setsid daemon outlived a run with descendants: kill"
        assert res.returncode == 0, res.stderr
        exits = [e for e in reader.events() if e.type == "process.exit" and e.pid == pid]
        assert exits and exits[0].signal == "SIGKILL"
        assert reader.meta.still_running == [] and reader.meta.status == "complete"
    finally:
        _cleanup(pid)


def test_follow_records_the_daemon_until_it_exits(tmp_path: Path, capture_backend: str) -> None:
    script = "(sleep 0.5; echo late > late.txt) & exit 0"
    res, reader = _run(tmp_path, capture_backend, "--wait-descendants", "0", "--descendants", "follow",
                       "--wait-for-tree", script=script)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "late.txt").exists()
    writes = [e for e in reader.events() if e.type == "file.create" and (e.path or "").endswith("/late.txt")]
    assert writes, "the write after the agent's exit was recorded"
    assert reader.meta.still_running == [] and not list(reader.alerts())


def _meta(store: Path) -> dict[str, object]:
    runs = sorted(store.glob("runs/*/run.json"))
    assert len(runs) == 1
    data: dict[str, object] = json.loads(runs[0].read_text())
    return data


def test_follow_returns_when_the_agent_exits_and_records_the_rest(tmp_path: Path, capture_backend: str) -> None:
    """``run`` gives the prompt back at the agent's exit; a recorder in the background follows what it
    left (here a process waiting for the test's go-ahead, so the order is certain) and completes the run."""
    script = "(until [ -e go ]; do sleep 0.05; done; echo late > late.txt) </dev/null >/dev/null 2>&1 & exit 3"
    res = _cli(tmp_path, capture_backend, "--wait-descendants", "0", "--descendants", "follow", script=script)
    assert res.returncode == 3, res.stderr  # the agent's own code
    assert "still recording" in res.stderr
    store = tmp_path / "store"
    meta = _meta(store)
    assert meta["status"] == "running" and not (tmp_path / "late.txt").exists()
    show = subprocess.run([sys.executable, "-m", "spyglass", "show", "--store", str(store), "latest"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert "still recording" in show.stdout, show.stdout
    (tmp_path / "go").touch()
    end = time.monotonic() + 120
    while _meta(store)["status"] == "running" and time.monotonic() < end:
        time.sleep(0.1)
    s = Store(store)
    reader = RunReader(s, s.resolve("latest"))
    assert reader.meta.status == "complete" and reader.meta.exit_code == 3
    late = [e for e in reader.events() if e.type == "file.create" and (e.path or "").endswith("/late.txt")]
    assert late, "the write after the agent's exit was recorded"
    assert any(str(n).startswith("followed ") for n in reader.meta.capture["notes"]), reader.meta.capture
    assert reader.meta.still_running == []


def test_follow_passes_a_sigterm_to_run_on_to_the_agent(
    tmp_path: Path, capture_backend: str, start_until_ready: Any
) -> None:
    """``run`` waits for its recorder in follow mode: a SIGTERM sent to it still stops the agent."""
    script = "trap 'echo TERM > got; exit 3' TERM; touch ready; while :; do sleep 0.1; done"
    argv = [sys.executable, "-m", "spyglass", "run", "--backend", capture_backend, "--store", str(tmp_path / "store"),
            "--descendants", "follow", "--", "sh", "-c", script]
    proc = start_until_ready(argv)
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        _cleanup(proc.pid)
    assert (tmp_path / "got").read_text().strip() == "TERM"
    s = Store(tmp_path / "store")
    assert RunReader(s, s.resolve("latest")).meta.status == "interrupted"


def test_benign_twin_follow_with_nothing_left_is_a_plain_run(tmp_path: Path, capture_backend: str) -> None:
    res, reader = _run(tmp_path, capture_backend, "--descendants", "follow", script="echo hi > a.txt; exit 4")
    assert res.returncode == 4 and "still recording" not in res.stderr
    assert reader.meta.status == "complete" and not list(reader.alerts())


def test_children_that_finish_within_the_grace_period_stay_silent(tmp_path: Path, capture_backend: str) -> None:
    script = "(sleep 0.2; echo done > done.txt) & exit 0"
    res, reader = _run(tmp_path, capture_backend, "--wait-descendants", "60", "--descendants", "kill", script=script)
    assert res.returncode == 0 and (tmp_path / "done.txt").exists()
    assert reader.meta.still_running == [] and not list(reader.alerts())
    assert not any("killed" in n for n in reader.meta.capture["notes"])
