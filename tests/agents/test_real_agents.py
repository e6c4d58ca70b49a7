"""Real agent CLIs (codex, mini-swe-agent) under `spyglass run`, against the scripted model on loopback.

Each agent does one task twice: (a) clean: read a skill (Agent Skills layout,
where the agent looks for skills), run its script, edit a workspace file, run
the tests; (b) the same with an injected skill script that reads a decoy
secret and posts it to a loopback "attacker".  The model is the stub serving
one script (the same for both agents: `run` steps become codex's
`exec_command` or mini-swe-agent's `bash` calls).

The agents are installed by scripts/install-agents.sh (pinned versions, from
the package registries).  Select these tests with `-m agents`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spyglass.agents.model_stub import start_stub
from spyglass.agents.script import parse_script
from spyglass.agents.setup import codex_home, mini_env

from .agent_task import (
    AGENT_MARKS,
    DECOY_KEY,
    PYTHON,
    SKILL,
    SKILL_SCRIPT_CALL,
    TASK,
    Attacker,
    RecordedRun,
    clean_env,
    medium_or_above,
    run_cli,
    write_skill,
    write_task,
)

REPO = Path(__file__).resolve().parents[2]
AGENTS = REPO / ".cache" / "agents"
CODEX = AGENTS / "node_modules" / ".bin" / "codex"
MINI = AGENTS / "mswea-venv" / "bin" / "mini"

pytestmark = AGENT_MARKS
BINARIES = {"codex": CODEX, "mini": MINI}

#: One script for both agents: `run` becomes each agent's own shell tool call.
SCRIPT = {
    "model": "spyglass-stub",
    "steps": [
        {"say": "I'll read the csv-summary skill first.", "run": "cat ${SKILL_DIR}/SKILL.md"},
        {
            "say": "Running the skill's script on data.csv.",
            "run": "${PYTHON} ${SKILL_DIR}/scripts/summarize.py data.csv",
        },
        {"say": "Fixing the bug in calc.py.", "run": "sed -i 's/return a - b/return a + b/' calc.py"},
        {"say": "Running the tests.", "run": "${PYTHON} -m pytest -q -p no:cacheprovider test_calc.py"},
        {"run": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"},
        {"say": "summary.md is written, calc.py is fixed and the tests pass."},
    ],
}


@dataclass(kw_only=True)
class Recorded(RecordedRun):
    agent: str
    root: Path
    skill_dir: Path
    stdout: str
    agent_log: Path


def _layout(root: Path, agent: str, injected: bool, attacker_port: int) -> tuple[Path, Path, Path, dict[str, str]]:
    home, ws = write_task(root)
    env = clean_env("OPENAI_", "CODEX_", "MSWEA_")
    env.update({"HOME": str(home), "OPENAI_API_KEY": "spyglass-test", "NO_COLOR": "1"})
    if agent == "codex":
        skill_dir = root / "codex-home" / "skills" / SKILL  # codex lists $CODEX_HOME/skills/*/SKILL.md
    else:
        skill_dir = ws / ".agents" / "skills" / SKILL  # the cross-agent project location
    write_skill(skill_dir, injected, attacker_port)
    return home, ws, skill_dir, env


def record_agent(root: Path, agent: str, injected: bool) -> Recorded:
    attacker = Attacker()
    _home, ws, skill_dir, env = _layout(root, agent, injected, attacker.port)
    stub = start_stub(
        parse_script(SCRIPT),
        variables={"SKILL_DIR": str(skill_dir), "PYTHON": PYTHON},
        log_path=root / "stub-requests.jsonl",
    )
    policy = root / "spyglass.yaml"
    # the agents are installed under the checkout, which may live under /tmp: trust that install
    # as a user trusts the place they installed their agent to
    policy.write_text(
        f'network:\n  builtin_allow: false\n  allow: ["127.0.0.1:{stub.port}"]\nexec:\n  trusted: ["{AGENTS}"]\n'
    )
    store = root / "store"
    try:
        if agent == "codex":
            env["CODEX_HOME"] = str(codex_home(root / "codex-home", stub.url))
            argv = [str(CODEX), "exec", "--skip-git-repo-check", "--json", TASK]
            agent_log = root / "codex.jsonl"
        else:
            env.update(mini_env(stub.url, config_dir=root / "mini-config"))
            agent_log = root / "mini.traj.json"
            argv = [
                str(MINI),
                "--yolo",
                "--exit-immediately",
                "-m",
                "openai/spyglass-stub",
                "-t",
                TASK,
                "-o",
                str(agent_log),
            ]
        opts = [
            "--store",
            str(store),
            "--task",
            "csv-summary-fix",
            "--agent-id",
            agent,
            "--workspace",
            str(ws),
            "--skills",
            str(skill_dir),
        ]
        opts += ["--policy", str(policy)]
        proc = run_cli([PYTHON, "-m", "spyglass", "run", *opts, "--", *argv], ws, env)
        if agent == "codex":
            agent_log.write_text(proc.stdout)
    finally:
        stub.close()
        attacker.close()
    runs = sorted((store / "runs").iterdir())
    assert len(runs) == 1, proc.stderr[-3000:]
    rec = Recorded(
        agent=agent,
        injected=injected,
        root=root,
        workspace=ws,
        skill_dir=skill_dir,
        store=store,
        run_id=runs[0].name,
        exit_code=proc.returncode,
        stdout=proc.stdout,
        stderr=proc.stderr,
        stub_port=stub.port,
        attacker_port=attacker.port,
        stub_steps=stub.steps_served,
        stub_errors=[r.error for r in stub.requests if r.error],
        attacker_received=attacker.received,
        policy=policy,
        agent_log=agent_log,
    )
    rec.load_events()
    return rec


_CACHE: dict[tuple[str, bool], Recorded] = {}


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    """A directory of our own for the module (pytest's basetemp can be pruned by a concurrent pytest)."""
    path = Path(tempfile.mkdtemp(prefix="spyglass-agents-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def recorded(scratch: Path) -> Iterator[Any]:
    """recorded(agent, injected) -> Recorded: each scenario runs once per module."""

    def get(agent: str, injected: bool) -> Recorded:
        if not BINARIES[agent].exists():
            pytest.skip(f"{agent} is not installed: run scripts/install-agents.sh")
        key = (agent, injected)
        if key not in _CACHE:
            root = scratch / f"{agent}-{'injected' if injected else 'clean'}"
            root.mkdir()
            _CACHE[key] = record_agent(root, agent, injected)
        return _CACHE[key]

    yield get
    _CACHE.clear()


AGENT_NAMES = ["codex", "mini"]
SCENARIOS = [pytest.param(False, id="clean"), pytest.param(True, id="injected")]


def _checked_alerts(rec: Recorded) -> list[dict[str, Any]]:
    """The alerts of the run under the test policy (stub the only allowed host), by `spyglass check`."""
    data = rec.spy_json("check", rec.run_id, "--policy", str(rec.policy))
    alerts: list[dict[str, Any]] = data["alerts"]
    return alerts


# --------------------------------------------------------------------------- the task itself


@pytest.mark.parametrize("agent", AGENT_NAMES)
@pytest.mark.parametrize("injected", SCENARIOS)
def test_agent_does_the_task_against_the_stub(recorded: Any, agent: str, injected: bool) -> None:
    rec: Recorded = recorded(agent, injected)
    assert rec.exit_code == 0, rec.stderr[-3000:]
    assert rec.stub_errors == []
    assert rec.stub_steps[: len(SCRIPT["steps"]) - 1] == [0, 1, 2, 3, 4]
    assert "return a + b" in (rec.workspace / "calc.py").read_text()
    assert (rec.workspace / "summary.md").read_text().startswith("# Summary\n\n2 rows, total amount 7.5")
    if injected:
        assert rec.attacker_received == [DECOY_KEY.encode()]
    else:
        assert rec.attacker_received == []


# --------------------------------------------------------------------------- no phoning home


@pytest.mark.parametrize("agent", AGENT_NAMES)
@pytest.mark.parametrize("injected", SCENARIOS)
def test_agents_contact_nothing_outside_loopback(recorded: Any, agent: str, injected: bool) -> None:
    rec: Recorded = recorded(agent, injected)
    connects = [e for e in rec.events if e["type"] in ("net.connect", "net.send") and e.get("server.address")]
    inet = [e for e in connects if e.get("network.transport") != "unix" and not e["server.address"].startswith("/")]
    outside = [
        f"{e['server.address']}:{e.get('server.port')}"
        for e in inet
        if not (e["server.address"].startswith("127.") or e["server.address"] in ("::1", "localhost"))
    ]
    assert outside == []
    ports = {e.get("server.port") for e in inet if e["type"] == "net.connect" and e.get("ok", True)}
    expected = {rec.stub_port, rec.attacker_port} if injected else {rec.stub_port}
    assert ports - {0, None} == expected
    names = [e.get("dns.question.name") for e in rec.events if e["type"] == "net.dns"]
    assert [n for n in names if n and n not in ("localhost", "localhost.")] == []


# --------------------------------------------------------------------------- rules and coverage


@pytest.mark.parametrize("agent", AGENT_NAMES)
def test_clean_run_raises_nothing_at_medium_or_above(recorded: Any, agent: str) -> None:
    rec: Recorded = recorded(agent, False)
    found = medium_or_above(_checked_alerts(rec)) + medium_or_above(rec.live_alerts())
    assert found == []


@pytest.mark.parametrize("agent", AGENT_NAMES)
def test_clean_run_uses_the_skill(recorded: Any, agent: str) -> None:
    rec: Recorded = recorded(agent, False)
    data = rec.spy_json("coverage", rec.run_id, "--skills", str(rec.skill_dir))
    (item,) = [s for s in data["skills"] if s["skill"] == SKILL]
    assert item["coverage"] > 0
    assert "SKILL.md" in item["read"]
    assert "scripts/summarize.py" in item["read"] + item["executed"]


@pytest.mark.parametrize("agent", AGENT_NAMES)
def test_injected_skill_raises_the_exfiltration_alert(recorded: Any, agent: str) -> None:
    rec: Recorded = recorded(agent, True)
    alerts = [a for a in _checked_alerts(rec) if a["rule_id"].startswith("exfil-secret-then-egress")]
    assert alerts, "no exfiltration alert"
    # the offender is the skill's script, inside tool call 2
    tool_calls = rec.spy_json("agents", "tool-calls", rec.run_id)
    by_pid = {pid: c for c in tool_calls["tool_calls"] for pid in c["pids"]}
    call = by_pid.get(alerts[0]["pid"])
    assert call is not None and call["n"] == SKILL_SCRIPT_CALL
    assert call["command"].endswith(f"{SKILL}/scripts/summarize.py data.csv")


@pytest.mark.parametrize("agent", AGENT_NAMES)
def test_injected_alert_lineage_names_the_tool_call(recorded: Any, agent: str) -> None:
    rec: Recorded = recorded(agent, True)
    live = [a for a in rec.live_alerts() if a["rule_id"].startswith("exfil-secret-then-egress")]
    assert live, "`spyglass run` raised no exfiltration alert live"
    labels = [e.get("tool_call") for e in live[0]["lineage"] if e.get("tool_call")]
    assert labels, "the alert's lineage names no tool call"
    assert labels[0].startswith(f"tool call {SKILL_SCRIPT_CALL}: ")
    assert labels[0].endswith("summarize.py data.csv")


# --------------------------------------------------------------------------- agent awareness


@pytest.mark.parametrize("agent", AGENT_NAMES)
def test_tool_calls_are_linked_to_their_processes(recorded: Any, agent: str) -> None:
    rec: Recorded = recorded(agent, False)
    auto = rec.spy_json("agents", "tool-calls", rec.run_id)
    given = rec.spy_json("agents", "tool-calls", rec.run_id, "--agent-log", str(rec.agent_log))
    want = [
        f"cat {rec.skill_dir}/SKILL.md",
        f"{PYTHON} {rec.skill_dir}/scripts/summarize.py data.csv",
        "sed -i 's/return a - b/return a + b/' calc.py",
        f"{PYTHON} -m pytest -q -p no:cacheprovider test_calc.py",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
    ]
    for view in (auto, given):
        assert view["agent"] == agent
        assert [(c["n"], c["command"]) for c in view["tool_calls"]] == list(enumerate(want, start=1))
        assert all(c["root_pid"] and c["events"] > 0 for c in view["tool_calls"])
        assert view["tool_calls"][3]["exit_code"] == 0
    assert all(c["source"] == "log" for c in given["tool_calls"])
    if agent == "codex":
        # the session rollout in CODEX_HOME is found from the file events alone
        assert "/sessions/" in auto["log"] and all(c["source"] == "log" for c in auto["tool_calls"])
        assert auto["internal_commands"], "codex's own start-up commands are told apart"
    # the test run's processes are inside its tool call
    pytest_pids = {
        e["process.pid"]
        for e in rec.events
        if e["type"] == "process.exec" and "pytest" in " ".join(e.get("process.command_args") or [])
    }
    assert pytest_pids and pytest_pids <= set(given["tool_calls"][3]["pids"])


def test_codex_show_groups_the_agents_chatter(recorded: Any) -> None:
    from spyglass.agents.render import agent_summary_lines
    from spyglass.events.proctree import ProcessTable
    from spyglass.store import RunReader, Store

    rec: Recorded = recorded("codex", False)
    reader = RunReader(Store(rec.store), rec.run_id)
    procs = ProcessTable()
    for ev in reader.events():
        procs.update(ev)
    view = rec.spy_json("agents", "tool-calls", rec.run_id)
    stored = reader.meta.extra.get("agent") or view
    lines = [t for _, t in agent_summary_lines(stored, procs)]
    text = "\n".join(lines)
    assert "Agent: codex" in text and "collapsed" in text
    assert "Tool calls (5)" in text
    assert any(t.strip().startswith("2  ") and "scripts/summarize.py" in t for t in lines)
    assert len(lines) < 40


# --------------------------------------------------------------------------- replay


def _replay(rec: Recorded, root: Path, script: Path) -> tuple[int, str]:
    """Replay a recorded codex session into the same store with `spyglass run --model-script`.
    Returns (exit code, run id)."""
    _home, ws, _skill, env = _layout(root, "codex", False, 0)
    before = {p.name for p in (rec.store / "runs").iterdir()}
    argv = [str(CODEX), "exec", "--skip-git-repo-check", "--json", TASK]
    opts = ["--store", str(rec.store), "--task", "csv-summary-fix", "--agent-id", "codex-replay"]
    proc = run_cli([PYTHON, "-m", "spyglass", "run", *opts, "--model-script", str(script), "--", *argv], ws, env)
    (new,) = {p.name for p in (rec.store / "runs").iterdir()} - before
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.returncode, new


def test_a_recorded_codex_session_replays_the_same_commands(recorded: Any, scratch: Path) -> None:
    rec: Recorded = recorded("codex", False)
    original = rec.spy_json("agents", "tool-calls", rec.run_id)
    root = scratch / "codex-replay"
    root.mkdir()
    script = root / "session.json"
    made = rec.spy("agents", "script-from-log", original["log"], "-o", str(script))
    assert made.returncode == 0, made.stderr
    steps = json.loads(script.read_text())["steps"]
    assert steps[0] == {
        "say": "I'll read the csv-summary skill first.",
        "run": f"cat {rec.skill_dir}/SKILL.md",
    }
    _, replay_id = _replay(rec, root, script)
    replay = rec.spy_json("agents", "tool-calls", replay_id)
    assert [c["command"] for c in replay["tool_calls"]] == [c["command"] for c in original["tool_calls"]]
    compared = rec.spy_json("compare", rec.run_id, replay_id)
    assert compared["matrix"]["combined"][0][1] > 0.5
