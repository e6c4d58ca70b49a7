"""Faults lose nothing: a full disk, a store filled by the run, a read-only copy of a store.

The store lives on a small tmpfs mounted for the test (we are root); nothing here touches
another file system.  The agent is a real process under the default capture backend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

PY = sys.executable

pytestmark = pytest.mark.backends("auto")  # the policy and the store, not capture: once


def test_an_alert_fired_on_a_full_disk_still_counts(
    setup: Any, secret_on_small_fs: tuple[Path, Path], tmp_path: Path
) -> None:
    """The agent fills the disk the store is on, reads a secret, waits until spyglass has tried to save
    the alert, frees the space and exits: the alert is printed NOT SAVED, --fail-on exits 6, the run is
    evidence-incomplete, and gate fails it."""
    store, ws = secret_on_small_fs
    go = tmp_path / "go"
    script = (f"dd if=/dev/zero of={ws}/fill bs=64k 2>/dev/null; cat $HOME/.ssh/id_rsa > /dev/null; "
              f"while [ ! -e {go} ]; do sleep 0.05; done; rm -f {ws}/fill")
    proc = subprocess.Popen(
        [PY, "-m", "spyglass", "run", "--store", str(store), "--fail-on", "high", "--workspace", str(ws),
         "--no-workspace-evidence", "--", "/bin/sh", "-c", script],
        cwd=ws, env=setup.env, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + 120
    for line in proc.stderr:  # the harness plays the agent's patience: it waits for the failed save
        lines.append(line)
        if "NOT SAVED" in line or time.monotonic() > deadline:
            break
    go.touch()
    rest = proc.stderr.read()
    code = proc.wait(timeout=120)
    err = "".join(lines) + rest
    assert any("cred-secret-read" in line and "NOT SAVED" in line for line in lines), err
    assert code == 6, err
    assert "No space left on device" in err and "Traceback" not in err
    meta = json.loads(setup.spyglass("show", "--store", str(store), "--format", "json").stdout)["run"]
    assert meta["status"] == "evidence-incomplete"
    assert [a["rule_id"] for a in meta["extra"]["unsaved_alerts"]] == ["cred-secret-read"]
    shown = setup.spyglass("show", "--store", str(store)).stdout
    assert "NOT SAVED" in shown and "Alerts: none\n" not in shown
    gate = setup.spyglass("gate", "--store", str(store), "--require", "no-alerts-at-or-above=high")
    assert gate.returncode == 1, gate.stdout


def test_a_store_that_fills_ends_in_one_line_and_reading_still_works(setup: Any, small_fs: Path) -> None:
    store = small_fs / "store"
    # many events: each open is one record (about 170 bytes on disk); 20 000 of them overflow a 2 MiB store
    agent = "import os\nfor i in range(20000):\n    os.close(os.open('/etc/hostname', os.O_RDONLY))\n"
    (setup.ws / "agent.py").write_text(agent)
    res = setup.spyglass("run", "--store", str(store), "--no-workspace-evidence", "--", PY, "agent.py")
    assert res.returncode == 8, res.stderr
    assert "Traceback" not in res.stderr
    assert "cannot write the run store (No space left on device: " in res.stderr
    assert "evidence is incomplete (exit 8)" in res.stderr or "not saved:" in res.stderr
    # the disk is still full: reading commands work and write nothing
    for cmd in (["ls"], ["show", "latest"], ["alerts", "latest"], ["events", "latest", "--type", "process."]):
        out = setup.spyglass(*cmd, "--store", str(store))
        assert out.returncode == 0 and "Traceback" not in out.stderr, (cmd, out.stderr)
    ver = setup.spyglass("verify", "--store", str(store))
    assert ver.returncode in (3, 4) and "Traceback" not in ver.stderr, ver.stderr


def test_benign_twin_a_store_with_room_is_complete(setup: Any, small_fs: Path) -> None:
    store = small_fs / "store"
    res = setup.spyglass("run", "--store", str(store), "--fail-on", "high", "--", "/bin/sh", "-c",
                         "echo hi > out.txt")
    assert res.returncode == 0, res.stderr
    assert "NOT SAVED" not in res.stderr and "cannot write" not in res.stderr
    assert setup.spyglass("verify", "--store", str(store)).returncode == 0


def test_reading_commands_work_on_a_read_only_copy(setup: Any, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    store = tmp_path / "store"
    assert setup.run("cat /etc/hostname > /dev/null", store=store).returncode == 0
    ro = tmp_path / "archived"
    ro.mkdir()
    subprocess.run(["mount", "--bind", str(store), str(ro)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        before = sorted(p.name for p in store.iterdir())
        for cmd in (["ls"], ["show", "latest"], ["alerts", "latest"], ["events", "latest"], ["verify", "latest"],
                    ["report", "latest", "--format", "json"]):
            out = setup.spyglass(*cmd, "--store", str(ro))
            assert out.returncode == 0, (cmd, out.stderr)
            assert "readonly" not in out.stderr and "no runs yet" not in out.stderr
        assert sorted(p.name for p in store.iterdir()) == before
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=False)


def test_an_index_that_cannot_be_opened_is_said_plainly(setup: Any, tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert setup.run("true", store=store).returncode == 0
    (store / "index.sqlite").write_bytes(b"this is not a database" * 100)
    for f in store.glob("index.sqlite-*"):
        f.unlink()
    out = setup.spyglass("ls", "--store", str(store))
    assert "the index of" in out.stderr and "cannot be opened" in out.stderr
    assert out.returncode == 0 and "complete" in out.stdout  # listed from the run directories
