"""What `spyglass bench` costs per trial, against the agent run bare.

For one task of a suite (default: the bundled example's csv-summary) and an
agent (default: codex from .cache/agents), alternating, --repeat times:

* bare: the agent against the scripted model, no spyglass;
* run: the same under `spyglass run` (capture, rules, evidence);
* trial: a whole bench trial (fresh workspace and home, skills placed, the
  agent under `spyglass run`, the verifier recorded too).

Prints the median wall time of each and the ratios to bare.

    .venv/bin/python benchmarks/bench_harness.py --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spyglass.bench.suite import load_suite  # noqa: E402
from spyglass.bench.trial import AgentSpec, TrialPlan, _agent_argv, _agent_env, run_trial  # noqa: E402


def _bare(task, agent: AgentSpec, root: Path, wrap: list[str]) -> float:  # type: ignore[no-untyped-def]
    import shutil

    from spyglass.agents.model_stub import start_stub
    from spyglass.agents.script import load_script

    shutil.rmtree(root, ignore_errors=True)
    ws, home = root / "ws", root / "home"
    shutil.copytree(task.environment, ws)
    skills = home / ".codex" / "skills" if agent.kind == "codex" else ws / ".agents" / "skills"
    skills.mkdir(parents=True)
    for s in task.skills:
        shutil.copytree(s, skills / s.name)
    stub = start_stub(load_script(task.model_script), variables={
        "PYTHON": sys.executable, "SKILL_DIR": str(skills / task.skills[0].name), "WS": str(ws)})
    try:
        env = _agent_env(agent, stub.url, root, home, task)
        t0 = time.perf_counter()
        subprocess.run([*wrap, *_agent_argv(agent, task, root)], cwd=ws, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=600)
        return time.perf_counter() - t0
    finally:
        stub.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default=str(REPO / "spyglass" / "bench" / "example"))
    ap.add_argument("--task", default="csv-summary")
    ap.add_argument("--agent", default="codex")
    ap.add_argument("--agent-bin", default=str(REPO / ".cache" / "agents" / "node_modules" / ".bin" / "codex"))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    task = load_suite(args.suite, [args.task]).tasks[0]
    agent = AgentSpec.parse(args.agent, args.agent_bin)
    times: dict[str, list[float]] = {"bare": [], "run": [], "trial": []}
    with tempfile.TemporaryDirectory(prefix="spyglass-bench-harness-") as tmp:
        root = Path(tmp)
        spy = [sys.executable, "-m", "spyglass", "run", "-q", "--store", str(root / "store"), "--"]
        for i in range(args.repeat):
            for mode in (("bare", "run", "trial") if i % 2 == 0 else ("trial", "run", "bare")):
                if mode == "trial":
                    t0 = time.perf_counter()
                    res = run_trial(TrialPlan(task=task, variant="clean", rep=i + 1), agent, root / "bench")
                    times["trial"].append(time.perf_counter() - t0)
                    if res.error or res.reward != 1.0:
                        print(f"trial {i}: {res.error or f'reward {res.reward}'}", file=sys.stderr)
                else:
                    times[mode].append(_bare(task, agent, root / mode, spy if mode == "run" else []))
    bare = statistics.median(times["bare"])
    print(f"task {task.name}, agent {agent.kind}, {args.repeat} alternating repeats (median wall time)")
    for mode, xs in times.items():
        med = statistics.median(xs)
        print(f"  {mode:6s} {med:7.3f} s   {med / bare:5.2f}x bare")
    extra = statistics.median(times["trial"]) - statistics.median(times["run"])
    print(f"  harness cost per trial beyond `spyglass run`: {extra:.3f} s (workspace, skills, verifier run, reward)")


if __name__ == "__main__":
    main()
