"""`spyglass run --sandbox --model-script` with codex: its generated CODEX_HOME is under the run's
private /tmp (visible inside the sandbox), and it reaches the stub through the egress proxy."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from .agent_task import clean_env, run_cli

REPO = Path(__file__).resolve().parents[2]
CODEX = REPO / ".cache" / "agents" / "node_modules" / ".bin" / "codex"

pytestmark = [
    pytest.mark.agents,
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed"),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
    pytest.mark.skipif(not CODEX.exists(), reason="codex is not installed: run scripts/install-agents.sh"),
]


def test_codex_in_the_sandbox_against_the_stub(tmp_path: Path) -> None:
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    home.mkdir()
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"steps": [{"say": "Writing.", "run": "echo hi > out.txt"}, {"say": "Done."}]}))
    env = clean_env("OPENAI_", "CODEX_")
    env["HOME"] = str(home)
    store = tmp_path / "store"
    spy = [sys.executable, "-m", "spyglass", "run", "-q", "--store", str(store), "--sandbox", "--model-script"]
    proc = run_cli([*spy, str(script), "--", str(CODEX), "exec", "--skip-git-repo-check", "write it"], ws, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (ws / "out.txt").read_text() == "hi\n"
    (run,) = (store / "runs").iterdir()
    meta = json.loads((run / "run.json").read_text())
    assert meta["sandbox"] is True
    assert meta["extra"]["model_stub"]["steps_served"] == [0, 1]
    assert meta["extra"]["model_stub"]["errors"] == []
    # its CODEX_HOME was written under the run's private /tmp and read there
    assert list(store.glob("sandbox/*/tmp/spyglass-agent/codex-home/config.toml"))
