"""git's http(s) transport reads ~/.netrc by itself on every fetch (libcurl, for the one host it
contacts): in `--sandbox`, where ~/.netrc is a honeytoken, codex cloning its plugins repository
raised a critical cred-honeytoken-access.  That read stays silent; any other reader of the decoy
still fires: `cat`, and a copy of git-remote-http run from the workspace.  Real `spyglass run
--sandbox`, real bubblewrap and git, both backends."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GIT_HTTP = next((p for p in ("/usr/lib/git-core/git-remote-http", "/usr/libexec/git-core/git-remote-http")
                 if os.path.exists(p)), None)
pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
    pytest.mark.skipif(GIT_HTTP is None, reason="git's http transport not installed"),
    pytest.mark.timeout(300),
]


def _honeytoken_alerts(tmp_path: Path, backend: str, script: str) -> list[str]:
    home = tmp_path / "home"
    ws = home / "ws"
    ws.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPYGLASS_", "XDG_", "PYTEST_", "GIT_"))}
    env["HOME"] = str(home)
    spy = [sys.executable, "-m", "spyglass"]
    res = subprocess.run([*spy, "run", "-q", "--sandbox", "--backend", backend, "--", "sh", "-c", script],
                         cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240,
                         check=False)
    assert "Couldn't connect" in res.stderr or "Failed to connect" in res.stderr, res.stderr[-2000:]
    out = subprocess.run([*spy, "alerts", "latest", "--format", "json"], cwd=ws, env=env, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return [a["message"] for a in json.loads(out) if a["rule_id"] == "cred-honeytoken-access"]


def test_a_git_fetch_over_http_reads_the_decoy_netrc_quietly(tmp_path: Path, capture_backend: str) -> None:
    # (nothing listens on the sandbox's port 9: libcurl reads ~/.netrc before it connects)
    assert _honeytoken_alerts(tmp_path, capture_backend, "git ls-remote http://127.0.0.1:9/repo") == []


@pytest.mark.parametrize("reader", ["cat", "copy"])
def test_other_readers_of_the_decoy_netrc_still_fire(tmp_path: Path, capture_backend: str, reader: str) -> None:
    script = {
        "cat": "git ls-remote http://127.0.0.1:9/repo; cat ~/.netrc > /dev/null",
        # git's transport program copied out of the system's git-core and run from the workspace
        "copy": f"cp {GIT_HTTP} ./git-remote-http && printf 'list\\n\\n' | ./git-remote-http origin http://127.0.0.1:9/r",
    }[reader]
    fired = _honeytoken_alerts(tmp_path, capture_backend, script)
    opener = " opened by cat " if reader == "cat" else " opened by ./git-remote-http origin "
    assert len(fired) == 1 and opener in fired[0], fired
