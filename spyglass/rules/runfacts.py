"""What the rules know of a run: the field context's settings and the rule lists, from the policy and the run.

:func:`run_facts` gathers them when the engine starts (HOME, the workspace,
trusted and temporary directories, secrets, honeytokens, hosts, the
monitor's and the sandbox helpers' processes, what the user launched);
:func:`record_launch` writes what a live run launched into its metadata
first, so a replay of the run sees the same facts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from spyglass.agents.adapters import adapter_named, agent_state_globs
from spyglass.agents.launch import install_trees
from spyglass.pipeline import RunContext
from spyglass.policy import Policy
from spyglass.policy import defaults as pdefaults
from spyglass.policy.hosts import HostMatcher
from spyglass.policy.paths import DirSet, expand_home, glob_matcher
from spyglass.rules.context import RunState


def run_facts(
    policy: Policy, ctx: RunContext, state: RunState, home: str, ws: list[str], monitor_pids: Iterable[int],
    library_lists: dict[str, list[Any]],
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """The keyword arguments of the run's ``FieldContext`` and the rule lists (the library's and the run's)."""
    meta = ctx.run
    extra: dict[str, Any] = meta.extra if meta is not None else {}
    monitors = set(monitor_pids)
    if meta is not None and meta.monitor_pid:
        monitors.add(meta.monitor_pid)
    # spyglass's sandbox helpers (the relay: pid 1 inside, its host pid once it runs)
    sandbox_facts = extra.get("sandbox")
    helpers = sandbox_facts.get("helper_pids") if isinstance(sandbox_facts, dict) else None
    honeytoken_paths = ctx.sandbox.honeytokens if ctx.sandbox is not None else extra.get("honeytokens", [])
    trusted_dirs = [expand_home(d, home) for d in policy.exec.effective_trusted]
    # the install tree of the agent the run started, found by its adapter (session/agent.py)
    trusted_dirs += [str(d) for d in extra.get("agent_install") or [] if isinstance(d, str)]
    ws_trusted = [f"{w.rstrip('/')}/{g}/**" for w in ws for g in pdefaults.WORKSPACE_TRUSTED_EXEC]
    honeytokens = [*policy.honeytokens, *honeytoken_paths]
    secret_globs = list(policy.secret_globs)
    if policy.evidence.sign_key:  # the run's own signing key is a secret
        secret_globs.append(policy.resolve_path(policy.evidence.sign_key))
    launch: dict[str, Any] = extra.get("launch") or {}
    allow = [*policy.network.effective_allow, *_relay_hosts(sandbox_facts)]
    fx_args: dict[str, Any] = dict(
        procs=ctx.procs,
        state=state,
        workspace=DirSet(ws),
        temp=DirSet(expand_home(d, home) for d in pdefaults.WRITABLE_TEMP),
        home=home,
        trusted=DirSet(trusted_dirs),
        trusted_re=glob_matcher(ws_trusted, home),
        secrets_re=glob_matcher(secret_globs, home),
        secret_exceptions_re=glob_matcher(pdefaults.SECRET_EXCEPTIONS, home),
        honeytokens_re=glob_matcher(honeytokens, home),
        hosts=HostMatcher(allow, policy.network.deny),
        monitor_pids=frozenset(monitors),
        live_monitors=ctx.monitor_pids,
        live_helpers=helpers if isinstance(helpers, list) else (),
        monitor_pgids=extra.get("monitor_pgids") or [],
        run_ctx=ctx,
        launch_programs=frozenset(launch.get("programs") or ()),
        launch_interpreters=frozenset(launch.get("interpreters") or ()),
        launch_trees=DirSet(launch.get("trees") or ()),
        agent_state_re=glob_matcher(_agent_state(launch.get("kind"), home), home),
        resolvers=frozenset(extra.get("resolvers") or ()),
    )
    lists: dict[str, list[Any]] = dict(library_lists)
    lists.update(
        secrets=secret_globs,
        secret_exceptions=list(pdefaults.SECRET_EXCEPTIONS),
        honeytokens=honeytokens,
        workspace=ws,
        temp_dirs=[expand_home(d, home) for d in pdefaults.WRITABLE_TEMP],
        home=[home],
        allowed_hosts=allow,
        denied_hosts=list(policy.network.deny),
        trusted_exec=trusted_dirs,
        agent_state=agent_state_globs(home),
    )
    return fx_args, lists


def _relay_hosts(sandbox_facts: object) -> list[str]:
    """A sandboxed run's way out: its relay on the sandbox's own loopback (``127.0.0.1:PORT``, bound
    before the agent starts).  Every connection goes there, and the proxy judges where it leads
    (``proxy.request``), so the relay is allowed even when the policy's list leaves loopback out."""
    relay = sandbox_facts.get("relay") if isinstance(sandbox_facts, dict) else None
    port = relay.get("port") if isinstance(relay, dict) else None
    return [f"127.0.0.1:{port}"] if isinstance(port, int) and not isinstance(port, bool) and port > 0 else []


def _agent_state(kind: str | None, home: str) -> list[str]:
    """The own state files of the agent the user launched, as its adapter declares them."""
    try:
        return adapter_named(kind).state_globs(home) if kind else []
    except KeyError:  # an agent this version has no adapter for
        return []


def _resolvers() -> list[str]:
    try:
        with open("/etc/resolv.conf", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            out.append(parts[1].split("%")[0])
    return out


def record_launch(meta: Any, home: str) -> None:
    """Live runs: what the user launched (program, interpreter, install trees) and the
    configured name servers go into the run's metadata, so a replay sees the same."""
    extra = meta.extra
    if "launch" not in extra and getattr(meta, "command", None):
        extra["launch"] = install_trees(list(meta.command), meta.cwd or "/", home=home)
    if "resolvers" not in extra:
        extra["resolvers"] = _resolvers()
