"""Fixtures for the capture tests."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

Start = Callable[[list[str]], "subprocess.Popen[bytes]"]


@pytest.fixture
def start_until_ready(tmp_path: Path) -> Iterator[Start]:
    """``start_until_ready(argv)``: starts ``argv`` (a `spyglass run` whose agent touches ``ready``)
    in ``tmp_path``, in a session of its own (no terminal), its stderr in ``err.txt``, and returns it
    once ``ready`` exists.  A run that ends or never gets there fails the test with its stderr; one
    still running at the end of the test is killed with its process group."""
    started: list[subprocess.Popen[bytes]] = []

    def start(argv: list[str]) -> subprocess.Popen[bytes]:
        err = tmp_path / "err.txt"
        with open(err, "w") as f:
            proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=f, start_new_session=True)
        started.append(proc)
        end = time.monotonic() + 120
        while not (tmp_path / "ready").exists():
            assert time.monotonic() < end and proc.poll() is None, err.read_text()
            time.sleep(0.05)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait(timeout=30)
