"""A signal to spyglass reaches every live process of the tree, also one the pipeline has not seen yet."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from spyglass.events import Event
from spyglass.events.proctree import ProcessTable
from spyglass.session.record import _Signals

# the root starts a child that says which signal it got; the pipeline has seen only the root
CHILD = "trap 'echo TERM > got; exit 0' TERM; touch ready; while :; do sleep 0.1; done"


def test_a_child_the_pipeline_has_not_seen_gets_the_signal(tmp_path: Path) -> None:
    root = subprocess.Popen(["/bin/sh", "-c", f"/bin/sh -c \"{CHILD}\"; :"], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "ready").exists():
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.05)
        table = ProcessTable()
        table.update(Event(type="process.exec", ts=1, pid=root.pid, exe="/bin/sh", argv=["/bin/sh"]))
        _Signals(None, table)._forward(signal.SIGTERM)
        while not (tmp_path / "got").exists():
            assert time.monotonic() < deadline, "the child never got the signal"
            time.sleep(0.05)
        assert (tmp_path / "got").read_text() == "TERM\n"
        assert root.wait(timeout=60) == -signal.SIGTERM  # the root got it too
    finally:
        root.kill()
        root.wait()
