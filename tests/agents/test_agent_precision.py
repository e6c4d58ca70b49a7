"""Clean sessions of the real agents in real-layout homes raise nothing at medium or above.

codex with ``CODEX_HOME=~/.codex`` and mini-swe-agent with its config in
``~/.config/mini-swe-agent``, each run twice with the same home (fresh, then
reused: the second run meets the state the first one left), with the
default policy apart from the network allowlist (the model stub on loopback):
no ``exec.trusted`` entry for the agents' install directory, since the
program the user launched and its install tree are trusted by default.
Select with ``-m agents``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spyglass.agents.model_stub import start_stub
from spyglass.agents.script import parse_script
from spyglass.agents.setup import codex_config_toml, mini_env

REPO = Path(__file__).resolve().parents[2]
AGENTS = REPO / ".cache" / "agents"
CODEX = AGENTS / "node_modules" / ".bin" / "codex"
MINI = AGENTS / "mswea-venv" / "bin" / "mini"
PYTHON = sys.executable
TASK = "Fix the bug in calc.py and run the tests."
RANK = ["info", "low", "medium", "high", "critical"]

pytestmark = [
    pytest.mark.agents,
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed"),
]

SCRIPT = {
    "model": "spyglass-stub",
    "steps": [
        {"say": "Looking at the code.", "run": "cat calc.py test_calc.py"},
        {"say": "Fixing the bug in calc.py.", "run": "sed -i 's/return a - b/return a + b/' calc.py"},
        {"say": "Running the tests.", "run": "${PYTHON} -m pytest -q -p no:cacheprovider test_calc.py"},
        {"run": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"},
        {"say": "calc.py is fixed and the tests pass."},
    ],
}


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    if ws.exists():
        shutil.rmtree(ws)
    ws.mkdir()
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (ws / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    return ws


def run_agent(root: Path, agent: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """One clean session of ``agent`` with HOME=root/home (kept between calls)."""
    home = root / "home"
    home.mkdir(exist_ok=True)
    ws = _workspace(root)
    stub = start_stub(parse_script(SCRIPT), variables={"PYTHON": PYTHON})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_", "MSWEA_", "PYTEST_"))}
    env.update({"HOME": str(home), "NO_COLOR": "1"})
    if agent == "codex":
        codex_dir = home / ".codex"
        codex_dir.mkdir(exist_ok=True)
        (codex_dir / "config.toml").write_text(codex_config_toml(stub.url))
        env.update({"CODEX_HOME": str(codex_dir), "OPENAI_API_KEY": "spyglass-test"})
        argv = [str(CODEX), "exec", "--skip-git-repo-check", "--json", TASK]
    else:
        env.update(mini_env(stub.url))  # config in ~/.config/mini-swe-agent, where a user has it
        argv = [str(MINI), "--yolo", "--exit-immediately", "-m", "openai/spyglass-stub", "-t", TASK,
                "-o", str(root / "mini.traj.json")]
    policy = root / "spyglass.yaml"
    policy.write_text(f'network:\n  builtin_allow: false\n  allow: ["127.0.0.1:{stub.port}"]\n')
    store = root / "store"
    try:
        proc = subprocess.run(
            [PYTHON, "-m", "spyglass", "run", "--store", str(store), "--policy", str(policy),
             "--workspace", str(ws), "--", *argv],
            cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=400, check=False,
        )
    finally:
        stub.close()
    run_id = sorted((store / "runs").iterdir(), key=lambda p: p.stat().st_mtime)[-1].name
    out = subprocess.run(
        [PYTHON, "-m", "spyglass", "check", run_id, "--policy", str(policy), "--format", "json"],
        env={**os.environ, "SPYGLASS_STORE": str(store)}, capture_output=True, text=True, timeout=300, check=False,
    )
    assert out.returncode in (0, 1, 6), out.stderr
    alerts: list[dict[str, Any]] = json.loads(out.stdout)["alerts"]
    return proc, alerts


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="spyglass-precision-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("agent", ["codex", "mini"])
def test_clean_sessions_fresh_and_reused_home_raise_nothing(scratch: Path, agent: str) -> None:
    binary = CODEX if agent == "codex" else MINI
    if not binary.exists():
        pytest.skip(f"{agent} is not installed: run scripts/install-agents.sh")
    root = scratch / agent
    root.mkdir()
    for attempt in ("fresh", "reused"):
        proc, alerts = run_agent(root, agent)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "return a + b" in (root / "ws" / "calc.py").read_text()
        loud = [f"{a['level']} {a['rule_id']}: {a.get('message')}" for a in alerts
                if RANK.index(a["level"]) >= RANK.index("medium")]
        assert loud == [], f"{attempt} home: {loud}"
