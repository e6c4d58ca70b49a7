"""The strace watchdog after spyglass died: the signals sent to spyglass found in strace's lines, and
strace found by its FIFO when spyglass died before naming the command (the live attacks are
tests/capture/test_monitor_death.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from spyglass.capture.strace.watchdog import PROCFS, _procfs, _signals, lost, traced_by, writer_of


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
