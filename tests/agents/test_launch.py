"""What the rules know about the program the user launched: its install tree, which agent it is.

The live test runs a fake agent installed under /tmp the way npm installs codex
(a launcher in node_modules/.bin, a vendored binary in a sibling package): the
vendored binary is trusted for exec, a program the run drops in /tmp is not.
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

import pytest

from spyglass.agents.adapters import adapter_named, launched_agent
from spyglass.agents.launch import install_trees


@pytest.fixture
def npm_tree() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="spyglass-npm-", dir="/tmp"))
    nm = base / "node_modules"
    vendor = nm / "fake-agent-linux-x64" / "vendor"
    vendor.mkdir(parents=True)
    shutil.copy("/bin/true", vendor / "fake-agent")
    launcher = nm / "fake-agent" / "bin" / "fake-agent.sh"
    launcher.parent.mkdir(parents=True)
    launcher.write_text(
        '#!/bin/sh\nd=$(dirname "$(readlink -f "$0")")\n"$d/../../fake-agent-linux-x64/vendor/fake-agent"\n'
        'if [ -n "$DROP" ]; then cp /bin/true "$DROP" && "$DROP"; fi\n'
    )
    launcher.chmod(0o755)
    (nm / ".bin").mkdir()
    (nm / ".bin" / "fake-agent").symlink_to("../fake-agent/bin/fake-agent.sh")
    yield nm
    shutil.rmtree(base, ignore_errors=True)


def test_install_trees_of_an_npm_launcher(npm_tree: Path) -> None:
    info = install_trees([str(npm_tree / ".bin" / "fake-agent")], "/")
    assert str(npm_tree) in info["trees"]  # type: ignore[operator]
    assert "/bin/sh" in info["interpreters"]  # type: ignore[operator]
    assert info["kind"] is None


def test_install_trees_of_a_virtualenv_and_agent_kinds(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    mini = venv / "bin" / "mini"
    mini.write_text("#!/bin/sh\n")
    mini.chmod(0o755)
    info = install_trees([str(mini)], "/")
    assert info["trees"] == [str(venv)]
    assert info["kind"] == "mini"


def _kind(*programs: str) -> str | None:
    agent = launched_agent(programs)
    return agent.name if agent else None


def test_the_launched_agent_is_known_by_its_package_or_name() -> None:
    assert _kind("/x/node_modules/@openai/codex/bin/codex.js") == "codex"
    assert _kind("/x/node_modules/@anthropic-ai/claude-code/cli.js") == "claude"
    assert _kind("/usr/local/bin/claude", "/opt/lib/cli.js") == "claude"
    assert _kind("/opt/lib/cli.js") is None  # any node program's entry point
    assert _kind("/home/u/.local/bin/aider") == "aider"
    assert _kind("/usr/bin/python3") is None


def test_each_agent_declares_its_own_state() -> None:
    codex = adapter_named("codex").state_globs("/h")
    assert "/h/.codex/*.sqlite" in codex and "/h/.codex/sessions/**" in codex
    assert "/h/.codex/config.toml" not in codex  # what a user writes stays watched
    assert "/h/.claude/projects/**" in adapter_named("claude_code").state_globs("/h/")  # a run recorded before
    assert "/h/.aider*" in adapter_named("aider").state_globs("/h")
    assert adapter_named("generic").state_globs("/h") == []


def _run(npm_tree: Path, tmp: Path, env_extra: dict[str, str]) -> list[dict[str, object]]:
    ws = tmp / "ws"
    ws.mkdir(parents=True)
    store = tmp / "store"
    env = {"HOME": str(tmp), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env_extra}
    proc = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "--store", str(store), "--workspace", str(ws), "--",
         str(npm_tree / ".bin" / "fake-agent")],
        cwd=ws, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run,) = [p for p in (store / "runs").iterdir() if p.is_dir()]
    path = run / "alerts.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [r.get("alert", r) for r in rows]


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
def test_launched_install_tree_is_trusted_and_a_drop_is_not(npm_tree: Path, tmp_path: Path) -> None:
    clean = _run(npm_tree, tmp_path / "a", {})
    assert [a["rule_id"] for a in clean if a["level"] in ("medium", "high", "critical")] == []
    drop = str(npm_tree.parent / "dropped")
    dirty = _run(npm_tree, tmp_path / "b", {"DROP": drop})
    fired = {a["rule_id"] for a in dirty}
    assert "exec-untrusted-location" in fired or "exec-run-written-file" in fired
