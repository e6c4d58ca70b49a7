"""`run --record-tty` with real processes: the agent on spyglass's pseudo-terminal.

Two ways in: the CI way (spyglass's stdin is not a terminal) and the
operator's way (spyglass itself runs on a terminal: here a pty the test holds
and types into, as a person would).
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from spyglass.store import Store
from spyglass.tty import read_cast

SECRET = "ghp_" + "Z" * 36


def _cast(store_dir: Path) -> Path:
    store = Store(store_dir)
    return store.run_dir(store.resolve("latest")) / "evidence" / "terminal.cast"


def test_output_recorded_masked_and_covered_by_the_checkpoint(spy: Any, store_dir: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    pol = tmp_path / "p.yaml"
    pol.write_text("terminal:\n  redact: ['internal-[0-9]+']\n")
    script = f"echo start; echo 'token {SECRET}'; echo 'id internal-4242'; echo done >&2"
    res = spy("run", "-q", "--record-tty", "--policy", str(pol), "--", "sh", "-c", script)
    assert res.exit_code == 0, res.output
    cast = _cast(store_dir)
    text = cast.read_text()
    assert SECRET not in text and "internal-4242" not in text
    _header, events = read_cast(cast)
    out = "".join(e.data for e in events if e.code == "o")
    assert "start" in out and "done" in out  # stderr is on the terminal too
    assert out.count("«redacted»") == 2

    lines = json.loads(spy("terminal", "latest", "--format", "json").stdout)
    assert [r["text"] for r in lines if r["who"] == "agent"][:1] == ["start"]
    show = spy("show", "latest").stdout
    assert "Terminal recorded" in show

    assert spy("verify", "latest").exit_code == 0
    # the recording is evidence: editing it after the run is tampering
    cast.write_text(text.replace("start", "st4rt"))
    res = spy("verify", "latest")
    assert res.exit_code == 3 and "terminal.cast" in res.output


def test_policy_switch_records_and_no_switch_does_not(spy: Any, store_dir: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert spy("run", "-q", "--", "echo", "plain").exit_code == 0
    assert not _cast(store_dir).exists()
    res = spy("terminal", "latest")
    assert res.exit_code == 1 and "no terminal recording" in res.output
    pol = tmp_path / "p.yaml"
    pol.write_text("terminal:\n  record: true\n")
    assert spy("run", "-q", "--policy", str(pol), "--", "echo", "recorded").exit_code == 0
    assert "recorded" in _cast(store_dir).read_text()
    pol.write_text("terminal:\n  record: true\n  redact: ['(unclosed']\n")
    res = spy("run", "-q", "--policy", str(pol), "--", "true")
    assert res.exit_code == 2 and "p.yaml:3:" in res.output and "bad regular expression" in res.output


def _read_until(fd: int, needle: bytes, timeout: float = 60.0) -> bytes:
    got = b""
    end = time.monotonic() + timeout
    while needle not in got and time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            got += chunk
    return got


def test_operator_keystrokes_are_told_apart_from_agent_output(store_dir: Path, tmp_path: Path) -> None:
    """spyglass on a real terminal: the operator answers the agent's question."""
    master, slave = pty.openpty()
    agent = "printf 'continue? '; read answer; echo \"agent heard: $answer\""
    env = {**os.environ, "SPYGLASS_STORE": str(store_dir)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "spyglass", "run", "-q", "--record-tty", "--", "sh", "-c", agent],
        stdin=slave, stdout=slave, stderr=slave, cwd=tmp_path, env=env, start_new_session=True,
    )
    os.close(slave)
    try:
        assert b"continue? " in _read_until(master, b"continue? ")
        os.write(master, b"yes\r")
        assert b"agent heard: yes" in _read_until(master, b"agent heard: yes")
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    _, events = read_cast(_cast(store_dir))
    typed = "".join(e.data for e in events if e.code == "i")
    printed = "".join(e.data for e in events if e.code == "o")
    assert typed == "yes\r"  # the operator's keystrokes, as typed
    assert "continue? " in printed and "agent heard: yes" in printed
    assert "continue? " not in typed
    first_q = next(e.t for e in events if e.code == "o" and "continue?" in e.data)
    answer = next(e.t for e in events if e.code == "i")
    assert first_q <= answer
