"""The one place that decides which sinks take part in a run, and in which order.

Order after the store writer (which :func:`spyglass.session.record.record`
puts first): agent awareness (labels tool calls before rules see their
processes), the model stub, the witness guard, the sandbox's guards, the rule engine and its printer,
the workspace evidence, then every factory of :data:`FEATURE_SINKS` and the
caller's own sinks (``RunOptions.sinks``).

A feature joins a run by appending a factory to :data:`FEATURE_SINKS`: it gets
the :class:`Plan` (options, policy, mode, home, workspace, store) and returns
the sinks it wants (none when its option is off).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from spyglass.policy import Policy
from spyglass.session.options import RunOptions
from spyglass.store import Store

if TYPE_CHECKING:
    from spyglass.agents.ask import PolicyAsk
    from spyglass.agents.hooks import HookServer
    from spyglass.agents.replay import StubSession
    from spyglass.rules.engine import RuleEngine
    from spyglass.sandbox.prepared import PreparedSandbox


class Plan(msgspec.Struct):
    """What the session decided before the sinks are built."""

    opts: RunOptions
    policy: Policy
    mode: str
    cwd: str
    home: str
    workspace: list[str]
    env: dict[str, str]
    store: Store
    sandbox: PreparedSandbox | None = None
    engine: RuleEngine | None = None
    #: sinks set up earlier by the session (the model stub changes the environment)
    early: list[object] = msgspec.field(default_factory=list)
    #: the command's stdin, stdout, stderr when a sink owns them (the terminal recorder)
    stdio: tuple[int, int, int] | None = None
    #: the agent's persistent identity (decided by the monitoring factory) and facts for run.json
    agent_id: str | None = None
    extra: dict[str, object] = msgspec.field(default_factory=dict)
    #: the signing key in use (the witness guard protects it)
    sign_key: Path | None = None
    #: the sandbox's work area inside the store (decoy home, /tmp): the agent's to write
    sandbox_work: str | None = None
    #: the agent's per-run directory inside the store (config, transcript, hooks): the agent's to write
    agent_dir: str | None = None
    #: the command as it runs (the agent's hooks may add an option); None: the options' argv
    argv: list[str] | None = None
    ask: bool = False  # --ask or mode: ask
    asker: PolicyAsk | None = None  # decides the agent's PreToolUse hooks under --ask
    hooks: HookServer | None = None  # the agent's per-run hooks report here
    stub: StubSession | None = None  # the --model-script stub
    #: spyglass.sandbox.broker.Broker when the policy has secrets.broker (values in memory only)
    broker: Any = None


SinkFactory = Callable[[Plan], Iterable[object]]


def _awareness(plan: Plan) -> Iterable[object]:
    from spyglass.agents.awareness import AgentAwareness

    return [AgentAwareness(plan.opts.agent_log, hooks=plan.hooks, asker=plan.asker, env=plan.env, cwd=plan.cwd)]


def _policy_places(plan: Plan) -> list[tuple[str | Path, str, bool]]:
    """Where a later run reads its policy and rules: a write there by this run changes the next one."""
    import spyglass
    from spyglass.policy.locate import policy_locations
    from spyglass.witness.protected import OWN_SOURCE

    places: list[tuple[str | Path, str, bool]] = [
        (path, "a policy location", tree) for path, tree in policy_locations(plan.cwd)
    ]
    own = Path(spyglass.__file__).resolve().parent
    roots = [Path(w).resolve() for w in plan.workspace]
    # spyglass's own source (its rule pack in it), unless the user runs it from a checkout that is
    # the agent's own workspace, which puts it in the agent's reach on purpose; an installed copy
    # (site-packages: ~/.local, a venv, pipx) is guarded even in a workspace that holds it (`cd ~`)
    installed = any(part in ("site-packages", "dist-packages") for part in own.parts)
    if installed or not any(own == r or r in own.parents for r in roots):
        places.append((own / "rules" / "pack", "spyglass's rule pack", True))
        places.append((own, OWN_SOURCE, True))
    return places


def _witness(plan: Plan) -> Iterable[object]:
    """The guard that alerts on any change to the store, policy, rule files or key (docs/threat-model.md)."""
    from spyglass.evidence import DEFAULT_KEY  # not .keys: signing loads only with a key in use
    from spyglass.witness import Protected, WitnessGuard

    policy = plan.policy
    from spyglass.policy.loader import policy_file_path

    prot = Protected.for_run(plan.store.root, policy_file=policy_file_path(policy), rule_paths=policy.rules.paths,
                             sign_key=plan.sign_key, places=_policy_places(plan))
    default_key = DEFAULT_KEY.expanduser()
    if default_key.exists():
        prot.add(default_key, "the signing key", secret=True)
    for own in (plan.sandbox_work, plan.agent_dir):
        if own:
            prot.allow(own)
    return [WitnessGuard(prot, mode=plan.mode)]


def _sandbox_guards(plan: Plan) -> Iterable[object]:
    return list(plan.sandbox.sinks) if plan.sandbox is not None else []


def _rules(plan: Plan) -> Iterable[object]:
    if plan.engine is None:
        return []
    if not plan.opts.live_alerts:
        return [plan.engine]
    from spyglass.rules.printer import AlertPrinter

    return [plan.engine, AlertPrinter(fmt=plan.opts.alerts_format)]


def _workspace_evidence(plan: Plan) -> Iterable[object]:
    if not plan.opts.workspace_evidence:
        return []
    from spyglass.evidence.workspace import WorkspaceEvidence

    ev = plan.policy.evidence
    return [
        WorkspaceEvidence(
            plan.workspace,
            excludes=ev.manifest_exclude,
            max_files=ev.max_files,
            max_diff_bytes=ev.max_diff_bytes,
            max_run_diff_bytes=ev.max_run_diff_bytes,
            store_root=plan.store.root,
        )
    ]


def _terminal(plan: Plan) -> Iterable[object]:
    if not (plan.opts.record_tty or plan.policy.terminal.record):
        return []
    from spyglass.tty import TerminalRecorder

    recorder = TerminalRecorder(
        plan.store.run_dir, patterns=plan.policy.terminal.redact, literals=plan.broker.values if plan.broker else ()
    )
    plan.stdio = recorder.stdio
    return [recorder]


def _monitoring(plan: Plan) -> Iterable[object]:
    """The agent's identity, the permission/memory watch and the live OTLP export (docs/otel.md)."""
    from spyglass.otel.wiring import monitoring

    mon = monitoring(
        plan.opts.argv, cwd=plan.cwd, env=plan.env, home=plan.home, workspace=plan.workspace,
        policy=plan.policy, agent_id=plan.opts.agent_id, agent_kind=plan.opts.agent_kind,
        otlp=plan.opts.otlp, otlp_protocol=plan.opts.otlp_protocol, quiet=not plan.opts.live_alerts,
    )
    plan.agent_id = mon.identity.id
    plan.extra["agent_identity"] = mon.identity.to_json()
    return mon.sinks


#: sinks of optional features, in order, after the built-in ones (append yours here)
FEATURE_SINKS: list[SinkFactory] = [_terminal, _monitoring]


def assemble(plan: Plan) -> list[object]:
    """Every sink of the run, in order (the store writer comes before them)."""
    sinks: list[object] = [*_awareness(plan), *plan.early]
    for factory in (_witness, _sandbox_guards, _rules, _workspace_evidence, *FEATURE_SINKS):
        sinks.extend(factory(plan))
    sinks.extend(plan.opts.sinks)
    return sinks


def capture_identities(plan: Plan, sinks: Iterable[object]) -> dict[tuple[int, int], str]:
    """(device, inode) -> path of the protected and secret files, for the capture to recognise them
    under any name (``LaunchSpec.options["protected_ids"]``, :mod:`spyglass.capture.ident`)."""
    from spyglass.policy.defaults import SECRET_EXCEPTIONS
    from spyglass.witness import WitnessGuard
    from spyglass.witness.identities import protected_ids
    from spyglass.witness.protected import Protected

    guard = next((s for s in sinks if isinstance(s, WitnessGuard)), None)
    prot = guard.protected if guard is not None else Protected()
    return protected_ids(prot, plan.policy.secret_globs, SECRET_EXCEPTIONS, plan.home)
