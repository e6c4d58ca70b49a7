"""The event pipeline: an ordered chain of small components (sinks).

Each sink may define hook methods named after the event types it cares about,
with dots turned into underscores (``file_read``, ``process_exec``,
``net_connect``), a catch-all ``event``, ``alert`` for alerts raised by other
sinks, and ``start``/``done`` at both ends of a run.  A sink's failure is logged
and counted, never fatal to the stream.

The pipeline numbers events (``seq`` 1, 2, 3 … without gaps) and keeps the
run's process table current before any sink sees an event, so every sink can
ask ``ctx.procs`` about the process behind an event.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from spyglass.errors import EXIT_CANNOT_RUN, EXIT_USAGE, SpyglassError
from spyglass.events import Alert, Event
from spyglass.events.proctree import ProcessTable
from spyglass.logs import get_logger

if TYPE_CHECKING:
    from spyglass.policy import Policy
    from spyglass.store import RunMeta, Store

log = get_logger("spyglass.pipeline")

Hook = Callable[[Event], None]


def default_home(env: dict[str, str] | None = None) -> str:
    """The run's home directory, decided here only: ``HOME`` of the agent's
    environment (``env``, else ours), else the password database's."""
    source = env if env is not None else os.environ
    home = source.get("HOME") or os.path.expanduser("~")
    return home.rstrip("/") or "/"


def _factory(make: Callable[[], object]) -> Any:
    """``msgspec.field(default_factory=make)``, typed ``Any``: the build compiled with mypyc
    (``benchmarks/bench_compiled.py``) would check the ``Field`` against the attribute's type."""
    return msgspec.field(default_factory=make)


class SandboxView(msgspec.Struct):
    """What a sandboxed run's sinks need to know of the sandbox (``None`` when not sandboxed)."""

    home_view: str  # the home directory as the agent sees it
    home_host: str  # where the decoy home really lives
    honeytokens: list[str] = []  # host and view paths
    canary: str | None = None
    facts: dict[str, Any] = {}  # run.json ``extra.sandbox``


class BackendInfo(msgspec.Struct):
    """The capture backend of a run and its options, as the sinks see them."""

    name: str = ""
    options: dict[str, object] = {}


class RunContext(msgspec.Struct):
    """What sinks share about the run in progress: one typed object, filled by the session.

    ``home`` is decided once (the session: the agent's ``HOME``); ``monitor_pids``
    holds spyglass's own pid and, once capture runs, the tracer's.  ``run`` is the
    run's metadata: sinks add their facts to ``run.extra`` in ``done``."""

    run_id: str = ""
    root_cwd: str = ""
    workspace: list[str] = []
    #: the processes alive and their ancestry (exited ones are evicted: memory stays bounded)
    procs: ProcessTable = _factory(lambda: ProcessTable(evict=True))
    home: str = ""
    run: RunMeta | None = None
    store: Store | None = None
    run_dir: Path | None = None
    policy: Policy | None = None
    mode: str = "observe"
    monitor_pids: list[int] = []
    sandbox: SandboxView | None = None
    backend: BackendInfo = _factory(BackendInfo)
    #: pid -> "tool call N: CMD", kept current by the agent-awareness sink
    tool_calls: dict[int, str] = {}
    #: seq of every alert the store writer could not save (the live printer marks them NOT SAVED)
    unsaved_alerts: set[int] = set()
    #: evidence another sink could not write ("cause: path"); the run is then evidence-incomplete
    evidence_failures: list[str] = []
    pipeline: Pipeline | None = None
    #: set by the session: stop the agent now (enforcement), with the reason
    stop_agent: Callable[[str], None] | None = None
    #: paths of the workspace that existed before the run (the evidence sink's before-manifest)
    workspace_before: frozenset[str] | None = None

    def raise_alert(self, alert: Alert) -> None:
        """Hand an alert to every sink's ``alert`` hook (store, printer, enforcer …)."""
        if self.pipeline is not None:
            self.pipeline.dispatch_alert(alert)

    def announce_alert(self, alert: Alert) -> None:
        """Say now that an alert fired, before it is recorded (the fast lane, on the capture's
        reader thread): sinks with an ``announce`` hook (the live printer) get it."""
        if self.pipeline is not None:
            self.pipeline.announce(alert)

    def note_fact(self, key: str, value: Any) -> None:
        """Record a sink's fact in run.json ``extra`` (no-op without run metadata)."""
        if self.run is not None:
            self.run.extra[key] = value


class SinkStartError(SpyglassError):
    """A sink could not start: the run stops before the agent starts.

    The exit code follows the cause: 5 for a missing capability (the cause's own
    code when it is a :class:`SpyglassError`), 2 for bad input."""

    def __init__(self, sink: str, cause: BaseException) -> None:
        text = str(cause) or type(cause).__name__
        super().__init__(f"{sink} could not start: {text}")
        self.sink = sink
        self.cause = cause
        if isinstance(cause, SpyglassError):
            self.exit_code = cause.exit_code
        elif isinstance(cause, (OSError, ImportError)):
            self.exit_code = EXIT_CANNOT_RUN
        else:
            self.exit_code = EXIT_USAGE


#: every sink failure of this process: (sink name, what it was doing); the test
#: suite's autouse fixture fails a test in which a sink raised
ERROR_LOG: list[tuple[str, str]] = []


class Sink:
    """Base class for pipeline components; every hook is optional."""

    name: str = "sink"

    def start(self, ctx: RunContext) -> None:
        pass

    def done(self, ctx: RunContext) -> None:
        pass


class Pipeline:
    def __init__(self, sinks: Iterable[object], ctx: RunContext | None = None) -> None:
        self.sinks = list(sinks)
        self.ctx = ctx or RunContext()
        self.ctx.pipeline = self
        self.seq = 0
        self.alert_seq = 0
        self.errors: dict[str, int] = {}
        self._hooks: dict[str, list[tuple[object, Hook]]] = {}
        self._alert_hooks = [(s, h) for s in self.sinks if (h := getattr(s, "alert", None)) is not None]

    def urgent_hook(self, name: str = "urgent") -> Callable[[Event], None] | None:
        """What the capture calls with each event before it is queued (``LaunchSpec.urgent``):
        the sinks' ``urgent`` hooks (the rule engine's fast lane), or None when no sink has one.
        They run on the capture's reader thread, before the event has its ``seq``.  With
        ``name="lookout"``: the sinks' ``lookout`` hooks (``LaunchSpec.lookout``)."""
        hooks = [(s, h) for s in self.sinks if (h := getattr(s, name, None)) is not None]
        if not hooks:
            return None
        if len(hooks) == 1:
            only: Callable[[Event], None] = hooks[0][1]
            return only

        def urgent(ev: Event) -> None:
            for _, h in hooks:
                h(ev)

        return urgent

    def announce(self, alert: Alert) -> None:
        """An alert decided ahead of the stream (see :meth:`RunContext.announce_alert`)."""
        self._stamp(alert)
        for sink in self.sinks:
            fn = getattr(sink, "announce", None)
            if fn is not None:
                try:
                    fn(alert)
                except Exception:
                    self._failed(sink, f"announcing {alert.rule_id}")

    def _hooks_for(self, etype: str) -> list[tuple[object, Hook]]:
        hooks = self._hooks.get(etype)
        if hooks is None:
            attr = etype.replace(".", "_")
            hooks = []
            for sink in self.sinks:
                for name in (attr, "event"):
                    h = getattr(sink, name, None)
                    if h is not None:
                        hooks.append((sink, h))
            self._hooks[etype] = hooks
        return hooks

    @staticmethod
    def sink_name(sink: object) -> str:
        name = getattr(sink, "name", None)
        return name if isinstance(name, str) else type(sink).__name__

    def _failed(self, sink: object, what: str) -> None:
        name = self.sink_name(sink)
        if len(ERROR_LOG) < 1000:
            ERROR_LOG.append((name, what))
        self.errors[name] = self.errors.get(name, 0) + 1
        if self.errors[name] <= 3:
            exc = sys.exc_info()[1]
            if isinstance(exc, OSError):  # a full or read-only disk: the cause and the path, no traceback
                log.error("%s failed on %s: %s%s (the stream goes on)", name, what, exc.strerror or exc,
                          f": {exc.filename}" if exc.filename else "")
            else:
                log.exception("%s failed on %s (the stream goes on)", name, what)

    def start(self) -> None:
        """Start every sink in order; the first that fails raises :class:`SinkStartError`
        after the sinks already started are told ``done``."""
        started: list[object] = []
        for sink in self.sinks:
            fn = getattr(sink, "start", None)
            if fn is not None:
                try:
                    fn(self.ctx)
                except Exception as exc:
                    log.debug("%s failed to start", self.sink_name(sink), exc_info=True)
                    self.sinks = started
                    self._hooks.clear()
                    self._alert_hooks = [(s, h) for s in started if (h := getattr(s, "alert", None)) is not None]
                    raise SinkStartError(self.sink_name(sink), exc) from exc
            started.append(sink)

    def feed(self, ev: Event, *, renumber: bool = True) -> Event:
        if renumber or not ev.seq:
            self.seq += 1
            ev.seq = self.seq
        else:
            self.seq = ev.seq
        if not ev.ts:
            ev.ts = time.time_ns()
        t = ev.type
        if t.startswith("process."):
            self.ctx.procs.update(ev)
        for sink, hook in self._hooks_for(t):
            try:
                hook(ev)
            except Exception:
                self._failed(sink, f"event {ev.seq} ({ev.type})")
        return ev

    def launched(self) -> None:
        """The agent has been started: sinks with a ``launched`` hook get it."""
        for sink in self.sinks:
            fn = getattr(sink, "launched", None)
            if fn is not None:
                try:
                    fn()
                except Exception:
                    self._failed(sink, "launched")

    def dispatch_alert(self, alert: Alert) -> None:
        self.alert_seq += 1
        alert.seq = self.alert_seq
        self._stamp(alert)
        for sink, hook in self._alert_hooks:
            try:
                hook(alert)
            except Exception:
                self._failed(sink, f"alert {alert.rule_id}")

    def _stamp(self, alert: Alert) -> None:
        run = self.ctx.run
        if run is not None:  # the run's identity travels with the alert
            # (getattr: replays and tests hand in metadata of their own shape)
            alert.run_id = alert.run_id or getattr(run, "id", None) or self.ctx.run_id or None
            alert.host = alert.host or getattr(run, "host", None) or None
            alert.agent_id = alert.agent_id or getattr(run, "agent_id", None)
            alert.task = alert.task or getattr(run, "task", None)
            alert.policy_digest = alert.policy_digest or getattr(run, "policy_digest", None)

    def done(self) -> None:
        for sink in self.sinks:
            fn = getattr(sink, "done", None)
            if fn is not None:
                try:
                    fn(self.ctx)
                except Exception:
                    self._failed(sink, "done")
