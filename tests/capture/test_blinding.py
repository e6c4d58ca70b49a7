"""The recorder must not be blinded: real agents attack it under each backend; each attack is
recorded and alerted, and the run is never `complete` while processes went unobserved.  A benign
twin signalling its own children stays silent.

Under strace the monitor is the strace process; under eBPF the kernel records and spyglass itself
reads the rings, with a watchdog process beside it (spyglass/capture/ebpf/watchdog.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from spyglass.store import RunReader, Store

PROG = Path(__file__).resolve().parent / "progs" / "blind.py"
PY = os.path.realpath(sys.executable)


def _run(tmp_path: Path, backend: str, mode: str) -> tuple[subprocess.CompletedProcess[str], RunReader, int]:
    store = tmp_path / "store"
    pidfile = tmp_path / "agent.pid"
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "--backend", backend, "--store", str(store), "--", PY, str(PROG),
         mode, str(pidfile)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        start_new_session=True,  # a job of its own, as a shell starts it: killpg() reaches no test runner
    )
    if res.returncode == -9:  # spyglass itself was killed: its watchdog finishes its note first
        _final_note(store)
    s = Store(store)
    s.repair()  # what the next spyglass command does: a run whose spyglass died is marked
    return res, RunReader(s, s.resolve("latest")), int(pidfile.read_text())


def _final_note(store: Path, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for note in store.glob("runs/*/monitor-lost.json"):
            try:
                if json.loads(note.read_text()).get("final"):
                    return
            except ValueError:
                pass
        time.sleep(0.1)


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


def _spyglass(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spyglass", *args, "--store", str(tmp_path / "store"), "latest"],
                          capture_output=True, text=True, timeout=120, check=False)


def test_sigint_to_the_monitor_by_pidfd_or_killpg_never_leaves_a_blind_run(tmp_path: Path, capture_backend: str
                                                                           ) -> None:
    """strace: SIGINT ends the tracer, so the run is monitor-lost, verify fails it and the tree is killed.
    eBPF: SIGINT reaches spyglass itself, which takes it as an interrupt and goes on recording: the tree
    is stopped and the run is interrupted.  Either way the signal is a critical alert."""
    for mode in ("pidfd-sigint", "killpg-sigint"):
        sub = tmp_path / mode
        sub.mkdir()
        res, reader, pid = _run(sub, capture_backend, mode)
        rules = _rules(reader)
        assert "evasion-kill-monitor" in rules, (mode, res.stderr)
        assert _gone(pid), f"{mode}: the agent was left running"
        if capture_backend == "strace":
            assert reader.meta.status == "monitor-lost" and "evasion-monitor-lost" in rules, (mode, res.stderr)
            verify = _spyglass(sub, "verify")
            assert verify.returncode != 0 and "monitor" in (verify.stdout + verify.stderr)
        else:
            assert reader.meta.status == "interrupted", (mode, res.stderr)


def test_spyglass_killed_by_the_agent_is_monitor_lost_and_the_tree_dies(tmp_path: Path, capture_backend: str) -> None:
    """kill -9 of the monitor: the run is monitor-lost (verify and gate fail it) and the agent dies.
    Under strace the SIGKILL ends strace before it prints the call; under eBPF the watchdog kills the
    tree and notes the SIGKILL and its sender (read from the rings after spyglass died)."""
    res, reader, pid = _run(tmp_path, capture_backend, "kill9")
    assert reader.meta.status == "monitor-lost", res.stderr
    assert "evasion-monitor-lost" in _rules(reader) or capture_backend == "ebpf"  # eBPF: in the note
    assert _gone(pid), "the agent was left running after its monitor died"
    verify = _spyglass(tmp_path, "verify")
    assert verify.returncode != 0 and "monitor" in (verify.stdout + verify.stderr)
    gate = _spyglass(tmp_path, "gate")
    assert gate.returncode != 0 and "tracer was lost" in gate.stdout + gate.stderr
    if capture_backend == "ebpf":
        assert res.returncode == -9  # spyglass itself was the target
        lost = reader.meta.extra["monitor_lost"]
        assert [(s["detail"], s["process.pid"]) for s in lost["signals"]] == [("SIGKILL", pid)], lost
        assert pid in lost["killed"] and f"from pid {pid}" in lost["detail"]
        show = _spyglass(tmp_path, "show")
        assert "watchdog" in show.stdout, show.stdout


def test_killing_the_monitors_helpers_is_critical(tmp_path: Path, capture_backend: str) -> None:
    """SIGKILL to every other child of spyglass: strace (then monitor-lost) or the eBPF watchdog."""
    res, reader, pid = _run(tmp_path, capture_backend, "kill-helpers")
    assert _gone(pid) or capture_backend == "ebpf"
    rules = _rules(reader)
    if capture_backend == "strace":
        assert reader.meta.status == "monitor-lost" and "evasion-monitor-lost" in rules, res.stderr
    else:
        assert "evasion-kill-monitor" in rules, res.stderr
        assert any(n.startswith("monitor-helper-lost:") for n in reader.meta.capture["notes"])


def test_reading_the_monitors_memory_and_descriptors_is_critical(tmp_path: Path, capture_backend: str) -> None:
    res, reader, _ = _run(tmp_path, capture_backend, "peek")
    rules = _rules(reader)
    assert {"evasion-kill-monitor", "sys-process-memory", "sys-pidfd-getfd"} <= rules, (rules, res.stderr)


def test_opening_the_monitor_through_proc_is_critical(tmp_path: Path, capture_backend: str) -> None:
    """/proc/<monitor>/mem opened for writing, a descriptor reopened through /proc/<monitor>/fd/0 and
    the memory of one of its threads: each reaches as far as ptrace, so each is evasion-kill-monitor."""
    for mode in ("proc-mem", "proc-fd", "proc-thread"):
        sub = tmp_path / mode
        sub.mkdir()
        res, reader, _ = _run(sub, capture_backend, mode)
        hits = [a for a in reader.alerts() if a.rule_id == "evasion-kill-monitor"]
        assert hits and hits[0].level == "critical" and hits[0].action == "kill", (mode, _rules(reader), res.stderr)


def test_benign_twin_reading_the_monitors_status_and_its_own_memory_stays_silent(tmp_path: Path,
                                                                                 capture_backend: str) -> None:
    res, reader, _ = _run(tmp_path, capture_backend, "proc-look")
    assert res.returncode == 0, res.stderr
    assert "evasion-kill-monitor" not in _rules(reader), res.stderr


@pytest.mark.backends("ebpf")
def test_a_process_deleted_from_the_ebpf_table_is_put_back_and_reported(tmp_path: Path, capture_backend: str) -> None:
    """A root agent deletes its own pid from the program's ``tracked`` map (bpftool): spyglass notices,
    raises a critical alert, puts it back, and what it does afterwards is recorded again."""
    if shutil.which("bpftool") is None:
        pytest.skip("bpftool not installed (apt-get install bpftool)")
    res, reader, pid = _run(tmp_path, capture_backend, "untrack")
    alerts = [a for a in reader.alerts() if a.rule_id == "evasion-monitor-lost"]
    assert alerts and alerts[0].level == "critical" and "monitor-untracked" in alerts[0].message, res.stderr
    assert "evasion-bpf-object-grab" in _rules(reader)
    after = str(tmp_path / "agent.pid.after")
    assert any(e.path == after and e.pid == pid for e in reader.events()), "recorded again once put back"


@pytest.mark.backends("ebpf")
def test_benign_twin_short_lived_children_are_never_missing(tmp_path: Path, capture_backend: str) -> None:
    res, reader, _ = _run(tmp_path, capture_backend, "short-lived")
    assert res.returncode == 0, res.stderr
    assert "evasion-monitor-lost" not in _rules(reader), res.stderr


def test_stopped_monitor_is_resumed_and_reported(tmp_path: Path, capture_backend: str) -> None:
    res, reader, _ = _run(tmp_path, capture_backend, "sigstop")
    assert res.returncode == 0, res.stderr
    rules = _rules(reader)
    assert "evasion-kill-monitor" in rules and "evasion-monitor-lost" in rules
    assert any((e.detail or "").startswith("monitor-stopped:") for e in reader.events())


def test_spyglass_stopped_by_the_agent_is_resumed_by_its_watchdog(tmp_path: Path, capture_backend: str) -> None:
    """The agent stops spyglass itself (not strace) and works on: the watchdog finds it stopped
    alone and resumes it.  Under strace nothing else would: spyglass, stopped, judges nothing (a
    kill rule's verdict waits) while strace writes on until the FIFO is full, and then the run
    hangs for good; this run used to end only at the test's timeout."""
    res, reader, _ = _run(tmp_path, capture_backend, "sigstop-spyglass")
    assert res.returncode == 0, res.stderr
    assert reader.meta.status == "complete", res.stderr
    assert "evasion-kill-monitor" in _rules(reader), res.stderr
    stopped = [e for e in reader.events() if (e.detail or "").startswith("monitor-stopped: spyglass (pid")]
    assert stopped and "resumed by its watchdog" in (stopped[0].detail or ""), res.stderr


@pytest.mark.backends("strace")
def test_spyglass_and_strace_stopped_by_the_agent_are_both_resumed(tmp_path: Path, capture_backend: str) -> None:
    """Stopped, spyglass cannot resume strace, and strace stopped holds the agent in a ptrace stop
    that looks like a Ctrl-Z's group stop; but a Ctrl-Z never reaches strace (a group of its own):
    the watchdog resumes spyglass, which resumes strace."""
    res, reader, _ = _run(tmp_path, capture_backend, "sigstop-both")
    assert res.returncode == 0, res.stderr
    details = [e.detail or "" for e in reader.events()]
    assert any(d.startswith("monitor-stopped: spyglass (pid") for d in details), res.stderr
    assert any(d.startswith("monitor-stopped: the tracer") for d in details), res.stderr
    assert "evasion-kill-monitor" in _rules(reader)


def test_benign_twin_a_ctrl_z_of_the_whole_job_is_not_an_attack(
    tmp_path: Path, capture_backend: str, start_until_ready: Any
) -> None:
    """Stopping spyglass's whole process group (as Ctrl-Z does; SIGSTOP here, since a group without a
    terminal ignores SIGTSTP) stops spyglass and the agent alike: job control, left alone (nothing
    resumes spyglass behind the operator's back, no alert)."""
    import signal

    store = tmp_path / "store"
    script = "touch ready; until [ -e go ]; do sleep 0.05; done"
    argv = [sys.executable, "-m", "spyglass", "run", "--backend", capture_backend, "--store", str(store), "--",
            "sh", "-c", script]
    proc = start_until_ready(argv)
    os.killpg(proc.pid, signal.SIGSTOP)
    time.sleep(0.5)  # the watchdog looks every 0.1 s: time to (wrongly) step in
    os.killpg(proc.pid, signal.SIGCONT)
    (tmp_path / "go").touch()
    assert proc.wait(timeout=120) == 0
    s = Store(store)
    reader = RunReader(s, s.resolve("latest"))
    assert reader.meta.status == "complete"
    assert not any((e.detail or "").startswith("monitor-stopped:") for e in reader.events())
    assert not {a.level for a in reader.alerts()} & {"medium", "high", "critical"}


def test_untraced_child_is_never_unobserved(tmp_path: Path, capture_backend: str) -> None:
    """strace cannot follow a CLONE_UNTRACED child: it is killed and reported.  The eBPF program
    follows every child from the fork tracepoint: the hidden child's work is recorded."""
    if capture_backend == "strace":
        res, reader, _ = _run(tmp_path, capture_backend, "untraced")
        assert "evasion-untraced-child" in _rules(reader), res.stderr
        ev = [e for e in reader.events() if (e.detail or "").startswith("CLONE_UNTRACED")]
        assert ev and ev[0].target_pid is not None and "killed" in (ev[0].detail or "")
        assert _gone(ev[0].target_pid)  # the agent's waitpid() returned: the hidden child is dead
    else:
        res, reader, pid = _run(tmp_path, capture_backend, "untraced-work")
        child = int((tmp_path / "agent.pid.child").read_text())
        starts = [e for e in reader.events() if e.type == "process.start" and e.pid == child]
        assert starts and starts[0].ppid == pid, res.stderr
        made = [e for e in reader.events() if e.type == "file.create" and e.pid == child]
        assert [e.path for e in made] == [str(tmp_path / "agent.pid.child")]
    assert reader.meta.status == "complete" and res.returncode == 0


def test_signals_to_the_agents_own_children_stay_silent(tmp_path: Path, capture_backend: str) -> None:
    res, reader, _ = _run(tmp_path, capture_backend, "benign")
    assert res.returncode == 0, res.stderr
    assert reader.meta.status == "complete"
    levels = {a.level for a in reader.alerts()}
    assert not levels & {"medium", "high", "critical"}, [(a.rule_id, a.message) for a in reader.alerts()]


def test_timeout_signalling_its_own_group_is_not_an_attack(tmp_path: Path, capture_backend: str) -> None:
    store = tmp_path / "store"
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "--backend", capture_backend, "--store", str(store), "--", "timeout",
         "0.5", "sleep", "30"],
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
