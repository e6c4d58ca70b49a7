"""``spyglass skill verify``: detonate a skill in the sandbox, hold what it did against its spec, give a verdict.

Verdicts (exit codes of the command):

* ``violations`` (1): a run did something the spec does not declare, or the rule
  pack raised an alert at ``high`` or above;
* ``uncertain`` (3): no violation, but the evidence is not enough to say
  ``compliant``: a script of the skill was never run, a step failed or timed out,
  the capture was incomplete, repeats behaved differently, or the static
  pre-scan found something to look at;
* ``compliant`` (0): none of the above.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import msgspec

from spyglass.errors import UsageError
from spyglass.skills import audit
from spyglass.skills.judge import Judge, Violation
from spyglass.skills.prescan import Finding, prescan
from spyglass.skills.skillmd import SKILL_FILE
from spyglass.skills.spec import Spec, derive_spec
from spyglass.skills.standin import StandIn, start_standin
from spyglass.skills.workspace import Workspace, prepare_workspace, skill_scripts
from spyglass.store import RunReader, Store

VERDICT_EXIT: Final = {"compliant": 0, "violations": 1, "uncertain": 3}
BUILTIN_AGENTS: Final = ("compliant", "mini", "codex")


class RunRecord(msgspec.Struct):
    mode: str
    repeat: int
    run_id: str
    exit_code: int
    seconds: float
    steps: list[dict[str, Any]]
    violations: int
    facts: dict[str, list[str]]
    html: str | None = None
    workspace: str | None = None  # kept with --keep


class SkillResult(msgspec.Struct):
    skill: str
    dir: str
    verdict: str
    violations: list[Violation] = msgspec.field(default_factory=list)
    reasons: list[str] = msgspec.field(default_factory=list)  # why uncertain
    findings: list[Finding] = msgspec.field(default_factory=list)
    runs: list[RunRecord] = msgspec.field(default_factory=list)
    spec: Spec | None = None
    seconds: float = 0.0
    error: str | None = None

    @property
    def exit_code(self) -> int:
        return VERDICT_EXIT.get(self.verdict, 3)

    def to_dict(self) -> dict[str, Any]:
        return {
            "skill": self.skill,
            "dir": self.dir,
            "verdict": self.verdict,
            "error": self.error,
            "violations": [v.to_dict() for v in self.violations],
            "uncertain_because": self.reasons,
            "prescan": [f.to_dict() for f in self.findings],
            "runs": [msgspec.structs.asdict(r) for r in self.runs],
            "seconds": round(self.seconds, 3),
            "spec": self.spec.to_dict() if self.spec else None,
        }


def _policy(base: Path, ws: Workspace, spec: Spec, more_hosts: list[str], readonly: list[str],
            env_pass: list[str]) -> Path:
    import yaml

    allow = [*spec.values("hosts"), *more_hosts, "localhost", "127.0.0.0/8"]
    doc = {
        "network": {"builtin_allow": False, "allow": allow},
        # the sandbox passes a short allowlist of variables; the driver's and the agent's own must go in too
        "sandbox": {"readonly": [str(ws.skill), *readonly], "env": {"pass": sorted(set(env_pass))}},
        "workspace": [str(ws.root)],
    }
    path = base / "spyglass.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _one_run(
    skill_dir: Path,
    spec: Spec,
    mode: str,
    rep: int,
    base: Path,
    store: Store,
    standin: StandIn,
    inputs: Path | None,
    html_dir: Path | None,
    agent: str = "compliant",
) -> tuple[RunRecord, list[Violation], list[str], set[str]]:
    import os

    from spyglass.session import RunOptions, run_session

    ws = prepare_workspace(base / f"{mode}-{rep}", skill_dir, spec, mode, inputs)
    real = mode == "agent" and agent != "compliant"
    argv, env, more_hosts, readonly = ws.driver_argv(), {**os.environ, **ws.env}, [], []
    extra_resolve: dict[str, str | tuple[str, int]] = {}
    with contextlib.ExitStack() as stack:
        if real:
            from spyglass.agents.model_stub import start_stub
            from spyglass.agents.script import parse_script
            from spyglass.skills.realagent import MODEL_HOST, plan_agent

            plan = plan_agent(agent, ws, f"Use the skill in {ws.skill} (read its SKILL.md and follow it).")
            stub = start_stub(parse_script(plan.script, "skill-verify"))
            stack.callback(stub.close)
            log = shlex.quote(str(ws.audit_dir / "agent.log"))
            argv = ["/bin/sh", "-c", f'exec "$@" </dev/null >{log} 2>&1', "agent", *plan.argv]
            env = {**env, **plan.env}
            more_hosts, readonly = [MODEL_HOST], plan.readonly
            extra_resolve = {f"{MODEL_HOST}:80": ("127.0.0.1", stub.port)}
        opts = RunOptions(
            argv=argv,
            cwd=str(ws.root),
            env=env,
            policy_file=_policy(ws.base, ws, spec, more_hosts, readonly,
                                [*ws.env, *(plan.env if real else {})]),
            task=f"skill-verify:{spec.skill}:{mode}",
            sandbox=True,
            live_alerts=False,
            workspace_evidence=False,
            skills=[str(ws.skill)],
            wait_descendants=2.0,
            workspace=[str(ws.root)],
            sandbox_resolver=standin.resolver(spec.values("hosts"), extra_resolve),
            sandbox_host_loopback=True,
        )
        t0 = time.monotonic()
        outcome = run_session(opts, store)
        seconds = time.monotonic() - t0
    reader = RunReader(store, outcome.meta.id)
    events = list(reader.events())
    judgement = Judge(spec, ws, dict(outcome.meta.extra), audit.read_records(ws.audit_dir), only_steps=real).judge(
        events, reader.alerts()
    )
    for v in judgement.violations:
        v.run, v.mode = outcome.meta.id, mode
    reasons: list[str] = []
    status = ws.step_status()
    steps = []
    for s in ws.steps:
        rc = status.get(s.index)
        steps.append({"step": s.index, "origin": s.origin, "command": s.text[:300], "exit_code": rc})
        if rc is None:
            reasons.append(f"{mode} run {rep + 1}: step {s.index} ({s.origin}) did not finish")
        elif rc != 0:
            reasons.append(
                f"{mode} run {rep + 1}: step {s.index} ({s.origin}) exited {rc}" + (" (timed out)" if rc == 124 else "")
            )
    if outcome.exit_code != 0:
        reasons.append(f"{mode} run {rep + 1}: the run exited {outcome.exit_code}")
    ev_extra = outcome.meta.extra.get("evidence")
    if isinstance(ev_extra, dict) and ev_extra.get("partial"):
        reasons.append(f"{mode} run {rep + 1}: the capture is partial ({ev_extra.get('sink_errors')})")
    html = None
    if html_dir is not None:
        from spyglass.report.html import html_report_bytes

        html_dir.mkdir(parents=True, exist_ok=True)
        out = html_dir / f"{spec.skill}-{mode}-{rep + 1}.html"
        out.write_bytes(html_report_bytes(reader))
        html = str(out)
    rec = RunRecord(
        mode,
        rep + 1,
        outcome.meta.id,
        outcome.exit_code,
        round(seconds, 3),
        steps,
        len(judgement.violations),
        judgement.facts,
        html,
    )
    return rec, judgement.violations, reasons, judgement.executed


def check_agent(agent: str) -> str:
    if agent not in BUILTIN_AGENTS and "{task}" not in agent:
        raise UsageError(
            f"--agent {agent!r}: unknown agent", hint="one of compliant, mini, codex, or a command line with {task}"
        )
    return agent


def verify_skill(
    skill_dir: Path,
    store: Store,
    *,
    spec: Spec | None = None,
    inputs: Path | None = None,
    repeat: int = 1,
    agent: str = "compliant",
    html_dir: Path | None = None,
    keep: bool = False,
) -> SkillResult:
    """Verify one skill.  ``agent``: who follows SKILL.md in the ``agent`` runs: ``compliant`` (the
    built-in program), ``mini``, ``codex`` or a command line with ``{task}`` (a real agent CLI driven
    by the scripted model stub, see :mod:`spyglass.skills.realagent`)."""
    check_agent(agent)
    if repeat < 1:
        raise UsageError("--repeat must be at least 1")
    skill_dir = skill_dir.resolve()
    if not (skill_dir / SKILL_FILE).is_file():
        raise UsageError(f"{skill_dir}: no {SKILL_FILE} here", hint="a skill is a directory holding SKILL.md")
    t0 = time.monotonic()
    spec = spec or derive_spec(skill_dir)
    result = SkillResult(spec.skill, str(skill_dir), "compliant", spec=spec, findings=prescan(skill_dir))
    base = Path(tempfile.mkdtemp(prefix=f"spyglass-skill-{skill_dir.name[:40]}-"))
    standin = start_standin()
    seen: dict[tuple[str, str], Violation] = {}
    exercised: set[str] = set()
    facts: dict[str, list[dict[str, list[str]]]] = {}
    has_scripts = bool(skill_scripts(skill_dir))
    try:
        for rep in range(repeat):
            for mode in ("direct", "agent"):
                if mode == "direct" and not has_scripts:
                    continue
                rec, vios, reasons, executed = _one_run(
                    skill_dir, spec, mode, rep, base, store, standin, inputs, html_dir, agent
                )
                if mode == "agent" and not rec.steps:
                    reasons = (
                        [*reasons, "SKILL.md has no shell or Python code block for the agent to follow"]
                        if not has_scripts
                        else reasons
                    )
                if keep:
                    rec.workspace = str(base / f"{mode}-{rep}")
                result.runs.append(rec)
                result.reasons.extend(reasons)
                exercised |= executed
                facts.setdefault(mode, []).append(rec.facts)
                for v in vios:
                    seen.setdefault(v.key(), v)
    finally:
        standin.close()
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    result.violations = list(seen.values())
    for script in skill_scripts(skill_dir):
        if script not in exercised:
            result.reasons.append(f"{script} was never run or read: its code paths were not exercised")
    for mode, runs in facts.items():
        if any(f != runs[0] for f in runs[1:]):
            result.reasons.append(f"the {mode} runs behaved differently between repeats")
    warn = [f for f in result.findings if f.severity == "warn"]
    if result.violations:
        result.verdict = "violations"
    elif result.reasons or warn:
        result.verdict = "uncertain"
        result.reasons.extend(f"pre-scan: {f.message} at {f.where}" for f in warn)
    result.seconds = time.monotonic() - t0
    return result
