"""The Python API: record a command and open stored runs, for harnesses and eval loops.

import spyglass
outcome = spyglass.run(["python", "agent.py"], task="t1", store=".spyglass")
reader = spyglass.open_run(outcome.meta.id, store=".spyglass")
for ev in reader.events(): ...

``run()`` is the same recording session as ``spyglass run`` (policy, rules,
sandbox, workspace evidence, agent awareness, signing), with the same
defaults, except that live alerts are not printed unless ``live_alerts=True``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from spyglass.session import RunOptions, RunOutcome, run_session
from spyglass.store import RunReader, Store
from spyglass.store import open_run as _open_run


def run(
    argv: Sequence[str],
    *,
    store: str | Path | Store | None = None,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    task: str | None = None,
    agent_id: str | None = None,
    workspace: Sequence[str] = (),
    skills: Sequence[str] = (),
    wait_descendants: float = 0.0,
    backend: str = "auto",
    sinks: Sequence[object] = (),
    policy: str | Path | None = None,
    mode: str | None = None,
    sandbox: bool = False,
    fail_on: str | None = None,
    sign_key: str | Path | None = None,
    workspace_evidence: bool = True,
    live_alerts: bool = False,
    seccomp: bool = True,
    agent_log: str | Path | None = None,
    record_tty: bool = False,
) -> RunOutcome:
    """Run ``argv`` under capture and store the run; returns its outcome.

    ``.meta`` is the run's metadata, ``.exit_code`` the agent's exit code and
    ``.verdict_code`` what ``spyglass run`` would exit with (6 when ``fail_on``
    was exceeded, 7 when a kill rule stopped the agent).  ``sinks`` are extra
    pipeline sinks, after the built-in ones.  A bad policy or a sink that
    cannot start raises a :class:`spyglass.errors.SpyglassError` before the
    agent starts."""
    import os

    st = store if isinstance(store, Store) else Store(store, create=True)
    opts = RunOptions(
        argv=list(argv),
        cwd=cwd or os.getcwd(),
        env=env,
        policy_file=Path(policy) if policy is not None else None,
        task=task,
        agent_id=agent_id,
        workspace=list(workspace),
        skills=list(skills),
        wait_descendants=wait_descendants,
        backend=backend,
        seccomp=seccomp,
        mode=mode,
        sandbox=sandbox,
        fail_on=fail_on,
        sign_key=Path(sign_key) if sign_key is not None else None,
        workspace_evidence=workspace_evidence,
        live_alerts=live_alerts,
        agent_log=Path(agent_log) if agent_log is not None else None,
        record_tty=record_tty,
        sinks=list(sinks),
    )
    return run_session(opts, st)


def open_run(ref: str = "latest", store: str | Path | Store | None = None) -> RunReader:
    """A stored run by id, unique prefix or ``latest``."""
    return _open_run(ref, store)
