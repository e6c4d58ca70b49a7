"""A usage mistake (unknown option or command, missing argument, bad choice) is one line
`spyglass: error: ... (see `CMD --help`)` with exit code 2, through the real executable;
a group called bare still prints its help."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _spy(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HOME=str(tmp_path), NO_COLOR="1", SPYGLASS_STORE=str(tmp_path / "store"))
    return subprocess.run([sys.executable, "-m", "spyglass", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60, check=False)


@pytest.mark.parametrize(("args", "says", "where"), [
    (["run", "--frobnicate", "--", "true"], "No such option '--frobnicate'", "spyglass run"),
    (["frob"], "No such command 'frob'", "spyglass"),
    (["--colr", "never", "ls"], "No such option '--colr'", "spyglass"),
    (["rules", "frob"], "No such command 'frob'", "spyglass rules"),
    (["run"], "Missing argument 'COMMAND...'", "spyglass run"),
    (["show", "latest", "--format", "xml"], "Invalid value for '--format'", "spyglass show"),
])
def test_usage_mistake_is_one_line(tmp_path: Path, args: list[str], says: str, where: str) -> None:
    res = _spy(tmp_path, *args)
    assert res.returncode == 2
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("spyglass: error: ") and says in lines[0], lines[0]
    assert lines[0].endswith(f"(see `{where} --help`)"), lines[0]
    assert res.stdout == ""


def test_bare_group_prints_its_help(tmp_path: Path) -> None:
    for args in ([], ["rules"]):
        res = _spy(tmp_path, *args)
        assert "Usage: spyglass" in res.stdout + res.stderr and "Commands:" in res.stdout + res.stderr
        assert "spyglass: error" not in res.stderr
