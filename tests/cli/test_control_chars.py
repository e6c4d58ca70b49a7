"""`spyglass changes` and `spyglass diff` print file names the agent chose: a name with ESC, CR, BEL,
a C1 control or a newline must not reach the terminal raw (it could clear the screen and print a
forged line).  Real runs of real processes, the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PY = sys.executable
EVIL = "x\x1b[2J\x1b[H\rspyglass: no alerts, all clear\n\x07\x9b31m.txt"
MAKE = f"open({EVIL!r}, 'w').write('a\\n'); open('plain.txt', 'w').write('b\\n')"
BENIGN = "open('plain.txt', 'w').write('b\\n'); open('tab\\tname.txt', 'w').write('c\\td\\n')"
RAW = ("\x1b", "\r", "\x07", "\x9b")


@pytest.fixture
def cli(tmp_path: Path):  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir()
    store = tmp_path / "store"
    env = dict(os.environ, HOME=str(tmp_path), LANG="C.UTF-8", PYTHONDONTWRITEBYTECODE="1")
    env.pop("SPYGLASS_STORE", None)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([PY, "-m", "spyglass", *args, "--store", str(store)] if args[0] != "run" else
                              [PY, "-m", "spyglass", "run", "--store", str(store), *args[1:]],
                              cwd=ws, env=env, capture_output=True, text=True, timeout=180, check=False)

    return run


def _record(cli, code: str) -> str:  # type: ignore[no-untyped-def]
    res = cli("run", "--", PY, "-c", code)
    assert res.returncode == 0, res.stderr
    return next(line.split()[3] for line in res.stderr.splitlines() if line.startswith("spyglass: recorded run "))


def _no_raw(text: str) -> None:
    assert not any(c in text for c in RAW), repr(text)
    assert "\nspyglass: no alerts" not in text


def test_changes_and_diff_render_a_hostile_file_name_visibly(cli) -> None:  # type: ignore[no-untyped-def]
    first = _record(cli, "open('plain.txt', 'w').write('b\\n')")
    second = _record(cli, MAKE)
    changes = cli("changes", second)
    assert changes.returncode == 0, changes.stderr
    _no_raw(changes.stdout)
    assert "\\x1b[2J" in changes.stdout and "\\r" in changes.stdout and "\\n" in changes.stdout
    diff = cli("diff", first, second)
    assert diff.returncode == 0, diff.stderr
    _no_raw(diff.stdout)
    assert "\\x1b[2J" in diff.stdout, diff.stdout


def test_benign_twin_plain_names_and_tabs_in_a_diff_print_as_they_are(cli) -> None:  # type: ignore[no-untyped-def]
    run = _record(cli, BENIGN)
    changes = cli("changes", run)
    assert changes.returncode == 0, changes.stderr
    assert "A  plain.txt" in changes.stdout
    assert "+c\td" in changes.stdout  # the file's content keeps its tab in the diff
    assert "\\x" not in changes.stdout
