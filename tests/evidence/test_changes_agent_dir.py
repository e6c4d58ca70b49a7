"""`changes` of a `--model-script` run counts the writes in the agent's own per-run directory (made by
spyglass for the agent) on one line, as `show` does, and shortens long command lines; `--full` and the
JSON list everything."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")

LONG = "x" * 400


def _spy(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spyglass", *args], cwd=tmp_path / "ws", env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_changes_fold_the_agents_own_directory(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    # an agent called codex (spyglass gives it a CODEX_HOME in its per-run directory)
    (bindir / "codex").write_text(
        "#!/bin/sh\n"
        'mkdir -p "$CODEX_HOME/sessions" && echo s > "$CODEX_HOME/sessions/a" && echo s > "$CODEX_HOME/b"\n'
        f'echo out > "$OUTSIDE/seen.txt"\n'
        f'sh -c \': {LONG}; echo again > "$OUTSIDE/long.txt"\'\n'
        "echo fixed > calc.py\n"
    )
    (bindir / "codex").chmod(0o755)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "calc.py").write_text("bug\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    script = tmp_path / "task.json"
    script.write_text(json.dumps({"model": "m", "steps": [{"say": "done"}]}))
    env = dict(os.environ, HOME=str(tmp_path / "home"), NO_COLOR="1", SPYGLASS_STORE=str(tmp_path / "store"),
               PATH=f"{bindir}:{os.environ['PATH']}", OUTSIDE=str(outside))
    res = _spy(tmp_path, env, "run", "--backend", "strace", "--model-script", str(script), "--", "codex", "exec", "x")
    assert res.returncode == 0, res.stderr
    text = _spy(tmp_path, env, "changes", "latest", "--stat").stdout
    assert "M  calc.py" in text
    assert f"{outside}/seen.txt" in text and f"{outside}/long.txt" in text
    (own_line,) = [line for line in text.splitlines() if "in the agent's own per-run directory" in line]
    own = own_line.split("directory ", 1)[1].split(" (changes --full)")[0]
    assert own.startswith(str(tmp_path / "store")) and own.endswith("/")
    assert not any(line.strip().startswith(f"W  {own}") for line in text.splitlines())
    assert LONG not in text and "…" in text
    full = _spy(tmp_path, env, "changes", "latest", "--stat", "--full").stdout
    assert f"W  {own}codex-home/b" in full and LONG in full
    data = json.loads(_spy(tmp_path, env, "changes", "latest", "--format", "json").stdout)
    assert any(w["path"] == f"{own}codex-home/b" for w in data["outside_writes"])
