"""Pre-existing files and secret copies, live and replayed.

* ``spyglass check`` over a stored run gives the destruction alerts the live run
  gave: the before-manifest is read back from the run's evidence;
* files deleted that git ignores (build output) are regenerable: no alert;
* a test run that loads the workspace's .env and writes files does not make
  those files secrets.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")


def _spy(store: Path, cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SPYGLASS_STORE": str(store)}
    return subprocess.run([sys.executable, "-m", "spyglass", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=180, check=False)


def _layout(tmp: Path) -> tuple[Path, Path]:
    ws, home = tmp / "ws", tmp / "home"
    home.mkdir()
    for i in range(6):
        (ws / "src").mkdir(parents=True, exist_ok=True)
        (ws / "src" / f"m{i}.py").write_text(f"x = {i}\n")
        (ws / "build").mkdir(exist_ok=True)
        (ws / "build" / f"o{i}.o").write_text("obj\n")
    (ws / ".gitignore").write_text("build/\n")
    (ws / ".env").write_text("TOKEN=decoy\n")
    return ws, home


def _alerts(store: Path, ws: Path, home: Path, script: str) -> tuple[list[str], list[str]]:
    proc = _spy(store, ws, home, "run", "--store", str(store), "--workspace", str(ws), "--", "/bin/sh", "-c", script)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run,) = [p for p in (store / "runs").iterdir() if p.is_dir()]
    path = run / "alerts.jsonl"
    live = sorted(json.loads(x).get("rule_id", "") for x in path.read_text().splitlines()) if path.exists() else []
    out = _spy(store, ws, home, "check", run.name, "--format", "json")
    assert out.returncode in (0, 1, 6), out.stderr
    checked = sorted(a["rule_id"] for a in json.loads(out.stdout)["alerts"])
    return live, checked


def test_destroying_user_files_alerts_live_and_in_check(tmp_path: Path) -> None:
    ws, home = _layout(tmp_path)
    live, checked = _alerts(tmp_path / "store", ws, home, "rm -f src/*.py")
    assert "destroy-preexisting-files" in live
    assert live == checked


def test_build_output_and_env_loading_are_quiet(tmp_path: Path) -> None:
    ws, home = _layout(tmp_path)
    script = f"rm -rf build && {sys.executable} -c \"open('.env').read(); open('report.txt', 'w').write('ok')\""
    live, checked = _alerts(tmp_path / "store", ws, home, script)
    assert [r for r in live if not r.startswith(("cred-workspace-env-read", "destroy-preexisting-file"))] == []
    assert "cred-secret-moved" not in checked
