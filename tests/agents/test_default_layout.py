"""The real agent CLIs as a newcomer runs them: `spyglass run --model-script S -- AGENT ...` and
nothing else (default store under HOME, default policy, default backend), in a git repository.

A clean session raises no alert at all, at any level.  The workspaces are chosen to have caught
false alarms: a repository under a directory named `nc` (codex names its workdir on the command
line of its process setup, next to `bash -c __CODEX_SNAPSHOT...`), and a git repository for Claude
Code (it reads the user's git identity with a hardened `git -c core.hooksPath=/dev/null ... config
user.name`).  `show`, `verify`, `changes` and `report` then read the run without a mistake.
The same holds in the other ways a user runs them (`--sandbox`, `--backend strace`, both), for the
agents those ways are cheap for, and for Claude Code sandboxed under a policy that lists only the
model's hosts (its connections to the sandbox's relay are not unlisted egress).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .agent_task import AGENT_MARKS, clean_env

REPO = Path(__file__).resolve().parents[2]
AGENTS = REPO / ".cache" / "agents"
BIN = {
    "codex": AGENTS / "node_modules" / ".bin" / "codex",
    "mini": AGENTS / "mswea-venv" / "bin" / "mini",
    "claude": AGENTS / "claude-code" / "node_modules" / ".bin" / "claude",
}
TASK = "Fix the bug in calc.py and run the tests."
SCRIPT = {
    "model": "spyglass-stub",
    "steps": [
        {"say": "Looking at the files.", "run": "ls && cat calc.py"},
        {"say": "Fixing the bug.", "run": "sed -i 's/return a - b/return a + b/' calc.py"},
        {"say": "Running the tests.", "run": "python3 -c 'from calc import add; assert add(2, 3) == 5'"},
        {"run": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"},
        {"say": "Fixed calc.py; the tests pass."},
    ],
}
ARGV = {
    "codex": ["codex", "exec", "--skip-git-repo-check", TASK],
    "mini": ["mini", "--yolo", "--exit-immediately", "-m", "openai/spyglass-stub", "-t", TASK],
    "claude": ["claude", "-p", TASK, "--allowedTools", "Bash"],
}

pytestmark = [*AGENT_MARKS, pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")]


def _repo(ws: Path) -> None:
    ws.mkdir(parents=True)
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    git = ["git", "-c", "user.email=dev@example.com", "-c", "user.name=dev"]
    subprocess.run([*git, "init", "-q", "."], cwd=ws, check=True)
    subprocess.run([*git, "add", "-A"], cwd=ws, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=ws, check=True)


# a user's policy that narrows egress to the model's host: loopback (the sandbox's relay) is not listed
STRICT_POLICY = "network:\n  builtin_allow: false\n  allow: ['*.anthropic.com', '*.openai.com']\n"
#: the other ways a user runs them (the default backend is eBPF where it runs, so `--backend ebpf`
#: is the first case again); "strict" adds STRICT_POLICY (a sandboxed Claude Code raised
#: net-egress-unlisted for the relay, 127.0.0.1:3128, under such a policy)
WAYS = {
    "defaults": [],
    "sandbox": ["--sandbox"],
    "strace": ["--backend", "strace"],
    "strace-sandbox": ["--backend", "strace", "--sandbox"],
    "strict-sandbox": ["--sandbox", "--policy", "STRICT"],
}
CASES = [
    *[(agent, "defaults") for agent in ("codex", "mini", "claude")],
    *[(agent, way) for agent in ("codex", "claude") for way in ("sandbox", "strace", "strace-sandbox")],
    ("mini", "strace-sandbox"),
    ("claude", "strict-sandbox"),
]


@pytest.mark.parametrize(("agent", "way"), CASES, ids=[f"{a}-{w}" for a, w in CASES])
def test_a_clean_session_with_the_defaults_raises_nothing(agent: str, way: str, tmp_path: Path) -> None:
    if not BIN[agent].exists():
        pytest.skip(f"{agent} is not installed: run scripts/install-agents.sh")
    if "sandbox" in way and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed")
    flags = list(WAYS[way])
    if "STRICT" in flags:
        policy = tmp_path / "policy.yaml"
        policy.write_text(STRICT_POLICY)
        flags[flags.index("STRICT")] = str(policy)
    home = tmp_path / "home"
    home.mkdir()
    ws = tmp_path / "nc" / "ws" if agent != "claude" else home / "proj"
    _repo(ws)
    script = tmp_path / "task.json"
    script.write_text(json.dumps(SCRIPT))
    env = clean_env("OPENAI_", "CODEX_", "MSWEA_", "ANTHROPIC_", "CLAUDE_", "SPYGLASS_", "XDG_")
    env.update(HOME=str(home), NO_COLOR="1", PATH=f"{BIN[agent].parent}:{env.get('PATH', '/usr/bin:/bin')}")

    def spy(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "spyglass", *args], cwd=ws, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=400, check=False)

    res = spy("run", *flags, "--model-script", str(script), "--", *ARGV[agent])
    assert res.returncode == 0, res.stderr[-3000:]
    assert "return a + b" in (ws / "calc.py").read_text()
    meta = json.loads(spy("show", "latest", "--format", "json").stdout)["run"]
    assert meta["sandbox"] is ("sandbox" in way) and ("strace" not in way or meta["backend"] == "strace"), meta
    if agent == "claude":  # its hooks reached spyglass (in a sandbox too, its store deep in a long HOME)
        assert [r["tool_use_id"] for r in meta["extra"]["agent"]["hook_reports"]][:2] == ["call_1_1"] * 2
    assert (home / ".local" / "state" / "spyglass" / "runs").is_dir()  # the default store
    alerts = json.loads(spy("alerts", "latest", "--format", "json").stdout)
    assert alerts == [], [f"{a['level']} {a['rule_id']}: {a['message'][:300]}" for a in alerts]
    assert not [line for line in res.stderr.splitlines() if line.startswith("spyglass: ") and " pid " in line]
    assert spy("verify", "latest").returncode == 0
    changes = json.loads(spy("changes", "latest", "--format", "json").stdout)
    assert [c["path"] for c in changes["modified"]] == ["calc.py"]
    for args in (["show", "latest"], ["report"], ["changes", "latest"], ["show", "latest", "--format", "json"]):
        out = spy(*args)
        assert out.returncode == 0 and "Traceback" not in out.stderr, (args, out.stderr)


def test_claude_code_of_a_user_without_a_login_keeps_its_sessions_quietly(tmp_path: Path) -> None:
    """Claude Code run as a user would, not logged in: it writes ~/.claude/sessions/PID.json (its own
    state) and stops; that raises nothing.  A shell of the run writing there still does."""
    if not BIN["claude"].exists():
        pytest.skip("claude is not installed: run scripts/install-agents.sh")
    home = tmp_path / "home"
    home.mkdir()
    ws = home / "proj"
    _repo(ws)
    env = clean_env("OPENAI_", "CODEX_", "MSWEA_", "ANTHROPIC_", "CLAUDE_", "SPYGLASS_", "XDG_")
    env.update(HOME=str(home), NO_COLOR="1", PATH=f"{BIN['claude'].parent}:{env.get('PATH', '/usr/bin:/bin')}",
               DISABLE_TELEMETRY="1", DISABLE_AUTOUPDATER="1", DISABLE_ERROR_REPORTING="1",
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")

    def spy(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "spyglass", *args], cwd=ws, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=400, check=False)

    res = spy("run", "--", "claude", "-p", "hi")
    sessions = home / ".claude" / "sessions"
    assert sessions.is_dir(), res.stderr[-2000:]  # (its session file is removed again at its exit)
    events = spy("events", "latest", "--type", "file.", "--format", "json").stdout
    assert f'"{sessions}/' in events
    alerts = json.loads(spy("alerts", "latest", "--format", "json").stdout)
    assert not [a for a in alerts if a["rule_id"] == "persist-agent-config"], alerts
    spy("run", "--", "sh", "-c", f"echo '{{}}' > {sessions}/planted.json")
    alerts = json.loads(spy("alerts", "latest", "--format", "json").stdout)
    assert [a["rule_id"] for a in alerts if a["rule_id"] == "persist-agent-config"], alerts
