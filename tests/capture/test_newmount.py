"""Mounts made with the new mount API (no mount(2)) are recorded and alerted under each backend:
a tmpfs through fsopen/fsconfig/fsmount/move_mount, and a read-only bind mount through
open_tree(OPEN_TREE_CLONE)/mount_setattr/move_mount.  The agent is tests/capture/progs/newmount.py
(as root: CI is root), which unmounts what it mounted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spyglass.store import RunReader, Store

PROG = Path(__file__).resolve().parent / "progs" / "newmount.py"
PY = os.path.realpath(sys.executable)
CALLS = {"open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "umount2"}

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting needs root")


def _run(tmp_path: Path, backend: str, *args: str) -> RunReader:
    store = tmp_path / "store"
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "-q", "--backend", backend, "--store", str(store), "--", PY,
         str(PROG), *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    s = Store(store)
    return RunReader(s, s.resolve("latest"))


def _flagged(reader: RunReader) -> list[str]:
    """The system calls of the run's sys-namespace-change alerts."""
    by_seq = {e.seq: e for e in reader.events()}
    return sorted(str(by_seq[a.event_seqs[0]].syscall) for a in reader.alerts() if a.rule_id == "sys-namespace-change")


def test_a_file_system_mounted_without_mount_is_recorded_and_alerted(tmp_path: Path, capture_backend: str) -> None:
    target = tmp_path / "t"
    target.mkdir()
    reader = _run(tmp_path, capture_backend, "tmpfs", str(target))
    calls = [(e.syscall, e.detail, e.path) for e in reader.events() if e.syscall in CALLS]
    assert calls == [
        ("fsopen", "fsopen tmpfs", None),
        ("fsconfig", "fsconfig size=1m", None),
        ("fsconfig", "fsconfig FSCONFIG_CMD_CREATE", None),
        ("fsmount", "fsmount", None),
        ("move_mount", "move_mount", str(target)),
        ("fspick", "fspick", str(target)),
        ("umount2", calls[-1][1], str(target)),
    ], calls
    flagged = _flagged(reader)
    assert flagged == ["fsmount", "fspick", "move_mount", "umount2"], flagged


def test_a_bind_mount_made_without_mount_is_recorded_and_alerted(tmp_path: Path, capture_backend: str) -> None:
    source, target = tmp_path / "src", tmp_path / "t"
    source.mkdir()
    target.mkdir()
    (source / "notes.txt").write_text("hello\n")
    reader = _run(tmp_path, capture_backend, "clone", str(source), str(target))
    calls = [(e.syscall, e.detail, e.path) for e in reader.events() if e.syscall in CALLS]
    assert calls[:3] == [
        ("open_tree", "open_tree clone", str(source)),
        ("mount_setattr", "mount_setattr", None),  # on the descriptor (an empty path)
        ("move_mount", "move_mount", str(target)),
    ], calls
    flagged = _flagged(reader)
    assert flagged == ["mount_setattr", "move_mount", "open_tree", "umount2"], flagged
