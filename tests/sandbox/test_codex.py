"""Acceptance: a real agent CLI (codex) starts and works inside the sandbox.

codex finds its own config through ``sandbox.pass_home: [~/.codex]``, reaches
its model (the scripted stub, as ``model.test`` through the egress proxy) and
runs a shell command in the workspace.  The CLI is installed once into
.cache/agents (shared with scripts/install-agents.sh, same pinned version).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from sandbox_helpers import needs_bwrap, needs_strace, run_sandboxed

REPO = Path(__file__).resolve().parents[2]
AGENTS = REPO / ".cache" / "agents"
CODEX = AGENTS / "node_modules" / ".bin" / "codex"

pytestmark = [needs_bwrap, needs_strace, pytest.mark.slow, pytest.mark.timeout(600)]


def _pinned_version() -> str:
    text = (REPO / "scripts" / "install-agents.sh").read_text()
    m = re.search(r"^CODEX_VERSION=(\S+)", text, re.M)
    assert m, "scripts/install-agents.sh pins CODEX_VERSION"
    return m.group(1)


@pytest.fixture(scope="module")
def codex() -> Path:
    if not CODEX.exists():
        if shutil.which("npm") is None or shutil.which("node") is None:
            pytest.skip("node/npm not installed")
        AGENTS.mkdir(parents=True, exist_ok=True)
        if not (AGENTS / "package.json").exists():
            (AGENTS / "package.json").write_text('{"name": "spyglass-test-agents", "private": true}\n')
        proc = subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(AGENTS),
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--save-exact",
                f"@openai/codex@{_pinned_version()}",
            ],
            capture_output=True,
            text=True,
            timeout=500,
            check=False,
        )
        if proc.returncode != 0 or not CODEX.exists():
            pytest.skip(f"could not install @openai/codex: {proc.stderr[-500:]}")
    if shutil.which("node") is None:
        pytest.skip("node not installed")
    return CODEX


def test_codex_starts_reads_its_config_and_runs_a_command(tmp_path: Path, codex: Path) -> None:
    from spyglass.agents.model_stub import start_stub
    from spyglass.agents.script import parse_script
    from spyglass.agents.setup import codex_config_toml

    script = {
        "model": "spyglass-stub",
        "steps": [{"say": "Writing the file.", "run": "echo codex-ran > codex-out.txt"}, {"say": "Done."}],
    }
    stub = start_stub(parse_script(script))
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    config = home / ".codex" / "config.toml"
    config.write_text(codex_config_toml("http://model.test/v1"))
    try:
        run = run_sandboxed(
            tmp_path,
            f"OPENAI_API_KEY=sandbox-test {codex} exec --skip-git-repo-check 'write it' >codex.log 2>&1",
            pass_home=["~/.codex"],
            readonly=[str(AGENTS)],  # the installed CLI, wherever the checkout is (even under /tmp)
            allow=["model.test", "127.0.0.0/8"],  # the stub listens on loopback
            resolve_extra={"model.test:80": ("127.0.0.1", stub.port)},
            rules=False,
        )
    finally:
        stub.close()
    log = (run.ws / "codex.log").read_text()
    assert run.outcome.exit_code == 0, log[-2000:]
    assert (run.ws / "codex-out.txt").read_text() == "codex-ran\n", log[-2000:]
    assert stub.steps_served == [0, 1]
    reqs = run.events("proxy.request")
    assert reqs and all((e.address, e.decision) == ("model.test", "allow") for e in reqs)
    # codex read its config inside the sandbox (a copy in the decoy home; the original is untouched)
    assert any(e.type == "file.read" and e.raw_path == str(config) for e in run.events())
    assert config.read_text() == codex_config_toml("http://model.test/v1")
    assert not (tmp_path / "work" / "home" / ".codex").exists()  # the copy went away with the run


def test_codex_reached_through_a_symlinked_directory_starts_inside(tmp_path: Path, codex: Path) -> None:
    """`cd ws && spyglass run --sandbox -- codex` with no flags, ``PATH`` naming the real CLI through a
    directory that is a symlink (``alias -> .cache/agents``): codex starts inside (before: exit 127,
    its ``.bin`` link pointing at a tree not there by that name)."""
    import os
    import sys

    (tmp_path / "alias").symlink_to(AGENTS)
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, "PATH": f"{tmp_path / 'alias' / 'node_modules' / '.bin'}:{os.environ['PATH']}",
           "HOME": str(tmp_path / "home")}  # fmt: skip
    env.pop("SPYGLASS_STORE", None)
    res = subprocess.run([sys.executable, "-m", "spyglass", "run", "-q", "--sandbox", "--", "codex", "--version"],
                         cwd=ws, env=env, capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"codex-cli {_pinned_version()}" in res.stdout
