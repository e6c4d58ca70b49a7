"""The capture names its own processes (``LaunchSpec.on_monitor``) before the events read after
them reach the fast lane (``urgent``): a rule about an attack on the monitor knows the tracer from
the run's first events.  Real processes under each backend (eBPF needs root)."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from spyglass.capture.base import LaunchSpec
from spyglass.events import Event


def _run(backend: str, tmp_path: Path, until_known: bool = False) -> tuple[list[tuple[int, ...]], list[int], Any]:
    """``until_known``: the command waits (60 s at most) until a monitor is named, so that a helper
    started on a thread of its own is started before the run ends however loaded the machine."""
    from spyglass.capture import get_backend

    known: list[int] = []
    lock = threading.Lock()
    at_urgent: list[tuple[int, ...]] = []  # what was known when each event reached the lane
    go = tmp_path / "go"

    def on_monitor(pids: Sequence[int]) -> None:
        with lock:
            known.extend(pids)
        go.touch()

    def urgent(ev: Event) -> None:
        with lock:
            at_urgent.append(tuple(known))

    wait = "i=0; while [ ! -e go ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; " if until_known else ""
    spec = LaunchSpec(["/bin/sh", "-c", wait + "echo x > a.txt; cat a.txt > /dev/null"], str(tmp_path),
                      env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, urgent=urgent, on_monitor=on_monitor)
    with open(os.devnull, "w") as null:
        spec.stdio = (null.fileno(), null.fileno(), null.fileno())
        session = get_backend(backend).start(spec)
        list(session.events())
    return at_urgent, known, session


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
def test_strace_names_its_tracer_before_the_first_event_reaches_the_lane(tmp_path: Path) -> None:
    at_urgent, known, session = _run("strace", tmp_path)
    tracer = session.tracer_pid
    assert tracer is not None and tracer in known
    assert sorted(known) == sorted([tracer, *session.helper_pids])  # and its watchdog, once started
    assert at_urgent and all(tracer in seen for seen in at_urgent)


def test_ebpf_names_its_watchdog(tmp_path: Path) -> None:
    """spyglass itself is the eBPF tracer (known from the start); its watchdog is named as soon as
    it is started, from the thread that starts it."""
    from tests.capture.ebpf.ebpf_helpers import ebpf_skip_reason

    why = ebpf_skip_reason()
    if why is not None:
        pytest.skip(why)
    at_urgent, known, session = _run("ebpf", tmp_path, until_known=True)
    helpers = session.helper_pids
    assert helpers and known == helpers
    assert at_urgent
