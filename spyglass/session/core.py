"""One recording session: options -> policy -> backend (+ sandbox) -> sinks -> store -> outcome.

``spyglass run``, ``spyglass demo`` and the Python API's ``spyglass.run()`` all
call :func:`run_session`.  The policy decides the mode, the rules, the sandbox
and the evidence; the options override it.  Everything that can fail on bad
input (policy, rule files, signing key, sandbox, a sink's ``start``) fails
before the agent starts.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from spyglass import phases
from spyglass.capture import select_backend
from spyglass.capture.base import CaptureBackend
from spyglass.errors import EXIT_ALERT, EXIT_CANNOT_RUN, EXIT_EVIDENCE, EXIT_KILLED, EXIT_NOT_FOUND, UsageError
from spyglass.pipeline import SandboxView, default_home
from spyglass.policy import Policy
from spyglass.policy.loader import policy_record
from spyglass.policy.model import MODES
from spyglass.session.agent import agent_install, setup_agent
from spyglass.session.options import RunOptions
from spyglass.session.record import Following, RunOutcome, RunRequest, record
from spyglass.session.sinks import Plan, assemble, capture_identities
from spyglass.store import Store
from spyglass.store.writer import Signer


def _signer(opts: RunOptions, plan: Plan) -> Signer | None:
    policy = plan.policy
    key = opts.sign_key or (
        Path(policy.resolve_path(policy.evidence.sign_key)) if policy.evidence.sign_key else None
    )
    plan.sign_key = key
    if key is None:
        return None
    from spyglass.evidence.keys import make_signer

    return make_signer(key)


def plan_run(opts: RunOptions, store: Store) -> Plan:
    """Read the policy and decide mode, home, workspace and environment (no side effects)."""
    import os

    from spyglass.policy import load_policy
    from spyglass.policy.locate import ignored_workspace_policy, locate_policy
    from spyglass.rules.cache import policy_parser

    cwd = str(Path(opts.cwd).resolve())
    policy = load_policy(opts.policy_file, cwd, parse=policy_parser(store.root))
    source = locate_policy(opts.policy_file, cwd)
    notice = ignored_workspace_policy(source, cwd)
    if notice and opts.live_alerts:
        sys.stderr.write(notice + "\n")
    if source.path is not None and opts.live_alerts and opts.alerts_format == "text":  # say whose policy it is
        from spyglass.policy.locate import source_line

        sys.stderr.write(source_line(source) + "\n")
    mode = opts.mode or policy.mode
    if mode not in MODES:  # the CLI checks its choices; the Python API must not run weaker than asked
        raise UsageError(f"unknown mode {mode!r}", hint=f"one of {', '.join(MODES)}")
    ask = opts.ask or mode == "ask"
    if mode == "ask":  # observe (or contain, with --sandbox), the agent's hooks asking first
        mode = "observe"
    if opts.sandbox and mode == "observe":
        mode = "contain"
    env = dict(opts.env) if opts.env is not None else dict(os.environ)
    workspace = [str(Path(cwd, w).resolve()) for w in (opts.workspace or policy.workspace_for(cwd))]
    return Plan(
        opts=opts, policy=policy, mode=mode, cwd=cwd, home=default_home(env), workspace=workspace, env=env,
        store=store, ask=ask,
    )


def run_session(opts: RunOptions, store: Store) -> RunOutcome:
    """Record ``opts.argv`` with everything the policy and options ask for; the outcome's
    ``verdict_code`` is the exit code ``spyglass run`` reports."""
    from spyglass.rules import fail_on_exceeded
    from spyglass.rules.cache import load_rules, remember
    from spyglass.rules.codecache import CodeCache
    from spyglass.rules.engine import RuleEngine

    check_level(opts.fail_on)
    backend: CaptureBackend
    backend, reason = select_backend(opts.backend)  # first: the eBPF program loads meanwhile
    phases.mark("backend select")
    plan = plan_run(opts, store)
    phases.mark("policy")
    policy, mode = plan.policy, plan.mode
    fail_on = opts.fail_on or policy.fail_on
    signer = _signer(opts, plan)
    extra: dict[str, object] = {"policy_source": policy.source, "backend_reason": reason,
                                "policy": policy_record(policy)}
    # (with --model-script: once the stub has set the agent's environment, below)
    missing = None if opts.model_script is not None else _command_not_found(opts, plan, store, extra, backend.name)
    if missing is not None:
        return missing
    sandbox_view: SandboxView | None = None
    sandbox_on = mode in ("contain", "enforce")
    if opts.ask_egress and not sandbox_on:
        raise UsageError("--ask-egress needs the sandbox", hint="add --sandbox (or mode contain/enforce)")
    work: str | None = None
    if sandbox_on:
        import tempfile  # only a sandboxed run makes a work directory (tempfile: shutil, random)

        (store.root / "sandbox").mkdir(exist_ok=True)
        work = tempfile.mkdtemp(prefix="run-", dir=store.root / "sandbox")
        plan.sandbox_work = work  # the witness guard lets the agent write its decoy home and /tmp
    with contextlib.ExitStack() as stack:
        before = dict(plan.env)
        setup_agent(plan, stack, work)
        if opts.model_script is not None and (missing := _command_not_found(opts, plan, store, extra,
                                                                            backend.name)) is not None:
            return missing
        # what spyglass itself set for the agent (the model stub's address, the agent's per-run
        # config) passes the sandbox's environment filter: no host secret is in it
        own_env = [k for k, v in plan.env.items() if before.get(k) != v]
        installed = agent_install(list(opts.argv), plan.env, plan.cwd)
        if installed:
            extra["agent_install"] = installed
        ruleset, rules_key, checked = load_rules(policy, plan.home, store.root)
        phases.mark("rules load")
        plan.engine = RuleEngine(ruleset, policy, home=plan.home, mode=mode, validated=checked)
        # the run's generated rule code, compiled once and kept sealed in the store (rules/codecache.py)
        code_cache = plan.engine.code_cache = CodeCache(store.root, rules_key)
        if not checked:  # compiled whole just now, so a broken rule stopped the run: keep it
            remember(store.root, rules_key, ruleset)
        phases.mark("rules compile")
        if policy.broker:
            from spyglass.sandbox.broker import open_for_run

            plan.broker, plan.env = open_for_run(policy.broker, plan.env, base_dir=policy.base_dir,
                                                 sandbox_on=sandbox_on)
            stack.callback(plan.broker.close)
        if work is not None:
            from spyglass.sandbox import from_policy

            # `action: block` rules veto at the proxy through the engine's read-only check; the
            # model stub is reached by its own name through the proxy
            own = plan.stub.sandbox_options() if plan.stub is not None else {}
            sb = from_policy(
                _hide_key(policy, plan.sign_key), work, plan.workspace, cwd=plan.cwd, store_root=str(store.root),
                mode=mode, real_home=plan.home, veto=plan.engine.would_block, broker=plan.broker, env_pass=own_env,
                ask_timeout=opts.ask_egress, **_with_caller_resolver(own, opts),
            )
            stack.callback(sb.close)
            plan.sandbox = sb
            backend = sb.backend(backend)
            extra.update(sb.run_extra())
            sandbox_view = sb.view()
        sinks = assemble(plan)
        phases.mark("sinks")
        request = RunRequest(
            argv=list(plan.argv or opts.argv),
            cwd=plan.cwd,
            env=plan.env,
            task=opts.task,
            agent_id=plan.agent_id or opts.agent_id,
            workspace=plan.workspace,
            skills=list(opts.skills),
            wait_descendants=opts.wait_descendants,
            mode=mode,
            sandbox=sandbox_on,
            policy_digest=policy.digest,
            backend_options={"seccomp": opts.seccomp, "descendants": descendants_choice(opts, policy, mode),
                             "protected_ids": capture_identities(plan, sinks)},
            extra={**extra, **plan.extra},
            home=plan.home,
            policy=policy,
            sandbox_view=sandbox_view,
            stdio=plan.stdio,
            on_following=_verdict_so_far(opts, fail_on),
        )
        outcome = record(request, backend, store, sinks, signer=signer)
        code_cache.save()  # only when this run compiled code the cache did not have

    outcome.notes.extend(apply_retention(policy, store, outcome.meta.id))
    code = outcome.exit_code
    if outcome.capture.failed_to_start:
        code = EXIT_CANNOT_RUN  # the sandbox never reached the agent: recorded as failed
    elif outcome.meta.stopped_by:
        code = EXIT_KILLED
    elif fail_on_exceeded(outcome.meta.extra.get("max_level"), fail_on):  # in memory: saved or not
        code = EXIT_ALERT
    elif outcome.meta.status == "evidence-incomplete":
        code = EXIT_EVIDENCE
    outcome.verdict_code = code
    outcome.fail_on = fail_on
    return outcome


def _verdict_so_far(opts: RunOptions, fail_on: str | None) -> Callable[[Following], None] | None:
    """``descendants: follow``: the exit code ``run`` reports when it returns at the agent's exit
    (alerts up to then; what the followed processes do later is in the run, not in that code)."""
    hook = opts.on_following
    if hook is None:
        return None
    from spyglass.rules import fail_on_exceeded

    def tell(fw: Following) -> None:
        code = fw.exit_code
        if fw.stopped_by:
            code = EXIT_KILLED
        elif fail_on_exceeded(fw.max_level, fail_on):
            code = EXIT_ALERT
        assert hook is not None
        hook(fw.run_id, code, fw.pids)

    return tell


def _hide_key(policy: Policy, key: Path | None) -> Policy:
    """The sandbox hides the signing key wherever it is (the default key is in the real home, hidden anyway)."""
    if key is None:
        return policy
    import msgspec

    sb = msgspec.structs.replace(policy.sandbox, hidden=(*policy.sandbox.hidden, str(key.expanduser().resolve())))
    return msgspec.structs.replace(policy, sandbox=sb)


def _command_not_found(
    opts: RunOptions, plan: Plan, store: Store, extra: dict[str, object], backend: str
) -> RunOutcome | None:
    """``run -- nosuchcmd``: exit 127 with one line, recorded as a failed run (None: the command exists)."""
    from spyglass.capture.base import CaptureResult
    from spyglass.store.failed import find_program, record_failed_run

    if not opts.argv or find_program(opts.argv[0], plan.cwd, plan.env):
        return None
    reason = f"{opts.argv[0]}: command not found"
    meta = record_failed_run(store, opts.argv, plan.cwd, reason=reason, exit_code=EXIT_NOT_FOUND,
                             backend=backend, mode=plan.mode, policy_digest=plan.policy.digest, task=opts.task,
                             agent_id=opts.agent_id, extra=extra)
    return RunOutcome(meta=meta, capture=CaptureResult(), sink_errors={}, verdict_code=EXIT_NOT_FOUND,
                      notes=[reason])


def _with_caller_resolver(own: dict[str, Any], opts: RunOptions) -> dict[str, Any]:
    """The sandbox's own options (the model stub's name), with the caller's resolver first
    (``RunOptions.sandbox_resolver``: ``skill verify`` pins declared hosts to a loopback stand-in)."""
    first = opts.sandbox_resolver
    if first is None:
        return own
    then = own.get("resolver")

    def resolver(host: str, port: int) -> Sequence[tuple[str, int]]:
        try:
            return first(host, port)
        except OSError:
            if then is None:
                raise
            return then(host, port)  # type: ignore[no-any-return]

    return {**own, "resolver": resolver, "allow_host_loopback": opts.sandbox_host_loopback}


def apply_retention(policy: Policy, store: Store, run_id: str) -> list[str]:
    """The policy's ``retention`` limits, applied after a run (the run just recorded is never deleted)."""
    if not policy.retention.enabled:
        return []
    from spyglass.store import retention

    rt = policy.retention
    limits = retention.Limits.parse(rt.max_age, rt.max_size, rt.max_runs_per_task, rt.keep_level)
    plan = retention.plan(retention.entries(store), limits)  # the newest run (this one) is never deleted
    assert all(d.run.id != run_id for d in plan.delete)
    gone = retention.apply(store, plan)
    if not gone:
        return []
    return [f"retention: deleted {len(gone)} old run(s) ({retention.fmt_size(plan.total_before - plan.total_after)})"]


def follows(opts: RunOptions, store_root: Path | None = None) -> bool:
    """Whether this run follows the agent's leftovers (``--descendants follow``, or the policy's;
    ``store_root``: the run's store, whose cache may have the policy parsed already)."""
    if opts.descendants is not None:
        return opts.descendants == "follow"
    from spyglass.policy import load_policy
    from spyglass.rules.cache import policy_parser

    parse = policy_parser(store_root) if store_root is not None else None
    return load_policy(opts.policy_file, str(Path(opts.cwd).resolve()), parse=parse).descendants == "follow"


def descendants_choice(opts: RunOptions, policy: Policy, mode: str) -> str:
    """What happens to processes that outlive the agent: the option, the policy, else kill when
    sandboxed (contain/enforce) and detach (with a high alert) when only observing."""
    chosen = opts.descendants or policy.descendants
    if chosen in ("kill", "follow", "detach"):
        return str(chosen)
    return "kill" if mode in ("contain", "enforce") else "detach"


def check_level(level: str | None) -> str | None:
    from spyglass.events import LEVELS

    if level is not None and level not in LEVELS:
        raise UsageError(f"unknown level {level!r}", hint=f"one of {', '.join(LEVELS)}")
    return level
