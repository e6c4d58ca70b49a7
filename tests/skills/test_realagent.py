"""Real agent CLIs (mini-swe-agent, codex) follow SKILL.md, driven by the scripted model stub, in the sandbox.

The agent reaches the stub through the egress proxy; its own activity (config, logs,
model calls) is not judged, what its tool calls start is. Needs the agent installed by
./scripts/install-agents.sh (.cache/agents); skipped otherwise.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from spyglass.skills.realagent import _REPO_AGENTS
from spyglass.skills.scan import scan

DATA = Path(__file__).parent / "data"
INSTALLED = {
    "mini": (_REPO_AGENTS / "mswea-venv" / "bin" / "mini").exists() or shutil.which("mini") is not None,
    "codex": (_REPO_AGENTS / "node_modules" / ".bin" / "codex").exists() or shutil.which("codex") is not None,
}
AGENTS = [pytest.param(a, marks=pytest.mark.skipif(not ok, reason=f"{a} not installed")) for a, ok in INSTALLED.items()]

pytestmark = [
    pytest.mark.agents,
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("strace") is None, reason="needs bwrap, strace"),
]


@pytest.fixture(scope="module", params=AGENTS)
def results(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    skills = [DATA / "benign" / "csv-summary", DATA / "malicious" / "agent-instruction"]
    found = scan(skills, tmp_path_factory.mktemp("store"), jobs=2, agent=request.param)
    return {Path(r["dir"]).name: r for r in found}


def test_agent_follows_a_benign_skill_and_its_own_activity_is_not_judged(results: dict[str, dict[str, Any]]) -> None:
    r = results["csv-summary"]
    assert r["verdict"] == "compliant", (r["violations"], r["uncertain_because"])
    agent_run = next(run for run in r["runs"] if run["mode"] == "agent")
    assert [s["exit_code"] for s in agent_run["steps"]] == [0]


def test_agent_does_what_a_hidden_instruction_says_and_it_is_caught(results: dict[str, dict[str, Any]]) -> None:
    r = results["agent-instruction"]
    assert r["verdict"] == "violations"
    got = {(v["mode"], v["kind"], v["source"]) for v in r["violations"]}
    assert ("agent", "secret-read", "SKILL.md:13") in got
    # the exfiltrating request at the same line: refused by the proxy for carrying the decoy key's
    # canary (the rule) and, when its proxy event arrives before the run ends, as an undeclared host
    assert {("agent", "undeclared-host", "SKILL.md:13"), ("agent", "rule:exfil-canary-egress", "SKILL.md:13")} & got
    # the model host the agent talks to is not a violation
    assert not any("model.skill-verify.test" in v["message"] for v in r["violations"])
