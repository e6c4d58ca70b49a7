"""A daemon left by the run empties alerts.jsonl and writes a checkpoint that agrees with it (a
consistent re-chaining): `gate`, `show` and `alerts` must not trust the files, since the index kept the
run's anchor and alert count.  Real processes under the default capture backend, the real CLI."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from evidence_helpers import Cli

PY = sys.executable

# Waits for the run's final checkpoint, then empties alerts.jsonl and makes the checkpoint agree
# (alerts 0, the empty chain's head): every file of the run is consistent with every other.
FORGER = r'''
import hashlib, json, sys, time
from pathlib import Path
store, done = Path(sys.argv[1]), Path(sys.argv[2])
deadline = time.time() + 120
while time.time() < deadline:
    runs = sorted((store / "runs").iterdir()) if (store / "runs").is_dir() else []
    if runs:
        run = runs[-1]
        cp = run / "evidence" / "checkpoint.json"
        meta = json.loads((run / "run.json").read_text())
        if meta["status"] != "running" and cp.exists() and json.loads(cp.read_text()).get("final"):
            break
    time.sleep(0.05)
(run / "alerts.jsonl").write_bytes(b"")
data = json.loads(cp.read_text())
data["alerts"] = 0
data["alerts_head"] = hashlib.sha256(f"spyglass-chain-v1:{run.name}:alerts".encode()).hexdigest()
cp.write_text(json.dumps(data, indent=2, sort_keys=True))
done.write_text(run.name)
'''


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    if os.geteuid() != 0:
        pytest.skip("reading /etc/shadow (the secret of these runs) needs root")
    return Cli(tmp_path)


def _wait_for(path: Path, log: Path) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared: {log.read_text() if log.exists() else ''}"
        time.sleep(0.05)


GATE = ("gate", "latest", "--require", "evidence-verified", "--require", "no-alerts-at-or-above=high")


def test_a_consistent_rechaining_of_the_alerts_fails_gate_and_shows(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "forge.py").write_text(FORGER)
    done, log = tmp_path / "done", tmp_path / "forge.log"
    res = cli.run(f"cat /etc/shadow >/dev/null; setsid {PY} {tmp_path}/forge.py {cli.store} {done} "
                  f"</dev/null >{log} 2>&1 &")
    assert "cred-secret-read" in res.stderr, res.stderr
    _wait_for(done, log)
    store = ("--store", str(cli.store))

    ver = cli("verify", *store)
    assert ver.returncode == 3 and "rewritten after the run" in ver.stdout, ver.stdout

    gate = cli(*GATE, *store)
    assert gate.returncode != 0, gate.stdout
    assert "FAIL  evidence-verified" in gate.stdout and "no anchor recorded" not in gate.stdout, gate.stdout
    assert "FAIL  no-alerts-at-or-above=high" in gate.stdout, gate.stdout
    assert "the index recorded" in gate.stdout and "up to high" in gate.stdout, gate.stdout

    show = cli("show", *store)
    assert "EVIDENCE DOES NOT MATCH ITS ANCHOR" in show.stdout, show.stdout
    assert "Alerts: none" not in show.stdout
    assert "the record does not match its anchor; the index recorded" in show.stdout, show.stdout

    doc = json.loads(cli("show", *store, "--format", "json").stdout)
    assert doc["anchor_problem"] and "anchored" in doc["anchor_problem"], doc["anchor_problem"]

    alerts = cli("alerts", *store)
    assert alerts.returncode == 3, alerts.stderr
    assert "the evidence does not match its anchor" in alerts.stderr and "no alerts for run" not in alerts.stderr


def test_the_untouched_twin_passes_and_shows_no_anchor_problem(cli: Cli) -> None:
    res = cli.run("echo hello > out.txt; cat out.txt >/dev/null")
    assert res.returncode == 0, res.stderr
    store = ("--store", str(cli.store))
    gate = cli(*GATE, *store)
    assert gate.returncode == 0, gate.stdout
    assert "PASS  evidence-verified" in gate.stdout and "no anchor recorded" not in gate.stdout
    assert json.loads(cli("show", *store, "--format", "json").stdout)["anchor_problem"] is None
    show = cli("show", *store)
    assert "ANCHOR" not in show.stdout and "Alerts: none" in show.stdout, show.stdout
    alerts = cli("alerts", *store)
    assert alerts.returncode == 0 and "anchor" not in alerts.stderr, alerts.stderr
