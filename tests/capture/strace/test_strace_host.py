"""The strace session's private directory for its FIFO (capture/strace/host.py), made and removed
without ``tempfile`` and ``shutil``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from spyglass.capture.strace import host


def test_private_dir_is_new_and_only_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    a = host.private_dir("spyglass-strace-")
    b = host.private_dir("spyglass-strace-")
    assert a != b
    for d in (a, b):
        assert os.path.dirname(d) == str(tmp_path)
        assert os.path.basename(d).startswith("spyglass-strace-")
        st = os.lstat(d)
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
        assert st.st_uid == os.getuid()


def test_private_dir_skips_a_place_it_cannot_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    monkeypatch.setenv("TMPDIR", str(not_a_dir))
    monkeypatch.setenv("TEMP", str(tmp_path / "missing"))
    monkeypatch.setenv("TMP", str(tmp_path))
    d = host.private_dir("p-")
    assert os.path.dirname(d) == str(tmp_path)


def test_remove_dir_removes_the_fifo_and_anything_put_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    d = host.private_dir("p-")
    os.mkfifo(os.path.join(d, "trace"), 0o600)
    host.remove_dir(d, ("trace",))
    assert not os.path.exists(d)
    # a process of the user added files (and a link to a file outside): all go, the outside file stays
    d = host.private_dir("p-")
    outside = tmp_path / "keep.txt"
    outside.write_text("keep")
    os.mkfifo(os.path.join(d, "trace"), 0o600)
    os.mkdir(os.path.join(d, "sub"))
    Path(d, "sub", "f").write_text("x")
    os.symlink(outside, os.path.join(d, "link"))
    host.remove_dir(d, ("trace",))
    assert not os.path.exists(d)
    assert outside.read_text() == "keep"
    host.remove_dir(d, ("trace",))  # gone already: nothing raised
