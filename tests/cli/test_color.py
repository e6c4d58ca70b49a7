"""Colour follows ``--color``, then NO_COLOR, then whether the output is a terminal.

The terminal cases run the real command with its stdout and stderr on a
pseudo-terminal, as a user's shell would.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

ESC = b"\x1b["


def _run(args: list[str], env: dict[str, str], cwd: Path, tty: bool) -> bytes:
    if not tty:
        proc = subprocess.run([sys.executable, "-m", "spyglass", *args], cwd=cwd, env=env,
                              capture_output=True, timeout=120)
        return proc.stdout + proc.stderr
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "spyglass", *args], cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        proc.wait(timeout=120)
        return out
    finally:
        os.close(master)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A run with an alert (a program started from /tmp), so `show` and `alerts` have something to colour."""
    d = tmp_path_factory.mktemp("color")
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "SPYGLASS_COLOR")}
    env.update(SPYGLASS_STORE=str(d / "store"), TERM="xterm")
    tool = d / "tmpbin"
    tool.mkdir()
    proc = subprocess.run([sys.executable, "-m", "spyglass", "run", "--", "sh", "-c",
                           "cp /bin/true /tmp/spyglass-color-true && /tmp/spyglass-color-true; "
                           "rm -f /tmp/spyglass-color-true"],
                          cwd=d, env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return d, env


@pytest.mark.parametrize("extra_env, flags, tty, coloured", [
    ({}, [], True, True),                          # a terminal: colour
    ({}, [], False, False),                        # a pipe: none
    ({"NO_COLOR": "1"}, [], True, False),          # NO_COLOR on a terminal: none
    ({"NO_COLOR": ""}, [], True, True),            # an empty NO_COLOR does not count
    ({}, ["--color", "never"], True, False),
    ({"NO_COLOR": "1"}, ["--color", "always"], False, True),  # an explicit choice wins
    ({"SPYGLASS_COLOR": "never"}, [], True, False),
])
def test_colour_choice(recorded: tuple[Path, dict[str, str]], extra_env: dict[str, str], flags: list[str],
                       tty: bool, coloured: bool) -> None:
    d, env = recorded
    for cmd in (["show", "latest"], ["alerts", "latest"]):
        out = _run([*flags, *cmd], {**env, **extra_env}, d, tty)
        assert b"exec-untrusted-location" in out or b"untrusted" in out or cmd[0] == "show", out[-500:]
        assert (ESC in out) is coloured, (cmd, out[-500:])


def test_version_names_the_project() -> None:
    for argv in ([sys.executable, "-m", "spyglass", "--version"],):
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
        assert out.startswith("spyglass (the agent monitor from the operating-system boundary), version ")
