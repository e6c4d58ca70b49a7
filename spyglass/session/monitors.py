"""The run's facts about spyglass's own processes: the tracer, its helpers and their process groups,
which the rules about attacks on the monitor read (``RunContext.monitor_pids``, the run's
``monitor_pgids``).  The backend names them as soon as it knows them (``LaunchSpec.on_monitor``,
on its own threads); the session checks again once the capture runs."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from spyglass.capture.base import CaptureSession
from spyglass.pipeline import RunContext

_LEARN = threading.Lock()


def learn_tracer(session: CaptureSession, ctx: RunContext, groups: list[int]) -> bool:
    """The tracer's pid, its helpers' and its group join the run's monitor facts once known (the
    backend may have told them already)."""
    tracer = session.tracer_pid
    if tracer is None:
        return False
    learn_monitors(ctx, groups, [tracer])
    learn_monitors(ctx, groups, list(getattr(session, "helper_pids", ())), group=False)
    return True


def learn_monitors(ctx: RunContext, groups: list[int], pids: Sequence[int], group: bool = True) -> None:
    """Each pid (and its process group) once in the run's monitor facts; any thread."""
    with _LEARN:
        for pid in pids:
            if pid not in ctx.monitor_pids:
                ctx.monitor_pids.append(pid)
            if group:
                add_group(groups, pid)


def add_group(groups: list[int], pid: int) -> None:
    try:
        pgid = os.getpgid(pid)
    except OSError:
        return
    if pgid not in groups:
        groups.append(pgid)
