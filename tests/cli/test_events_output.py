"""`spyglass events`: a time column, failed probes folded (--noise shows them), run id and process entity ids."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from spyglass.events import Event
from spyglass.events.identity import EntityIds, is_failed_probe


def _spyglass(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spyglass", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_events_fold_probes_and_carry_identity(tmp_path: Path) -> None:
    env = {**os.environ, "SPYGLASS_STORE": str(tmp_path / "store"), "NO_COLOR": "1"}
    rec = _spyglass(["run", "--", "sh", "-c", "cat /no/such/file 2>/dev/null; cat /etc/hostname >/dev/null; true"],
                    tmp_path, env)
    assert rec.returncode == 0, rec.stderr
    text = _spyglass(["events", "latest"], tmp_path, env)
    assert not re.search(r"file\.read +/no/such/file", text.stdout)
    assert re.search(r"^spyglass: \d+ failed probe\(s\) folded", text.stderr, re.M)
    assert all(re.match(r"\d\d:\d\d:\d\d\.\d{3} +\d+ +\d+ ", line) for line in text.stdout.splitlines())
    noisy = _spyglass(["events", "latest", "--noise"], tmp_path, env)
    assert re.search(r"file\.read +/no/such/file  \[ENOENT\]", noisy.stdout)
    assert "folded" not in noisy.stderr
    shown = _spyglass(["show", "latest"], tmp_path, env)
    assert "failed probe(s) folded" in shown.stdout
    first = [json.loads(x) for x in _spyglass(["events", "latest", "--format", "json", "--noise"], tmp_path,
                                              env).stdout.splitlines()]
    again = [json.loads(x) for x in _spyglass(["events", "latest", "--format", "json", "--noise"], tmp_path,
                                              env).stdout.splitlines()]
    assert [e["process.entity_id"] for e in first] == [e["process.entity_id"] for e in again]
    assert len({e["run.id"] for e in first}) == 1
    by_pid: dict[int, set[str]] = {}
    for e in first:
        by_pid.setdefault(e["process.pid"], set()).add(e["process.entity_id"])
    assert len(by_pid) >= 3 and all(len(v) == 1 for v in by_pid.values())  # sh and two cats
    assert len({next(iter(v)) for v in by_pid.values()}) == len(by_pid)
    probe = next(e for e in first if e.get("file.path") == "/no/such/file")
    assert probe["ok"] is False and probe["errno"] == "ENOENT"


def test_entity_id_changes_when_a_pid_is_reused() -> None:
    ids = EntityIds("run-1")
    evs = [Event(seq=1, type="process.start", pid=100), Event(seq=2, type="file.read", pid=100, path="/a"),
           Event(seq=3, type="process.exit", pid=100), Event(seq=4, type="process.start", pid=100),
           Event(seq=5, type="file.read", pid=100, path="/b")]
    got = [ids.of(e) for e in evs]
    assert got[0] == got[1] == got[2] and got[3] == got[4] and got[0] != got[3]
    assert EntityIds("run-2").of(evs[0]) != got[0]
    assert is_failed_probe(Event(type="file.read", pid=1, ok=False, errno="ENOENT", path="/x"))
    assert not is_failed_probe(Event(type="file.read", pid=1, ok=False, errno="EACCES", path="/x"))
