"""The program loads in the background before the backend is imported, and the run takes that load."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from spyglass.capture.base import LaunchSpec
from spyglass.capture.ebpf import preload
from spyglass.capture.ebpf.libbpf import BpfObject


@pytest.mark.usefixtures("need_ebpf")
def test_a_preload_is_taken_once_by_the_first_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spyglass.capture.ebpf.session import EbpfBackend

    assert preload.start()
    assert preload.start()  # one load at a time
    loads: list[int] = []
    real = preload.load_object
    monkeypatch.setattr(preload, "load_object", lambda ring, life: loads.append(1) or real(ring, life))
    monkeypatch.setattr("spyglass.capture.ebpf.session._load", preload.load_object)
    session = EbpfBackend().start(LaunchSpec(["/bin/true"], str(tmp_path)))
    events = list(session.events())
    assert loads == []  # the session attached the preloaded program
    assert session.result().exit_code == 0
    assert any(e.type == "process.exec" for e in events)
    assert preload.take() is None  # taken


@pytest.mark.usefixtures("need_ebpf")
def test_a_preload_is_not_taken_when_other_ring_sizes_are_asked(tmp_path: Path) -> None:
    from spyglass.capture.ebpf.session import EbpfBackend

    assert preload.start()
    session = EbpfBackend().start(LaunchSpec(["/bin/true"], str(tmp_path), options={"ring_bytes": 1 << 16}))
    list(session.events())
    assert session.result().exit_code == 0
    assert preload.take() is None  # the preload was taken, and closed
    obj = preload.load_object(preload.RING, preload.LIFE)
    assert isinstance(obj, BpfObject)
    obj.close()


def test_the_preload_module_and_the_package_are_light() -> None:
    """Starting the load needs neither the backend's decoder nor the strace parser."""
    code = ("import sys\nfrom spyglass.capture.ebpf import preload\n"
            "print(sorted(m for m in sys.modules if m.startswith('spyglass.capture.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert "spyglass.capture.ebpf.session" not in out.stdout
    assert "spyglass.capture.ebpf.decoder" not in out.stdout
    assert "spyglass.capture.strace" not in out.stdout


@pytest.mark.usefixtures("need_ebpf")
def test_a_forked_child_never_takes_the_parents_load() -> None:
    """A worker pool forked while a load waits (skill scan's workers) must load its own program:
    two children taking the parent's would share one tracked table and one launch slot."""
    import multiprocessing

    assert preload.start()
    try:
        deadline = time.monotonic() + 60
        while preload.pending() and time.monotonic() < deadline:  # the load done, waiting to be taken
            time.sleep(0.01)
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(1) as pool:
            assert pool.apply(_child_takes) is False
    finally:
        taken = preload.take()
        if isinstance(taken, BpfObject):
            taken.close()


def _child_takes() -> bool:
    return preload.take() is not None
