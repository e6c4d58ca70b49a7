"""The agent's side of a session: the model stub, the agent's per-run hooks, "ask before it runs".

:func:`setup_agent` runs before the sinks are built: with ``--model-script``
it starts the stub and points the agent at it (its adapter's environment and,
for Claude Code, the per-run hooks); with ``--ask``/``mode: ask`` or
``--agent-hooks`` against the agent's own configuration it adds the hooks to
its command line.  The agent's per-run directory (config, transcript, hook
script) is kept with the run: in the store, or in a sandbox under the run's
private ``/tmp`` (the store is hidden there), seen inside as
``/tmp/spyglass-agent``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from spyglass.errors import UsageError
from spyglass.session.sinks import Plan

#: where the agent's per-run directory is seen inside the sandbox
SANDBOX_AGENT_DIR = "/tmp/spyglass-agent"


def _agent_dir(plan: Plan, work: str | None) -> Path:
    if work is not None:
        return Path(work, "tmp", "spyglass-agent")
    root = plan.store.root / "agents"
    root.mkdir(parents=True, exist_ok=True)
    import tempfile  # only a run with the agent's own directory (tempfile: shutil, random)

    path = Path(tempfile.mkdtemp(prefix="run-", dir=root))
    plan.agent_dir = str(path)  # the agent's to write: the witness guard allows it
    return path


def setup_agent(plan: Plan, stack: contextlib.ExitStack[bool | None], work: str | None) -> None:
    """Start what the agent needs for this run (``work``: the sandbox's work dir, if sandboxed)."""
    opts, policy = plan.opts, plan.policy
    plan.argv = list(opts.argv)
    if plan.ask:
        from spyglass.agents.ask import PolicyAsk

        allow, deny = list(policy.network.effective_allow), list(policy.network.deny)
        plan.asker = PolicyAsk(list(policy.secret_globs), allow, deny, home=plan.home, cwd=plan.cwd)
    inside = SANDBOX_AGENT_DIR if work is not None else None
    if opts.model_script is not None:
        from spyglass.agents.replay import stub_session

        stub = stack.enter_context(
            stub_session(
                opts.model_script,
                opts.argv,
                plan.env,
                variables=opts.model_vars,
                agent=opts.agent_kind,
                port=opts.model_port,
                scratch=_agent_dir(plan, work),
                sandbox_dir=inside,
                ask=plan.ask,
                decider=plan.asker,
            )
        )
        plan.env = dict(stub.env)
        plan.early.append(stub)
        plan.stub, plan.hooks = stub, stub.hooks
    elif plan.ask or opts.agent_hooks:
        from spyglass.agents.replay import hooks_for_run

        got = hooks_for_run(
            plan.argv, _agent_dir(plan, work), sandbox_dir=inside, ask=plan.ask, decider=plan.asker,
            agent=opts.agent_kind,
        )
        if got is None:
            raise UsageError(
                "--ask, mode: ask and --agent-hooks need an agent with hooks (Claude Code)",
                hint="drop the option, or use another mode for this agent",
            )
        plan.argv, plan.hooks = got
        stack.callback(got[1].close)


def agent_install(argv: list[str], env: dict[str, str], cwd: str) -> list[str]:
    """The install tree of the agent the command runs, if an adapter recognises it by its package:
    trusted for exec in this run (the user chose to run it; ``run.json`` ``extra.agent_install``)."""
    from spyglass.agents.adapters import adapter_for
    from spyglass.capture.which import which

    if not argv:
        return []
    first = argv[0]
    exe = os.path.join(cwd, first) if os.sep in first else which(first, env.get("PATH"))
    adapter = adapter_for(exe, argv)
    root = adapter.install_root(os.path.realpath(exe) if exe else None, argv)
    return [root] if root else []
