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

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from spyglass.events import Alert, Event
from spyglass.events.proctree import ProcessTable

log = logging.getLogger("spyglass.pipeline")

Hook = Callable[[Event], None]


@dataclass
class RunContext:
    """What sinks share about the run in progress."""

    run_id: str = ""
    root_cwd: str = ""
    workspace: list[str] = field(default_factory=list)
    procs: ProcessTable = field(default_factory=ProcessTable)
    meta: dict[str, Any] = field(default_factory=dict)
    pipeline: Pipeline | None = None
    #: set by the runner: stop the agent now (enforcement), with the reason
    stop_agent: Callable[[str], None] | None = None

    def raise_alert(self, alert: Alert) -> None:
        """Hand an alert to every sink's ``alert`` hook (store, printer, enforcer …)."""
        if self.pipeline is not None:
            self.pipeline.dispatch_alert(alert)


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

    def _failed(self, sink: object, what: str) -> None:
        name = getattr(sink, "name", type(sink).__name__)
        self.errors[name] = self.errors.get(name, 0) + 1
        if self.errors[name] <= 3:
            log.exception("%s failed on %s (the stream goes on)", name, what)

    def start(self) -> None:
        for sink in self.sinks:
            fn = getattr(sink, "start", None)
            if fn is not None:
                try:
                    fn(self.ctx)
                except Exception:
                    self._failed(sink, "start")

    def feed(self, ev: Event, *, renumber: bool = True) -> Event:
        if renumber or not ev.seq:
            self.seq += 1
            ev.seq = self.seq
        else:
            self.seq = ev.seq
        if not ev.ts:
            ev.ts = time.time_ns()
        self.ctx.procs.update(ev)
        for sink, hook in self._hooks_for(ev.type):
            try:
                hook(ev)
            except Exception:
                self._failed(sink, f"event {ev.seq} ({ev.type})")
        return ev

    def dispatch_alert(self, alert: Alert) -> None:
        self.alert_seq += 1
        alert.seq = self.alert_seq
        run = self.ctx.meta.get("run")
        if run is not None:  # the run's identity travels with the alert
            alert.run_id = alert.run_id or getattr(run, "id", None) or self.ctx.run_id or None
            alert.host = alert.host or getattr(run, "host", None) or None
            alert.agent_id = alert.agent_id or getattr(run, "agent_id", None)
            alert.task = alert.task or getattr(run, "task", None)
            alert.policy_digest = alert.policy_digest or getattr(run, "policy_digest", None)
        for sink, hook in self._alert_hooks:
            try:
                hook(alert)
            except Exception:
                self._failed(sink, f"alert {alert.rule_id}")

    def done(self) -> None:
        for sink in self.sinks:
            fn = getattr(sink, "done", None)
            if fn is not None:
                try:
                    fn(self.ctx)
                except Exception:
                    self._failed(sink, "done")
