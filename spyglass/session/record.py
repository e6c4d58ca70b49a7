"""Recording one command under capture: backend, pipeline and store.

``record()`` is the lowest layer of a session (:mod:`spyglass.session.core`
builds the policy, sandbox and sinks around it; tests call it directly with
the sinks they need).  It builds the typed :class:`~spyglass.pipeline.RunContext`
every sink gets, starts the sinks (one that cannot start stops the run before
the agent starts), launches the command and feeds every event through the
pipeline after the store writer.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import msgspec

from spyglass import __version__, gcpause, phases
from spyglass.capture import procfs
from spyglass.capture.base import CaptureBackend, CaptureResult, CaptureSession, LaunchSpec
from spyglass.errors import EXIT_CANNOT_RUN
from spyglass.events import LEVELS, Event
from spyglass.events.proctree import ProcessTable
from spyglass.pipeline import BackendInfo, Pipeline, RunContext, SandboxView, SinkStartError, default_home
from spyglass.session.monitors import learn_monitors, learn_tracer
from spyglass.store import RunMeta, RunWriter, Store, new_run_id
from spyglass.store.store import MONITOR_NOTE
from spyglass.store.writer import Signer

if TYPE_CHECKING:
    from spyglass.policy import Policy


_SWITCH_INTERVAL = 0.001  # seconds


class RunRequest(msgspec.Struct):
    """What to record: the command, where and how (the inputs of :func:`record`)."""

    argv: Sequence[str]
    cwd: str = msgspec.field(default_factory=os.getcwd)
    env: dict[str, str] | None = None
    task: str | None = None
    agent_id: str | None = None
    workspace: list[str] = msgspec.field(default_factory=list)
    skills: list[str] = msgspec.field(default_factory=list)
    wait_descendants: float = 0.0
    mode: str = "observe"
    sandbox: bool = False
    policy_digest: str | None = None
    backend_options: dict[str, object] = msgspec.field(default_factory=dict)
    wrapper: Sequence[str] = ()
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    home: str | None = None  # None: default_home(env)
    policy: Policy | None = None
    sandbox_view: SandboxView | None = None
    stdio: tuple[int, int, int] | None = None
    #: ``descendants: follow``: called once when the agent has exited and its leftovers are followed
    on_following: Callable[[Following], None] | None = None


class Following(msgspec.Struct):
    """The run so far, when the agent has exited and the processes it left are still recorded."""

    run_id: str
    exit_code: int  # the agent's, as a shell reports it (128+N for signal N)
    max_level: str | None  # the highest alert so far (in memory)
    stopped_by: str | None
    pids: list[int]


class RunOutcome(msgspec.Struct):
    """A finished run: its metadata, the capture's result, and the session's verdict.

    ``exit_code`` is the agent's own (128+N for signal N); ``verdict_code`` is what
    ``spyglass run`` exits with (7 when a kill rule stopped the agent, 6 when
    ``fail_on`` was exceeded, else the agent's code)."""

    meta: RunMeta
    capture: CaptureResult
    sink_errors: dict[str, int]
    verdict_code: int | None = None
    fail_on: str | None = None
    #: what the session did after the run, for the user (retention: old runs deleted)
    notes: list[str] = msgspec.field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return self.capture.shell_exit_code

    @property
    def partial(self) -> bool:
        """True when a sink failed during the run: some evidence may be missing."""
        return bool(self.sink_errors)


#: seconds between the passes after a signal to spyglass that give it to processes found since
_LATE_FORWARD = 0.5


class _Signals:
    """SIGINT, SIGTERM, SIGHUP to spyglass: forwarded to the agent's tree, which then has
    ``GRACE`` seconds to exit before it is killed; a second signal kills it at once.  The
    run is marked ``interrupted``.  A Ctrl-C typed on the terminal already reached the
    processes in spyglass's own foreground process group: they are not sent it twice."""

    GRACE = 5.0

    def __init__(self, session: CaptureSession | None, procs: ProcessTable | None = None) -> None:
        self.session = session
        self.procs = procs
        self.interrupted = False
        self._count = 0
        self._old: dict[int, Any] = {}
        #: operator interventions not yet recorded: (time ns, signal name, what was done)
        self.pending: list[tuple[int, str, str]] = []
        self._timer: threading.Timer | None = None
        self._forwarded: set[int] = set()  # pids the signal was passed on to
        self._done = threading.Event()  # the run ended: no more late passes
        self._early: int | None = None  # a signal that came before the capture started

    def attach(self, session: CaptureSession) -> None:
        """The capture started; a signal that came while it was starting (the agent may already
        run) is passed on now, as if it came just after."""
        self.session = session
        if self.interrupted and self._early is not None:
            signum, self._early, self._count = self._early, None, self._count - 1
            self._handle(signum, None)

    def __enter__(self) -> _Signals:
        if self._old:  # installed already
            return self
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread
                pass
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._timer is not None:
            self._timer.cancel()
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.interrupted = True
        self._count += 1
        if self.session is None:  # still starting: attach() passes it on
            if self._early is None:
                self._early = signum
                return
            self._count = max(self._count, 2)  # a second signal while starting: stopped at attach
            return
        if self._count >= 2:
            self.session.kill_tree()
            self.pending.append((time.time_ns(), signal.Signals(signum).name, "agent process tree killed"))
            return
        self._forward(signum)
        # the tree's processes not yet found when the signal came get it too (the pipeline lags
        # behind the kernel on a busy machine): passes until the grace ends
        until = time.monotonic() + self.GRACE
        late = threading.Thread(target=self._forward_late, args=(signum, until), daemon=True)
        late.start()
        self._timer = threading.Timer(self.GRACE, self.session.kill_tree)
        self._timer.daemon = True
        self._timer.start()
        self.pending.append((time.time_ns(), signal.Signals(signum).name,
                             f"passed on to the agent's tree (killed after {self.GRACE:g} s if still running)"))

    def drain(self, pipeline: Pipeline) -> None:
        """Record each operator signal as an ``agent.intervention`` event (outside the handler)."""
        while self.pending:
            ts, name, outcome = self.pending.pop(0)
            action = {"SIGINT": "interrupt", "SIGTERM": "terminate", "SIGHUP": "hangup"}.get(name, name.lower())
            pipeline.feed(
                Event(
                    type="agent.intervention",
                    ts=ts,
                    pid=os.getpid(),
                    actor="operator",
                    action=action,
                    detail=f"{name} to spyglass{' (Ctrl-C)' if name == 'SIGINT' else ''} by {_user()}: {outcome}",
                )
            )

    def _forward_late(self, signum: int, until: float) -> None:
        while not self._done.wait(_LATE_FORWARD) and time.monotonic() < until:
            self._forward(signum)

    def _forward(self, signum: int) -> None:
        """Pass ``signum`` on to each live process of the tree not yet given it: those the pipeline
        has seen and the live descendants of its root (from /proc: seen or not yet).  Called
        again every ``_LATE_FORWARD`` s from a thread, for processes found since."""
        if self.procs is None:
            return
        own = os.getpgrp()
        typed = signum == signal.SIGINT and _terminal_foreground() == own
        for _ in range(3):
            try:
                infos = list(self.procs.procs.values())
                break
            except RuntimeError:  # the table changed under the timer thread: look again
                continue
        else:
            return
        detached = {info.pid for info in infos if info.detached}
        pids = [info.pid for info in infos if info.exit_ts is None and not info.detached]
        root = self.procs.get(self.procs.root_pid) if self.procs.root_pid is not None else None
        if root is not None and root.exit_ts is None and not root.detached and procfs.running(root.pid):
            pids += procfs.descendants(root.pid)
        for pid in dict.fromkeys(pids):
            if pid in self._forwarded or pid in detached:
                continue
            self._forwarded.add(pid)
            try:
                if typed and os.getpgid(pid) == own:
                    continue
                os.kill(pid, signum)
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


def _user() -> str:
    try:
        import getpass

        return getpass.getuser()
    except Exception:
        return str(os.getuid())


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
        host=os.uname().nodename,  # socket.gethostname(), without importing socket
        extra=dict(request.extra),
    )
    home = request.home or default_home(request.env)
    meta.extra["home"] = home
    writer = RunWriter(store, meta, signer=signer)
    ctx = RunContext(
        run_id=meta.id,
        root_cwd=cwd,
        workspace=meta.workspace,
        home=home,
        run=meta,
        store=store,
        run_dir=writer.dir,
        policy=request.policy,
        mode=request.mode,
        monitor_pids=[os.getpid()],
        sandbox=request.sandbox_view,
        backend=BackendInfo(name=backend.name, options=dict(request.backend_options)),
    )
    meta.extra["monitor_pids"] = ctx.monitor_pids
    meta.extra["monitor_pgids"] = [os.getpgrp()]  # the tracer's group joins once it is known
    pipeline = Pipeline([writer, *sinks], ctx)
    phases.mark("store")
    stopped_by: list[str] = []
    status = "complete"
    capture = CaptureResult()
    try:
        pipeline.start()
        phases.mark("sinks start")
        spec = LaunchSpec(
            argv=list(request.argv),
            cwd=cwd,
            env=request.env,
            wait_descendants=request.wait_descendants,
            wrapper=list(request.wrapper),
            # where a backend's helper notes that spyglass died mid-run (Store.repair reads it)
            options={**request.backend_options, "monitor_note": os.path.abspath(writer.dir / MONITOR_NOTE),
                     "on_following": _following_hook(request, meta, writer, store, stopped_by)},
            stdio=request.stdio,
            urgent=pipeline.urgent_hook(),  # the rule engine's fast lane, on the capture's thread
            lookout=pipeline.urgent_hook("lookout"),  # ... and its look at records ahead of order
            # the tracer and helpers join the monitor facts before the lane sees the events after them
            on_monitor=lambda pids: learn_monitors(ctx, meta.extra["monitor_pgids"], pids),
        )
        started: list[CaptureSession] = []
        stop_lock = threading.Lock()

        def stop_agent(reason: str) -> None:
            # also from the capture's reader thread (the fast lane), maybe before start() returned
            with stop_lock:
                if not stopped_by:
                    stopped_by.append(reason)
                live = started[0] if started else None
            if live is not None:
                live.kill_tree()

        ctx.stop_agent = stop_agent
        _warm(sinks, loading_only=True)  # while the eBPF program still loads (the wait is idle)
        phases.mark("warm")
        sig = _Signals(None, ctx.procs)  # from before the agent starts: no window without a handler
        sig.__enter__()
        try:
            session = backend.start(spec)
        except BaseException:
            sig.__exit__()
            raise
        with stop_lock:
            started.append(session)
            stop_now = bool(stopped_by)
        if stop_now:  # a kill rule fired while the capture was starting
            session.kill_tree()
        sig.attach(session)
        phases.mark("capture start")
        # the rest of the warm-up while the agent starts (its first events queue meanwhile, and any
        # type not compiled yet compiles at its first event: nothing goes unevaluated)
        _warm(sinks)
        phases.mark("warm after launch")
        gcpause.resume()  # the agent runs: the collector too, if the CLI paused it for the start
        chosen: Any = getattr(backend, "inner", backend)  # a sandbox wraps the backend
        meta.backend = chosen.name  # ``auto`` may have fallen back at start
        if getattr(chosen, "reason", None):
            meta.extra["backend_reason"] = chosen.reason
        pipeline.launched()
        if on_started is not None:
            on_started(meta)
        groups = meta.extra["monitor_pgids"]
        # known as soon as the capture runs: the fast lane is deciding on the reader's thread already
        tracer_known = learn_tracer(session, ctx, groups)
        # the capture's reader thread (and the fast lane on it) waits for the interpreter lock at most
        # this long while the pipeline is busy (the default, 5 ms, let a burst delay alerts)
        switch = sys.getswitchinterval()
        sys.setswitchinterval(min(switch, _SWITCH_INTERVAL))
        try:
            with sig:
                for ev in session.events():
                    if not tracer_known and session.tracer_pid is not None:  # for rules about killing the monitor
                        tracer_known = learn_tracer(session, ctx, groups)
                    pipeline.feed(ev)
                    if sig.pending:
                        sig.drain(pipeline)
                sig.drain(pipeline)
        finally:
            sys.setswitchinterval(switch)
        if not tracer_known and session.tracer_pid is not None:
            ctx.monitor_pids.append(session.tracer_pid)
        capture = session.result()
        phases.mark("child run")
        gcpause.pause_finish()  # only the run's finish is left (a CLI run)
        if capture.failed_to_start:
            status = "failed"  # the agent never ran: never "complete"
            capture.notes.append(capture.failed_to_start)
        elif capture.monitor_lost:
            status = "monitor-lost"  # never "complete": the record stops while the run went on
        elif sig.interrupted:
            status = "interrupted"
    except SinkStartError as exc:
        pipeline.done()
        writer.finish("incomplete", capture={"notes": [str(exc)], "sink_errors": {exc.sink: 1}})
        raise
    except BaseException as exc:
        pipeline.done()
        # the agent could not be started (no sandbox, no backend): a failed run, never complete
        writer.finish("failed" if getattr(exc, "exit_code", None) == EXIT_CANNOT_RUN else "interrupted")
        raise
    pipeline.done()
    phases.mark("finish: sinks")
    if pipeline.errors:
        meta.extra["evidence"] = {"partial": True, "sink_errors": dict(pipeline.errors)}
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
            **({"handover": capture.handover} if capture.handover else {}),
        },
        still_running=[{"pid": s.pid, "argv": s.argv} for s in capture.still_running],
    )
    phases.mark("finish: store")
    return RunOutcome(meta=meta, capture=capture, sink_errors=pipeline.errors)


def _following_hook(
    request: RunRequest, meta: RunMeta, writer: RunWriter, store: Store, stopped_by: list[str]
) -> Callable[[list[int], int | None, str | None], None] | None:
    """The backend's ``on_following``: run.json says the run is still recording, then the caller is told."""
    hook = request.on_following
    if hook is None:
        return None

    def following(pids: list[int], exit_code: int | None, sig: str | None) -> None:
        shell = CaptureResult(exit_code=exit_code, signal=sig).shell_exit_code
        meta.extra["following"] = {"since": time.time_ns(), "pids": pids, "agent_exit": shell}
        try:
            store.write_meta(meta)  # `show` and `ls` say "still recording" meanwhile
        except OSError:
            pass
        level = writer.max_level
        assert hook is not None
        hook(Following(meta.id, shell, LEVELS[level] if level >= 0 else None,
                       stopped_by[0] if stopped_by else None, pids))

    return following


def _warm(sinks: Sequence[object], *, loading_only: bool = False) -> None:
    """Sinks with a ``warm(more)`` hook prepare (the rule engine compiles the functions of the
    commonest event types, and more while the eBPF program still loads).  ``loading_only``: only
    if the eBPF program is still loading (before the launch, the wait for it is idle time); else
    the warm-up runs just after the launch, while the agent's process starts."""
    import sys

    preload = sys.modules.get("spyglass.capture.ebpf.preload")  # not imported: no load under way
    more: Callable[[], bool] = preload.pending if preload is not None else lambda: False
    if loading_only and not more():
        return
    for sink in sinks:
        warm = getattr(sink, "warm", None)
        if warm is not None:
            warm(more)
