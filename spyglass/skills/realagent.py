"""A real agent CLI follows SKILL.md, driven by the scripted model stub (``skill verify --agent``).

The stub (:mod:`spyglass.agents.model_stub`) answers as a model that first reads
SKILL.md and then runs every code block of it in order, one tool call per block,
then finishes.  The agent reaches the stub as ``model.skill-verify.test`` through
the sandbox's egress proxy (the name is pinned to the stub's loopback port by the
same resolver that serves the skill's declared hosts); the agent's own traffic to
its model is therefore not the skill's.

Each tool call runs the block's step file (``bash .spyglass-audit/steps/NN.sh``,
the same file the compliant agent runs), so every process the block starts
carries the step in its lineage: that is how events are told apart from the
agent's own activity (its config, logs and model calls are not judged), and how a
violation is traced to the SKILL.md line.

Agents: ``mini`` (mini-swe-agent), ``codex`` (@openai/codex), or any command
line with ``{task}`` in it that honours ``OPENAI_BASE_URL``/``OPENAI_API_BASE``.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any, Final

import msgspec

from spyglass.errors import UsageError
from spyglass.skills.workspace import Workspace

MODEL_HOST: Final = "model.skill-verify.test"
MODEL_URL: Final = f"http://{MODEL_HOST}/v1"
_REPO_AGENTS: Final = Path(__file__).resolve().parents[2] / ".cache" / "agents"


class AgentPlan(msgspec.Struct):
    argv: list[str]
    env: dict[str, str]
    script: dict[str, Any]
    readonly: list[str] = msgspec.field(default_factory=list)


def _find(name: str, *fallbacks: Path) -> str:
    found = shutil.which(name)
    if found:
        return found
    for f in fallbacks:
        if f.exists():
            return str(f)
    raise UsageError(
        f"--agent {name}: the `{name}` command is not installed",
        hint="./scripts/install-agents.sh installs codex and mini-swe-agent into .cache/agents",
    )


def model_script(ws: Workspace) -> dict[str, Any]:
    status = shlex.quote(str(ws.status_file))
    steps: list[dict[str, Any]] = [
        {"say": "I'll read the skill first.", "run": f"cat {shlex.quote(str(ws.skill))}/SKILL.md"}
    ]
    for s in ws.steps:
        f = shlex.quote(str(s.file))
        steps.append(
            {
                "say": f"Following {s.origin}.",
                "run": f'timeout 60 bash {f} </dev/null >{f}.out 2>&1; echo "{s.file.name} $?" >> {status}',
            }
        )
    steps.append({"run": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"})
    steps.append({"say": "Done: I followed every step of the skill."})
    return {"model": "spyglass-stub", "steps": steps}


def plan_agent(agent: str, ws: Workspace, task: str) -> AgentPlan:
    from spyglass.agents.setup import codex_home, mini_env

    script = model_script(ws)
    if agent == "mini":
        mini = _find("mini", _REPO_AGENTS / "mswea-venv" / "bin" / "mini")
        env = mini_env(MODEL_URL, config_dir=ws.audit_dir / "mini-config")
        argv = [
            mini,
            "--yolo",
            "--exit-immediately",
            "-m",
            "openai/spyglass-stub",
            "-t",
            task,
            "-o",
            str(ws.audit_dir / "mini.traj.json"),
        ]
        return AgentPlan(argv, env, script, [str(Path(mini).resolve().parents[1])])
    if agent == "codex":
        codex = _find("codex", _REPO_AGENTS / "node_modules" / ".bin" / "codex")
        home = codex_home(ws.audit_dir / "codex-home", MODEL_URL)
        env = {"CODEX_HOME": str(home), "OPENAI_API_KEY": "spyglass-stub"}
        argv = [codex, "exec", "--skip-git-repo-check", "--json", task]
        # the whole node_modules: the `.bin` link, the package and its platform binary (a sibling package)
        real = Path(codex).resolve()
        tree = next((p for p in real.parents if p.name == "node_modules"), real.parents[2])
        return AgentPlan(argv, env, script, [str(tree), str(Path(codex).parent)])
    if "{task}" not in agent:
        raise UsageError(f"--agent {agent!r}: one of compliant, mini, codex, or a command line with {{task}} in it")
    argv = [a.replace("{task}", task) for a in shlex.split(agent)]
    env = {"OPENAI_BASE_URL": MODEL_URL, "OPENAI_API_BASE": MODEL_URL, "OPENAI_API_KEY": "spyglass-stub"}
    return AgentPlan(argv, env, script)
