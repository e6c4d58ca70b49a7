"""`spyglass policy lint` with no file: ./spyglass.yaml when there is one, else the policy `run` would
use (`$SPYGLASS_POLICY`, ~/.config/spyglass/policy.yaml, /etc/spyglass/policy.yaml), else one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _lint(tmp_path: Path, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if k not in ("SPYGLASS_POLICY", "XDG_CONFIG_HOME")}
    e.update(HOME=str(tmp_path / "home"), NO_COLOR="1", **env)
    return subprocess.run([sys.executable, "-m", "spyglass", "policy", "lint"], cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=60, check=False)


def test_lint_checks_the_users_policy(tmp_path: Path) -> None:
    user = tmp_path / "home" / ".config" / "spyglass" / "policy.yaml"
    user.parent.mkdir(parents=True)
    user.write_text("mode: bogus\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    res = _lint(tmp_path, ws)
    assert res.returncode == 2
    assert f"{user}:1:7: bad value 'bogus' for mode" in res.stdout, res.stdout + res.stderr
    # a spyglass.yaml of the directory comes first, as before
    (ws / "spyglass.yaml").write_text("mode: observe\n")
    res = _lint(tmp_path, ws)
    assert res.returncode == 0 and res.stdout == "", res.stdout + res.stderr
    # $SPYGLASS_POLICY before the user's
    named = tmp_path / "named.yaml"
    named.write_text("fail_on: nope\n")
    res = _lint(tmp_path, tmp_path, SPYGLASS_POLICY=str(named))
    assert res.returncode == 2 and f"{named}:1:10" in res.stdout, res.stdout + res.stderr


def test_lint_without_any_policy_says_so(tmp_path: Path) -> None:
    if Path("/etc/spyglass/policy.yaml").exists():
        pytest.skip("this machine has a system policy")
    (tmp_path / "home").mkdir()
    res = _lint(tmp_path, tmp_path)
    assert res.returncode == 2
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("spyglass: error: no policy file to check"), res.stderr
