"""``spyglass.capture.which``: the PATH lookup of ``shutil.which``, without importing shutil."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from spyglass.capture.which import which


def _exe(path: Path) -> Path:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_the_same_answers_as_shutil_which(tmp_path: Path) -> None:
    a, b, c = (tmp_path / n for n in ("a", "b", "c"))
    for d in (a, b, c):
        d.mkdir()
    _exe(b / "tool")
    (a / "tool").write_text("not executable\n")  # skipped: not executable
    (c / "dirtool").mkdir()  # skipped: a directory, even with its x bit
    _exe(c / "tool")
    path = os.pathsep.join([str(a), str(b), str(c), str(b)])
    for name in ("tool", "dirtool", "missing", str(b / "tool"), str(a / "tool")):
        assert which(name, path) == shutil.which(name, path=path), name
    assert which("tool", path) == str(b / "tool")
    assert which("tool", "") is None


def test_no_path_given_is_the_environment_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _exe(tmp_path / "only-here")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert which("only-here") == str(tmp_path / "only-here") == shutil.which("only-here")
    assert which("sh") is None
