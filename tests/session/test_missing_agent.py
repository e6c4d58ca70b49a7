"""`spyglass run --model-script S -- AGENT` when AGENT is not installed: one line, exit 127, a failed
run (as without --model-script), never a run of strace's own error recorded as `complete`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = {"model": "spyglass-stub", "steps": [{"say": "done"}]}


def _spy(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HOME=str(tmp_path), NO_COLOR="1", SPYGLASS_STORE=str(tmp_path / "store"))
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "spyglass", *args], cwd=ws, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.mark.parametrize("extra", [[], ["--backend", "strace"], ["--sandbox"]], ids=["auto", "strace", "sandbox"])
def test_model_script_run_of_a_missing_agent_exits_127(tmp_path: Path, extra: list[str]) -> None:
    if shutil.which("strace") is None or (extra == ["--sandbox"] and shutil.which("bwrap") is None):
        pytest.skip("strace and bubblewrap needed")
    script = tmp_path / "task.json"
    script.write_text(json.dumps(SCRIPT))
    res = _spy(tmp_path, "run", *extra, "--model-script", str(script), "--", "codex-not-installed-here", "exec", "x")
    assert res.returncode == 127, res.stdout + res.stderr
    assert res.stderr.strip() == "spyglass: codex-not-installed-here: command not found"
    runs = json.loads(_spy(tmp_path, "ls", "--format", "json").stdout)
    assert [(r["status"], r["exit_code"]) for r in runs] == [("failed", 127)]


def test_model_script_run_of_an_installed_command_runs(tmp_path: Path) -> None:
    if shutil.which("strace") is None:
        pytest.skip("strace needed")
    script = tmp_path / "task.json"
    script.write_text(json.dumps(SCRIPT))
    res = _spy(tmp_path, "run", "--backend", "strace", "--model-script", str(script), "--", "sh", "-c", "exit 3")
    assert res.returncode == 3, res.stderr
    runs = json.loads(_spy(tmp_path, "ls", "--format", "json").stdout)
    assert [(r["status"], r["exit_code"]) for r in runs] == [("complete", 3)]
