"""Device nodes are never where a secret goes nor where one comes from: after a real secret read,
writes and reads of /dev/null, /dev/zero, /dev/tty or /dev/urandom raise nothing, and `show` does not
list them as files written; a real copy of the secret still alerts.  Real processes, the real CLI,
the default capture backend (root: /etc/shadow is the secret)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

PY = sys.executable


@pytest.fixture
def cli(cli_place: Any):  # type: ignore[no-untyped-def]
    ws, store, env = cli_place("reading /etc/shadow (the secret of these runs) needs root")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([PY, "-m", "spyglass", *args], cwd=ws, env=env, capture_output=True, text=True,
                              timeout=180, check=False)

    def record(script: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, object]], str]:
        res = run("run", "--store", str(store), "--", "/bin/sh", "-c", script)
        alerts = json.loads(run("alerts", "--store", str(store), "--format", "json").stdout)
        return res, alerts, run("show", "--store", str(store)).stdout

    return record


def test_benign_twin_device_nodes_after_a_secret_read_stay_silent(cli) -> None:  # type: ignore[no-untyped-def]
    res, alerts, shown = cli("cat /etc/shadow >/dev/null; sleep 0.3; echo hi >/dev/null; "
                             "head -c 8 /dev/zero >/dev/null; head -c 8 /dev/urandom >/dev/null; cat /dev/null")
    assert res.returncode == 0, res.stderr
    assert [(a["rule_id"], a["message"]) for a in alerts] == [("cred-secret-read", "cat read secret /etc/shadow")]
    live = [line for line in res.stderr.splitlines() if line.startswith(("spyglass: HIGH", "spyglass: MEDIUM"))]
    assert len(live) == 1 and "/dev/null" not in live[0], live
    files = shown.split("\nProcesses", 1)[1].split("\n\n", 1)[1]  # the sections after the process tree
    assert "Files created or opened for writing" not in files and "/dev/null" not in files, shown


def test_a_real_copy_of_the_secret_still_alerts(cli) -> None:  # type: ignore[no-untyped-def]
    _res, alerts, shown = cli("cat /etc/shadow > copy.txt; sleep 0.2; cat copy.txt >/dev/null; echo hi >/dev/null")
    read = [str(a["message"]) for a in alerts if a["rule_id"] == "cred-secret-read"]
    assert any(m.endswith("/ws/copy.txt") for m in read), alerts  # a copy of a secret is a secret
    assert not any("/dev/null" in str(a["message"]) or "?" in str(a["message"]) for a in alerts), alerts
    assert "copy.txt" in shown
