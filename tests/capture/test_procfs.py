"""The /proc readers shared by the backends, the sandbox and the run core, on real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from spyglass.capture import procfs

TREE = "import subprocess, sys; p = subprocess.Popen(['sleep', '60']); print(p.pid, flush=True); sys.stdin.read()"


def test_state_and_running_of_live_stopped_zombie_and_gone_processes() -> None:
    assert procfs.state(os.getpid()) == b"R" and procfs.running(os.getpid())
    proc = subprocess.Popen(["sleep", "60"])
    try:
        os.kill(proc.pid, 19)  # SIGSTOP
        deadline = time.monotonic() + 30
        while procfs.state(proc.pid) != b"T":
            assert time.monotonic() < deadline, procfs.state(proc.pid)
            time.sleep(0.01)
        proc.kill()
        while procfs.state(proc.pid) != b"Z":  # not yet waited for
            assert time.monotonic() < deadline, procfs.state(proc.pid)
            time.sleep(0.01)
        assert not procfs.running(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert procfs.state(proc.pid) == b"" and not procfs.running(proc.pid)


def test_descendants_are_the_whole_live_tree_parents_first() -> None:
    proc = subprocess.Popen([sys.executable, "-c", TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        grandchild = int(proc.stdout.readline())
        found = procfs.descendants(os.getpid())
        assert found.index(proc.pid) < found.index(grandchild)
        assert procfs.descendants(grandchild) == []
    finally:
        os.kill(grandchild, 9)
        proc.kill()
        proc.wait()
    assert procfs.descendants(2**22 + 12345) == []  # no such process
