"""Everything ``spyglass run`` (and ``demo``) wires around a recording.

The policy decides the mode, the rules, the sandbox and the evidence; the
options on the command line override it.  Order of the pipeline sinks after
the store writer: agent awareness (labels tool calls), the sandbox's guards,
the rule engine and its printer, the workspace evidence.  Everything that
can fail on bad input (policy, rule files, signing key, sandbox) fails before
the agent starts.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spyglass.errors import EXIT_ALERT, EXIT_KILLED, UsageError
from spyglass.runner import RunOutcome, RunRequest, record
from spyglass.store import Store


@dataclass
class RunOptions:
    argv: list[str]
    cwd: str = field(default_factory=os.getcwd)
    env: dict[str, str] | None = None
    policy_file: Path | None = None
    task: str | None = None
    agent_id: str | None = None
    workspace: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    wait_descendants: float = 0.0
    backend: str = "strace"
    seccomp: bool = True
    mode: str | None = None  # None: the policy's
    sandbox: bool = False
    fail_on: str | None = None
    sign_key: Path | None = None
    workspace_evidence: bool = True
    live_alerts: bool = True
    model_script: Path | None = None
    model_vars: dict[str, str] = field(default_factory=dict)
    agent_kind: str | None = None
    agent_log: Path | None = None
    model_port: int = 0
    ask: bool = False  # the agent's hooks ask the policy (and the operator) before each tool call
    agent_hooks: bool = False  # per-run hooks report each tool call live (Claude Code)
    record_tty: bool = False


@dataclass
class FlowResult:
    outcome: RunOutcome
    exit_code: int
    fail_on: str | None
    notes: list[str] = field(default_factory=list)


def execute(opts: RunOptions, store: Store) -> FlowResult:
    from spyglass.agents.awareness import AgentAwareness
    from spyglass.capture import get_backend
    from spyglass.policy import load_policy
    from spyglass.rules import build_sinks, fail_on_exceeded

    cwd = str(Path(opts.cwd).resolve())
    policy = load_policy(opts.policy_file, cwd)
    mode = opts.mode or policy.mode
    ask = opts.ask or mode == "ask"
    if mode == "ask":  # observe (or contain, with --sandbox), the hooks asking before each tool call
        mode = "observe"
    if opts.sandbox and mode == "observe":
        mode = "contain"
    fail_on = opts.fail_on or policy.fail_on
    env = dict(opts.env) if opts.env is not None else dict(os.environ)
    home = env.get("HOME") or os.path.expanduser("~")
    workspace = [str(Path(cwd, w).resolve()) for w in (opts.workspace or policy.workspace_for(cwd))]

    signer = None
    key = opts.sign_key or (Path(policy.resolve_path(policy.evidence.sign_key)) if policy.evidence.sign_key else None)
    if key is not None:
        from spyglass.evidence.keys import make_signer

        signer = make_signer(key)

    backend: Any = get_backend(opts.backend)
    extra: dict[str, Any] = {"policy_source": policy.source}
    argv = list(opts.argv)
    sandbox_on = mode in ("contain", "enforce")
    work: str | None = None
    if sandbox_on:
        (store.root / "sandbox").mkdir(exist_ok=True)
        work = tempfile.mkdtemp(prefix="run-", dir=store.root / "sandbox")
    with contextlib.ExitStack() as stack:
        pre_sinks: list[object] = []
        hooks = asker = session = None
        if ask:
            from spyglass.agents.ask import PolicyAsk

            allow, deny = list(policy.network.effective_allow), list(policy.network.deny)
            asker = PolicyAsk(list(policy.secret_globs), allow, deny, home=home, cwd=cwd)
        if opts.model_script is not None:
            from spyglass.agents.replay import stub_session

            session = stack.enter_context(
                stub_session(
                    opts.model_script,
                    opts.argv,
                    env,
                    variables=opts.model_vars,
                    agent=opts.agent_kind,
                    port=opts.model_port,
                    # kept with the run: the agent's config and session transcript outlive it; in a
                    # sandbox under its private /tmp (the store is hidden there)
                    scratch=Path(work, "tmp", "spyglass-agent") if work else _agent_dir(store.root),
                    sandbox_dir="/tmp/spyglass-agent" if work else None,
                    ask=ask,
                    decider=asker,
                )
            )
            env = dict(session.env)
            hooks = session.hooks
            pre_sinks.append(session)
        elif ask or opts.agent_hooks:
            from spyglass.agents.replay import hooks_for_run

            scratch = Path(work, "tmp", "spyglass-agent") if work else _agent_dir(store.root)
            inside = "/tmp/spyglass-agent" if work else None
            got = hooks_for_run(argv, scratch, sandbox_dir=inside, ask=ask, decider=asker, agent=opts.agent_kind)
            if got is None:
                raise UsageError(
                    "--ask, mode: ask and --agent-hooks need an agent with hooks (Claude Code)",
                    hint="drop the option, or use another mode for this agent",
                )
            argv, hooks = got
            stack.callback(hooks.close)
        pre_sinks.insert(0, AgentAwareness(opts.agent_log, hooks=hooks, asker=asker, env=env, cwd=cwd))

        rule_sinks = build_sinks(policy, home=home, mode=mode, printer=opts.live_alerts)
        post_sinks: list[object] = []
        if opts.workspace_evidence:
            from spyglass.evidence.workspace import WorkspaceEvidence

            ev = policy.evidence
            post_sinks.append(
                WorkspaceEvidence(
                    workspace,
                    excludes=ev.manifest_exclude,
                    max_files=ev.max_files,
                    max_diff_bytes=ev.max_diff_bytes,
                    store_root=store.root,
                )
            )
        if work is not None:
            from spyglass.sandbox import from_policy

            # `action: block` rules veto at the proxy through the engine's read-only check
            veto = getattr(rule_sinks[0], "would_block", None) if rule_sinks else None
            own = session.sandbox_options() if session is not None else {}
            sb = from_policy(
                policy,
                work,
                workspace,
                cwd=cwd,
                store_root=str(store.root),
                mode=mode,
                real_home=home,
                veto=veto,
                **own,
            )
            stack.callback(sb.close)
            backend = sb.backend(backend)
            extra.update(sb.run_extra())
            pre_sinks.extend(sb.sinks)

        stdio = None
        if opts.record_tty or policy.terminal.record:
            from spyglass.tty import TerminalRecorder

            recorder = TerminalRecorder(store.run_dir, patterns=policy.terminal.redact)
            post_sinks.append(recorder)
            stdio = recorder.stdio
        request = RunRequest(
            argv=argv,
            cwd=cwd,
            env=env,
            task=opts.task,
            agent_id=opts.agent_id,
            workspace=workspace,
            skills=list(opts.skills),
            wait_descendants=opts.wait_descendants,
            mode=mode,
            sandbox=sandbox_on,
            policy_digest=policy.digest,
            backend_options={"seccomp": opts.seccomp},
            extra=extra,
            stdio=stdio,
        )
        request.extra.setdefault("home", home)
        outcome = record(request, backend, store, [*pre_sinks, *rule_sinks, *post_sinks], signer=signer)

    notes = apply_retention(policy, store, outcome.meta.id)
    code = outcome.exit_code
    if outcome.meta.stopped_by:
        code = EXIT_KILLED
    elif fail_on_exceeded(outcome.meta.extra.get("max_level"), fail_on):
        code = EXIT_ALERT
    return FlowResult(outcome=outcome, exit_code=code, fail_on=fail_on, notes=notes)


def apply_retention(policy: Any, store: Store, run_id: str) -> list[str]:
    """The policy's ``retention`` limits, applied after a run (the run just recorded is never deleted)."""
    if not policy.retention.enabled:
        return []
    from spyglass.store import retention

    rt = policy.retention
    limits = retention.Limits.parse(rt.max_age, rt.max_size, rt.max_runs_per_task, rt.keep_level)
    plan = retention.plan(retention.entries(store), limits)  # the newest run (this one) is never deleted
    assert all(d.run.id != run_id for d in plan.delete)
    gone = retention.apply(store, plan)
    return (
        [f"retention: deleted {len(gone)} old run(s) ({retention.fmt_size(plan.total_before - plan.total_after)})"]
        if gone
        else []
    )


def _agent_dir(root: Path) -> Path:
    """A directory of the run's agent (its config, session transcript, hook script) in the store."""
    (root / "agents").mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="run-", dir=root / "agents"))


def check_level(level: str | None) -> str | None:
    from spyglass.events import LEVELS

    if level is not None and level not in LEVELS:
        raise UsageError(f"unknown level {level!r}", hint=f"one of {', '.join(LEVELS)}")
    return level
