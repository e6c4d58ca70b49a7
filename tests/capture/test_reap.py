"""Waiting for a child's exit by pidfd: its status at once, None on timeout, and a thread that reaps it first."""

from __future__ import annotations

import subprocess
import threading

from spyglass.capture.reap import wait_exit


def test_the_status_of_a_child_that_exits() -> None:
    proc = subprocess.Popen(["sh", "-c", "exit 3"])
    assert wait_exit(proc, 30) == 3
    assert wait_exit(proc, 30) == 3  # reaped already: the same answer


def test_none_while_it_runs() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert wait_exit(proc, 0.05) is None
    finally:
        proc.kill()
    assert wait_exit(proc, 30) == -9


def test_another_thread_reaping_it_meanwhile() -> None:
    proc = subprocess.Popen(["sh", "-c", "read x; exit 4"], stdin=subprocess.PIPE)
    reaper = threading.Thread(target=proc.wait)
    reaper.start()
    assert proc.stdin is not None
    proc.stdin.close()  # EOF: it exits
    assert wait_exit(proc, 30) == 4
    reaper.join(30)
    assert not reaper.is_alive()
