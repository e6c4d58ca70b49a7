"""The Python API: record a command and open stored runs, for harnesses and eval loops.

import spyglass
outcome = spyglass.run(["python", "agent.py"], task="t1", store=".spyglass")
reader = spyglass.open_run(outcome.meta.id, store=".spyglass")
for ev in reader.events(): ...
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from spyglass.runner import RunOutcome, RunRequest, record
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
    backend: str = "strace",
    sinks: Sequence[object] = (),
) -> RunOutcome:
    """Run ``argv`` under capture and store the run; returns its outcome (``.meta``, ``.exit_code``)."""
    import os

    from spyglass.capture import get_backend

    st = store if isinstance(store, Store) else Store(store, create=True)
    request = RunRequest(
        argv=list(argv),
        cwd=cwd or os.getcwd(),
        env=env,
        task=task,
        agent_id=agent_id,
        workspace=list(workspace),
        skills=list(skills),
        wait_descendants=wait_descendants,
    )
    return record(request, get_backend(backend), st, sinks)


def open_run(ref: str = "latest", store: str | Path | Store | None = None) -> RunReader:
    """A stored run by id, unique prefix or ``latest``."""
    return _open_run(ref, store)
