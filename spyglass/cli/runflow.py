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
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spyglass.errors import EXIT_ALERT, EXIT_EVIDENCE, EXIT_KILLED, EXIT_NOT_FOUND, UsageError
from spyglass.runner import RunOutcome, RunRequest, record
from spyglass.store import Store
from spyglass.witness import WitnessGuard


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
    from spyglass.policy.loader import policy_record
    from spyglass.policy.locate import ignored_workspace_policy, locate_policy
    from spyglass.rules import build_sinks, fail_on_exceeded

    cwd = str(Path(opts.cwd).resolve())
    policy = load_policy(opts.policy_file, cwd)
    notice = ignored_workspace_policy(locate_policy(opts.policy_file, cwd), cwd)
    if notice and opts.live_alerts:
        sys.stderr.write(notice + "\n")
    mode = opts.mode or policy.mode
    if opts.sandbox and mode == "observe":
        mode = "contain"
    fail_on = opts.fail_on or policy.fail_on
    env = dict(opts.env) if opts.env is not None else dict(os.environ)
    home = env.get("HOME") or os.path.expanduser("~")
    workspace = [str(Path(cwd, w).resolve()) for w in (opts.workspace or policy.workspace_for(cwd))]

    signer = None
    key = opts.sign_key or (
        Path(policy.resolve_path(policy.evidence.sign_key)) if policy.evidence.sign_key else None
    )
    if key is not None:
        from spyglass.evidence.keys import make_signer

        signer = make_signer(key)

    backend: Any = get_backend(opts.backend)
    extra: dict[str, Any] = {"policy_source": policy.source, "policy": policy_record(policy)}
    missing = _command_not_found(opts, store, cwd, env, mode, policy.digest, extra, backend.name)
    if missing is not None:
        return missing
    with contextlib.ExitStack() as stack:
        pre_sinks: list[object] = []
        if opts.model_script is not None:
            from spyglass.agents.replay import stub_session

            session = stack.enter_context(
                stub_session(
                    opts.model_script, opts.argv, env, variables=opts.model_vars, agent=opts.agent_kind
                )
            )
            env = dict(session.env)
            pre_sinks.append(session)
        pre_sinks.insert(0, AgentAwareness(opts.agent_log))

        rule_sinks = build_sinks(policy, home=home, mode=mode, printer=opts.live_alerts)
        guard = _witness_guard(store, policy, key, mode)
        pre_sinks.append(guard)
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
        sandbox_on = mode in ("contain", "enforce")
        if sandbox_on:
            from spyglass.sandbox import from_policy

            (store.root / "sandbox").mkdir(exist_ok=True)
            work = tempfile.mkdtemp(prefix="run-", dir=store.root / "sandbox")
            guard.protected.allow(work)  # the sandbox's decoy home and /tmp: the agent's to write
            # `action: block` rules veto at the proxy through the engine's read-only check
            veto = getattr(rule_sinks[0], "would_block", None) if rule_sinks else None
            sb = from_policy(
                policy, work, workspace, cwd=cwd, store_root=str(store.root), mode=mode, real_home=home, veto=veto
            )
            stack.callback(sb.close)
            backend = sb.backend(backend)
            extra.update(sb.run_extra())
            pre_sinks.extend(sb.sinks)

        request = RunRequest(
            argv=list(opts.argv),
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
        )
        request.extra.setdefault("home", home)
        outcome = record(request, backend, store, [*pre_sinks, *rule_sinks, *post_sinks], signer=signer)

    code = outcome.exit_code
    if outcome.meta.stopped_by:
        code = EXIT_KILLED
    elif fail_on_exceeded(outcome.meta.extra.get("max_level"), fail_on):  # in-memory: saved or not
        code = EXIT_ALERT
    elif outcome.meta.status == "evidence-incomplete":
        code = EXIT_EVIDENCE
    return FlowResult(outcome=outcome, exit_code=code, fail_on=fail_on)


def _command_not_found(
    opts: RunOptions, store: Store, cwd: str, env: dict[str, str], mode: str, digest: str,
    extra: dict[str, Any], backend: str,
) -> FlowResult | None:
    """``run -- nosuchcmd``: exit 127 with one line, recorded as a failed run (None: the command exists)."""
    from spyglass.store.failed import find_program, record_failed_run

    if not opts.argv or opts.model_script is not None or find_program(opts.argv[0], cwd, env) is not None:
        return None
    reason = f"{opts.argv[0]}: command not found"
    meta = record_failed_run(store, opts.argv, cwd, reason=reason, exit_code=EXIT_NOT_FOUND, backend=backend,
                             mode=mode, policy_digest=digest, task=opts.task, agent_id=opts.agent_id, extra=extra)
    from spyglass.capture.base import CaptureResult

    outcome = RunOutcome(meta=meta, capture=CaptureResult(), sink_errors={})
    return FlowResult(outcome=outcome, exit_code=EXIT_NOT_FOUND, fail_on=None, notes=[f"spyglass: {reason}"])


def _witness_guard(store: Store, policy: Any, key: Path | None, mode: str) -> WitnessGuard:
    """The sink that alerts on any change to the store, policy, rule files or key (docs/threat-model.md)."""
    from spyglass.evidence.keys import DEFAULT_KEY
    from spyglass.witness import Protected

    prot = Protected.for_run(store.root, policy_file=policy.source, rule_paths=policy.rules.paths, sign_key=key)
    default_key = DEFAULT_KEY.expanduser()
    if default_key.exists():
        prot.add(default_key, "the signing key", secret=True)
    return WitnessGuard(prot, mode=mode)


def check_level(level: str | None) -> str | None:
    from spyglass.events import LEVELS

    if level is not None and level not in LEVELS:
        raise UsageError(f"unknown level {level!r}", hint=f"one of {', '.join(LEVELS)}")
    return level
