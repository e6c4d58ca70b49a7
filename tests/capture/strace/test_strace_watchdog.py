"""The strace watchdog after spyglass died: the signals sent to spyglass found in strace's lines, and
strace found by its FIFO when spyglass died before naming the command (the live attacks are
tests/capture/test_monitor_death.py); and its judgement of a stopped spyglass under a real strace."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spyglass.capture.strace.watchdog import (
    PROCFS,
    _job_stopped,
    _monitor_alone_stopped,
    _procfs,
    _signals,
    lost,
    traced_by,
    tracer_of,
    waits_on_fifo,
    writer_of,
)


def test_signals_to_spyglass_are_found_whatever_the_pid_padding() -> None:
    lines = [
        "9084  1796269409.604714 ioctl(3</x/agent.pid>, TCGETS, 0x7fff656f05c0) = -1 ENOTTY",
        "9084  1796269409.604939 kill(9057, SIGKILL) = 0",
        "12345 1796269409.604940 tgkill(9057, 9058, SIGSTOP) = 0",
        "12346 1796269409.604941 kill(-9057, SIGTERM) = 0",
        "12347 1796269409.604942 kill(4242, SIGKILL) = 0",
        "9084  1796269409.626085 +++ killed by SIGKILL +++",
    ]
    assert [(s["detail"], s["process.pid"], s["syscall"]) for s in _signals(lines, 9057)] == [
        ("SIGKILL", 9084, "kill"), ("SIGSTOP", 12345, "tgkill"), ("SIGTERM", 12346, "kill"),
    ]


def test_spyglass_dead_before_it_named_the_command_the_watchdog_finds_strace_by_the_fifo(tmp_path: Path) -> None:
    """The watchdog exists before the command starts and learns the command's pid from a ``root``
    line.  spyglass killed before it sent one: the watchdog finds the strace that writes into its
    FIFO and kills what that strace traces.  A real strace here, tracing a long sleep; the watchdog's
    ``lost`` is called as its script calls it (no ``root``, no ``tracer``; spyglass's pid is this
    test's, which is alive, so nothing of ours is killed by mistake)."""
    if shutil.which("strace") is None:
        pytest.skip("strace not installed")
    fifo = tmp_path / "strace.fifo"
    os.mkfifo(fifo, 0o600)
    rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    tracer = subprocess.Popen(["strace", "-f", "-o", str(fifo), "sleep", "60"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not _sleeping(tracer.pid) and time.monotonic() < deadline:  # the sleep runs, traced
            time.sleep(0.05)
        (sleeper,) = traced_by(tracer.pid)
        assert writer_of(rfd) == tracer.pid
        PROCFS.update(_procfs())
        note = tmp_path / "monitor-lost.json"
        lost({"monitor": os.getpid(), "fifo": rfd, "root": 0, "note": str(note)})
        body = json.loads(note.read_text())
        assert body["final"] and body["tracer_pid"] == tracer.pid, body
        assert body["killed"] == [sleeper], body
        assert tracer.wait(timeout=60) is not None  # left with no tracee, strace exits
    finally:
        if tracer.poll() is None:
            tracer.kill()
            tracer.wait()
        os.close(rfd)


def _sleeping(tracer: int) -> bool:
    """strace traces the command, exec'd (strace's own probes at its start are traced children too,
    before it opens its output: under load a test that waited for any tracee found no FIFO open)."""
    for pid in traced_by(tracer):
        try:
            with open(f"/proc/{pid}/comm", "rb") as f:
                if f.read().strip() == b"sleep":
                    return True
        except OSError:
            continue
    return False


def test_benign_twin_no_strace_on_the_fifo_finds_nothing(tmp_path: Path) -> None:
    """A FIFO that only a plain writer (not strace) holds: no tracer, so nothing to kill."""
    fifo = tmp_path / "plain.fifo"
    os.mkfifo(fifo, 0o600)
    rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer = subprocess.Popen(["sh", "-c", f"exec sleep 60 > {fifo}"], start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(
            os.path.realpath(f"/proc/{writer.pid}/fd/{e}") == str(fifo) for e in os.listdir(f"/proc/{writer.pid}/fd")
        ):
            time.sleep(0.05)
        assert writer_of(rfd) == 0
    finally:
        writer.kill()
        writer.wait()
        os.close(rfd)


#: a traced root that keeps making traced calls (openat), a few a second
BUSY = "import os, time\nwhile True:\n    os.close(os.open('/dev/null', os.O_RDONLY))\n    time.sleep(0.01)\n"


class _Traced:
    """A real strace (``-DD``, as spyglass runs it) writing into a FIFO whose read end the test holds,
    tracing a busy root; ``drain`` keeps the FIFO read as a running spyglass does."""

    def __init__(self, tmp_path: Path, drain: bool) -> None:
        fifo = tmp_path / "strace.fifo"
        os.mkfifo(fifo, 0o600)
        self.rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.root = subprocess.Popen(
            ["strace", "-f", "-DD", "--seccomp-bpf", "-e", "trace=openat", "-o", str(fifo), sys.executable, "-c", BUSY],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        self._stop = threading.Event()
        self._busy = threading.Event()  # the root's loop runs (strace's start-up stops are over)
        self._reader = threading.Thread(target=self._drain, daemon=True) if drain else None
        if self._reader is not None:
            self._reader.start()
            _until(self._busy.is_set)
        self.tracer = _until(lambda: tracer_of(self.root.pid) or None)

    def _drain(self) -> None:
        seen = b""
        while not self._stop.is_set():
            select.select([self.rfd], [], [], 0.05)
            try:
                seen = (seen + os.read(self.rfd, 1 << 16))[-4096:]
            except BlockingIOError:
                pass
            if seen.count(b'"/dev/null"') >= 2:
                self._busy.set()

    def close(self) -> None:
        self._stop.set()
        for pid in (self.root.pid, self.tracer):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.root.wait()
        if self._reader is not None:
            self._reader.join()
        os.close(self.rfd)


def _until(check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < deadline, "not within a minute"
        time.sleep(0.02)
    return got


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[_Traced]:
    if shutil.which("strace") is None:
        pytest.skip("strace not installed")
    t = _Traced(tmp_path, drain=True)
    yield t
    t.close()


def test_a_root_waiting_for_strace_on_the_full_fifo_is_no_job_control(tmp_path: Path) -> None:
    """spyglass stopped reads nothing: strace fills the FIFO and waits to write, and the root waits
    for strace in a ptrace stop (``t``), as a root in a Ctrl-Z's group stop does.  Taken for job
    control, an agent that stopped spyglass and went on until the FIFO was full would keep it
    stopped for good."""
    if shutil.which("strace") is None:
        pytest.skip("strace not installed")
    t = _Traced(tmp_path, drain=False)
    try:
        _until(lambda: waits_on_fifo(t.tracer, t.rfd))
        _until(lambda: PROCFS["state"](t.root.pid) == b"t")
        assert not _job_stopped(t.root.pid, t.tracer, t.rfd)
        # the twin: a Ctrl-Z now (spyglass was that far behind when it came) reaches the root as a
        # stop it cannot take while strace holds it: pending, and job control
        os.kill(t.root.pid, signal.SIGTSTP)
        _until(lambda: PROCFS["stop_pending"](t.root.pid))
        assert waits_on_fifo(t.tracer, t.rfd) and PROCFS["state"](t.root.pid) == b"t"
        assert _job_stopped(t.root.pid, t.tracer, t.rfd)
    finally:
        t.close()


def test_benign_twin_a_group_stop_of_the_traced_root_is_job_control(traced: _Traced) -> None:
    """A Ctrl-Z stops spyglass's group (the root), not strace's: strace holds the root in a group
    stop while it runs on and the FIFO is read."""
    os.kill(traced.root.pid, signal.SIGSTOP)
    _until(lambda: PROCFS["state"](traced.root.pid) == b"t")
    time.sleep(0.3)  # strace has long written the stop's line
    assert not waits_on_fifo(traced.tracer, traced.rfd)
    assert _job_stopped(traced.root.pid, traced.tracer, traced.rfd)


def test_a_root_held_by_a_stopped_strace_is_no_job_control(traced: _Traced) -> None:
    """A Ctrl-Z never reaches strace's group: strace stopped (by the run) holds the root in ``t``."""
    os.kill(traced.tracer, signal.SIGSTOP)
    _until(lambda: PROCFS["state"](traced.tracer) == b"T")
    _until(lambda: PROCFS["state"](traced.root.pid) == b"t")  # at its next traced call
    assert not _job_stopped(traced.root.pid, traced.tracer, traced.rfd)
    os.kill(traced.tracer, signal.SIGCONT)


def test_spyglass_stopped_alone_is_found_and_with_its_group_it_is_not(traced: _Traced) -> None:
    """The watchdog's judgement on a stand-in for spyglass, stopped: the traced root running is an
    attack; the root in its group stop (the twin) is job control."""
    monitor = subprocess.Popen(["sleep", "60"])
    try:
        os.kill(monitor.pid, signal.SIGSTOP)
        _until(lambda: PROCFS["state"](monitor.pid) == b"T")
        cfg = {"monitor": monitor.pid, "fifo": traced.rfd, "tracer": traced.tracer}
        # (a look can find the root in the moment strace takes one of its calls: the watchdog looks again)
        _until(lambda: _monitor_alone_stopped(cfg, traced.root.pid))
        os.kill(traced.root.pid, signal.SIGSTOP)
        _until(lambda: PROCFS["state"](traced.root.pid) == b"t")
        time.sleep(0.3)
        assert not _monitor_alone_stopped(cfg, traced.root.pid)
    finally:
        monitor.kill()
        monitor.wait()
