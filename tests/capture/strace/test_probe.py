"""The --seccomp-bpf probe runs once per strace binary, kernel and boot, not once per run."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from spyglass.capture.strace import probe
from spyglass.capture.strace.backend import StraceBackend

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")


def _counting_strace(tmp_path: Path) -> tuple[Path, Path]:
    """A real strace behind a script that logs each call."""
    log = tmp_path / "calls.log"
    wrapper = tmp_path / "strace"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {shutil.which("strace")} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, log


def _probes(log: Path) -> int:
    return sum("--seccomp-bpf" in line for line in log.read_text().splitlines()) if log.exists() else 0


def test_the_probe_runs_once_and_is_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    wrapper, log = _counting_strace(tmp_path)
    first = probe.probe_seccomp(str(wrapper))
    assert _probes(log) == 1
    assert probe.probe_seccomp(str(wrapper)) == first
    assert StraceBackend(str(wrapper))._probe_seccomp(str(wrapper)) == first
    assert _probes(log) == 1  # a new process (a new backend) asks the cache, not strace
    # another strace binary (here: the same one changed) is probed again
    st = wrapper.stat()
    os.utime(wrapper, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert probe.probe_seccomp(str(wrapper)) == first
    assert _probes(log) == 2


def test_a_cache_that_cannot_be_read_or_written_only_costs_a_probe(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file: nothing can be made below it
    wrapper, log = _counting_strace(tmp_path)
    answer = probe.probe_seccomp(str(wrapper))
    assert probe.probe_seccomp(str(wrapper)) == answer
    assert _probes(log) == 2
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c2"))
    probe.probe_seccomp(str(wrapper))
    (tmp_path / "c2" / "spyglass" / "strace-seccomp.json").write_text("{not json")
    assert probe.probe_seccomp(str(wrapper)) == answer
    assert _probes(log) == 4
