"""A run that could not start (``run -- nosuchcmd``) is still recorded: status ``failed``."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from spyglass import __version__
from spyglass.capture.which import which
from spyglass.store.meta import RunMeta
from spyglass.store.store import Store, new_run_id
from spyglass.store.writer import RunWriter


def find_program(argv0: str, cwd: str, env: Mapping[str, str]) -> str | None:
    """Where ``argv0`` would be executed from (PATH lookup as execvp does), or None."""
    if "/" in argv0:
        path = argv0 if os.path.isabs(argv0) else os.path.join(cwd, argv0)
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    return which(argv0, env.get("PATH", os.defpath))


def record_failed_run(
    store: Store,
    argv: Sequence[str],
    cwd: str,
    *,
    reason: str,
    exit_code: int,
    backend: str = "",
    mode: str = "observe",
    policy_digest: str | None = None,
    task: str | None = None,
    agent_id: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> RunMeta:
    """Record a run that never started: its command, why, and the exit code spyglass gives."""
    meta = RunMeta(
        id=new_run_id(),
        spyglass_version=__version__,
        task=task,
        agent_id=agent_id,
        command=list(argv),
        cwd=cwd,
        workspace=[cwd],
        backend=backend,
        mode=mode,
        policy_digest=policy_digest,
        started=time.time_ns(),
        host=os.uname().nodename,  # socket.gethostname(), without importing socket
        extra={**(extra or {}), "failure": reason},
    )
    writer = RunWriter(store, meta, warn=lambda _line: None)
    return writer.finish("failed", exit_code=exit_code)
