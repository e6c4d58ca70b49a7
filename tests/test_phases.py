"""Start-up phase marks: off by default, and one JSON line of phases per run when asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "SPYGLASS_STORE": str(tmp_path / "store"), **env}
    full.pop("SPYGLASS_POLICY", None)
    return subprocess.run([sys.executable, "-m", "spyglass", "run", "-q", "--backend", "strace", "--", "true"],
                          cwd=tmp_path, env=full, capture_output=True, text=True, timeout=180, check=False)


def test_a_run_writes_its_phases_when_asked(tmp_path: Path) -> None:
    out = tmp_path / "phases.jsonl"
    res = _run(tmp_path, SPYGLASS_PHASES=str(out))
    assert res.returncode == 0, res.stderr
    (line,) = out.read_text().splitlines()
    marks = json.loads(line)["marks"]
    names = [n for n, _ in marks]
    for phase in ("interpreter", "cli", "imports", "backend select", "policy", "rules load", "rules compile",
                  "sinks", "store", "sinks start", "warm", "capture start", "warm after launch", "child run",
                  "finish: sinks", "finish: store", "exit"):
        assert phase in names, names
    times = [t for _, t in marks]
    assert times == sorted(times)


def test_no_file_without_the_variable(tmp_path: Path) -> None:
    res = _run(tmp_path)
    assert res.returncode == 0, res.stderr
    assert not list(tmp_path.glob("*.jsonl"))
