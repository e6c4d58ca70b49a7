"""A full disk under the store (and under spyglass's own stderr): no traceback, one line naming the
cause and the path, exit 8, the summary showing the run's true status, and every alert told, saved or
not.  The store lives on a small tmpfs mounted for the test (root; skipped otherwise) and unmounted
afterwards; the agent is a real process under the default capture backend."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

PY = sys.executable
pytestmark = pytest.mark.backends("auto")  # the store's faults, not the capture, are under test


def test_a_store_left_full_gives_one_line_exit_8_and_the_true_status(setup: Any, small_fs: Path) -> None:
    store, ws = small_fs / "store", small_fs / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    res = subprocess.run(
        [PY, "-m", "spyglass", "run", "--store", str(store), "--workspace", str(ws), "--", "/bin/sh", "-c",
         f"echo b > {ws}/b.txt; dd if=/dev/zero of={ws}/fill bs=64k 2>/dev/null; echo done"],
        cwd=ws, env=setup.env, capture_output=True, text=True, timeout=180, check=False,
    )
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode == 8, res.stderr
    assert "No space left on device" in res.stderr
    assert "[running]" not in res.stderr and "[evidence-incomplete]" in res.stderr, res.stderr
    assert "the evidence is incomplete (exit 8)" in res.stderr


def test_an_alert_is_told_even_when_stderr_is_on_the_full_disk(
    setup: Any, small_fs: Path, secret_on_small_fs: tuple[Path, Path], tmp_path: Path
) -> None:
    """The agent fills the disk that holds the store and spyglass's stderr, reads a secret, waits, frees
    the space and exits: the alert line still reaches stderr (late), and `alerts` lists it NOT SAVED."""
    store, ws = secret_on_small_fs
    log = small_fs / "spyglass.err"
    script = (f"dd if=/dev/zero of={ws}/fill bs=64k 2>/dev/null; cat $HOME/.ssh/id_rsa > /dev/null; "
              f"sleep 1; rm -f {ws}/fill")
    # a whole page already written: spyglass's next line needs a new page, which the full disk refuses
    log.write_text("#" * 4095 + "\n")
    with log.open("a") as err:
        code = subprocess.run(
            [PY, "-m", "spyglass", "run", "--store", str(store), "--workspace", str(ws), "--no-workspace-evidence",
             "--", "/bin/sh", "-c", script],
            cwd=ws, env=setup.env, stdout=subprocess.DEVNULL, stderr=err, timeout=180, check=False,
        ).returncode
    deadline = time.monotonic() + 30
    text = log.read_text()
    while "recorded run" not in text and time.monotonic() < deadline:
        time.sleep(0.1)
        text = log.read_text()
    assert "Traceback" not in text, text
    told = [line for line in text.splitlines() if line.startswith("spyglass: HIGH cred-secret-read")]
    assert any("NOT SAVED" in line for line in told) and all("printed late" in line for line in told), text
    assert code == 8, text
    alerts = setup.spyglass("alerts", "--store", str(store))
    assert "NOT SAVED" in alerts.stderr and "cred-secret-read" in alerts.stderr, alerts.stderr
    assert "no alerts" not in alerts.stderr


def test_benign_twin_room_to_spare_prints_no_fault(setup: Any, small_fs: Path) -> None:
    store, ws = small_fs / "store", small_fs / "ws"
    ws.mkdir()
    res = subprocess.run(
        [PY, "-m", "spyglass", "run", "--store", str(store), "--workspace", str(ws), "--", "/bin/sh", "-c",
         f"echo b > {ws}/b.txt"],
        cwd=ws, env=setup.env, capture_output=True, text=True, timeout=180, check=False,
    )
    assert res.returncode == 0, res.stderr
    assert "[complete]" in res.stderr and "cannot write" not in res.stderr and "not saved" not in res.stderr
