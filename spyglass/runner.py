"""Running an agent under capture: the one place that wires backend, pipeline and store.

``record()`` is what ``spyglass run`` and the Python API's ``spyglass.run()``
call.  Components that want to take part in a run (rule engine, enforcer,
workspace manifests, live printer) are pipeline sinks handed in by the
caller; a sandbox contributes an argv ``wrapper`` and environment.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from spyglass import __version__
from spyglass.capture.base import CaptureBackend, CaptureResult, CaptureSession, LaunchSpec
from spyglass.events.proctree import ProcessTable
from spyglass.pipeline import Pipeline, RunContext
from spyglass.store import RunMeta, RunWriter, Store, new_run_id
from spyglass.store.writer import Signer


@dataclass
class RunRequest:
    argv: Sequence[str]
    cwd: str = field(default_factory=os.getcwd)
    env: dict[str, str] | None = None
    task: str | None = None
    agent_id: str | None = None
    workspace: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    wait_descendants: float = 0.0
    mode: str = "observe"
    sandbox: bool = False
    policy_digest: str | None = None
    backend_options: dict[str, object] = field(default_factory=dict)
    wrapper: Sequence[str] = ()
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunOutcome:
    meta: RunMeta
    capture: CaptureResult
    sink_errors: dict[str, int]

    @property
    def exit_code(self) -> int:
        return self.capture.shell_exit_code


class _Signals:
    """SIGINT, SIGTERM, SIGHUP to spyglass: forwarded to the agent's tree, which then has
    ``GRACE`` seconds to exit before it is killed; a second signal kills it at once.  The
    run is marked ``interrupted``.  A Ctrl-C typed on the terminal already reached the
    processes in spyglass's own foreground process group: they are not sent it twice."""

    GRACE = 5.0

    def __init__(self, session: CaptureSession, procs: ProcessTable | None = None) -> None:
        self.session = session
        self.procs = procs
        self.interrupted = False
        self._count = 0
        self._old: dict[int, Any] = {}
        self._timer: threading.Timer | None = None

    def __enter__(self) -> _Signals:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread
                pass
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.interrupted = True
        self._count += 1
        if self._count >= 2:
            self.session.kill_tree()
            return
        self._forward(signum)
        self._timer = threading.Timer(self.GRACE, self.session.kill_tree)
        self._timer.daemon = True
        self._timer.start()

    def _forward(self, signum: int) -> None:
        if self.procs is None:
            return
        own = os.getpgrp()
        typed = signum == signal.SIGINT and _terminal_foreground() == own
        for info in list(self.procs.procs.values()):
            if info.exit_ts is not None or info.detached:
                continue
            try:
                if typed and os.getpgid(info.pid) == own:
                    continue
                os.kill(info.pid, signum)
            except OSError:
                pass


def _terminal_foreground() -> int | None:
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return None
    try:
        return os.tcgetpgrp(fd)
    except OSError:
        return None
    finally:
        os.close(fd)


def record(
    request: RunRequest,
    backend: CaptureBackend,
    store: Store,
    sinks: Sequence[object] = (),
    *,
    signer: Signer | None = None,
    on_started: Callable[[RunMeta], None] | None = None,
) -> RunOutcome:
    """Run ``request.argv`` under ``backend``, feeding every event through ``sinks``
    after the store writer, and return the finished run's metadata."""
    cwd = str(Path(request.cwd).resolve())
    meta = RunMeta(
        id=new_run_id(),
        spyglass_version=__version__,
        task=request.task,
        agent_id=request.agent_id,
        command=list(request.argv),
        cwd=cwd,
        workspace=[str(Path(w).resolve()) for w in (request.workspace or [cwd])],
        skills=[str(Path(s).resolve()) for s in request.skills],
        backend=backend.name,
        mode=request.mode,
        sandbox=request.sandbox,
        policy_digest=request.policy_digest,
        started=time.time_ns(),
        host=socket.gethostname(),
        extra=dict(request.extra),
    )
    meta.extra.setdefault("home", (request.env if request.env is not None else os.environ).get("HOME"))
    writer = RunWriter(store, meta, signer=signer)
    ctx = RunContext(run_id=meta.id, root_cwd=cwd, workspace=meta.workspace, meta={"run": meta})
    pipeline = Pipeline([writer, *sinks], ctx)
    stopped_by: list[str] = []
    status = "complete"
    capture = CaptureResult()
    try:
        pipeline.start()
        spec = LaunchSpec(
            argv=list(request.argv),
            cwd=cwd,
            env=request.env,
            wait_descendants=request.wait_descendants,
            wrapper=list(request.wrapper),
            options=dict(request.backend_options),
        )
        session = backend.start(spec)

        def stop_agent(reason: str) -> None:
            if not stopped_by:
                stopped_by.append(reason)
            session.kill_tree()

        ctx.stop_agent = stop_agent
        if on_started is not None:
            on_started(meta)
        monitors = meta.extra.setdefault("monitor_pids", [os.getpid()])
        tracer_known = False
        with _Signals(session, ctx.procs) as sig:
            for ev in session.events():
                if not tracer_known:  # the tracer's pid, for rules about killing the monitor
                    tracer = getattr(session, "tracer_pid", None)
                    if tracer is not None:
                        monitors.append(tracer)
                        tracer_known = True
                pipeline.feed(ev)
        capture = session.result()
        if sig.interrupted:
            status = "interrupted"
    except BaseException:
        pipeline.done()
        writer.finish("interrupted")
        raise
    pipeline.done()
    meta = writer.finish(
        status,
        exit_code=capture.exit_code,
        signal=capture.signal,
        stopped_by=stopped_by[0] if stopped_by else None,
        capture={
            "lines": capture.lines,
            "unparsed": capture.unparsed,
            "lost": capture.lost,
            "root_pid": capture.root_pid,
            "notes": capture.notes,
            "sink_errors": pipeline.errors,
        },
        still_running=[{"pid": s.pid, "argv": s.argv} for s in capture.still_running],
    )
    return RunOutcome(meta=meta, capture=capture, sink_errors=pipeline.errors)
