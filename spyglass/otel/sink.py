"""Live OpenTelemetry export of a run: a pipeline sink.

Every event becomes a log record the moment it is seen, every alert too;
the spans (the run, its tool calls, its processes) are complete when the run
ends and are sent then.  The sink only puts records on the SDK's bounded
queue; sending happens on the SDK's thread.  At the end it waits a bounded
time for the queue to drain, writes what happened to ``run.json``
(``extra.otlp``) and, when something could not be sent, says so with the
command that re-sends the run from the store.

The SDK is imported in :meth:`OtlpSink.start`, so a run without export never
pays for it.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any

from spyglass.events import Alert, Event
from spyglass.otel.config import OtlpTarget
from spyglass.otel.mapping import SpanBuilder, alert_log, event_log, resource_attributes, trace_id_for
from spyglass.pipeline import RunContext, Sink


class OtlpSink(Sink):
    name = "otlp-export"

    def __init__(
        self,
        target: OtlpTarget,
        *,
        max_queue_size: int = 65536,
        flush_timeout: float | None = None,
        stream: IO[str] | None = None,
        quiet: bool = False,
    ) -> None:
        self.target = target
        self.max_queue_size = max_queue_size
        #: the most the end of the run waits for the collector (default: the target's request timeout)
        self.flush_timeout = flush_timeout if flush_timeout is not None else target.timeout
        self.stream = stream
        self.quiet = quiet
        self.emitter: Any = None
        self.builder: SpanBuilder | None = None
        self.run: Any = None
        self.result: dict[str, Any] | None = None

    def start(self, ctx: RunContext) -> None:
        from spyglass.otel.emit import Emitter

        self.run = ctx.meta["run"]
        self.emitter = Emitter(
            self.target,
            resource_attributes(self.run),
            trace_id_for(self.run.id),
            max_queue_size=self.max_queue_size,
        )
        self.builder = SpanBuilder(self.run.id)

    def event(self, ev: Event) -> None:
        if self.builder is None:
            return
        self.emitter.log(event_log(ev, self.builder.feed(ev)))

    def alert(self, alert: Alert) -> None:
        if self.builder is None:
            return
        self.emitter.log(alert_log(alert, self.run, self.builder.span_of(alert.pid)))

    def done(self, ctx: RunContext) -> None:
        if self.builder is None:
            return
        awareness = ctx.meta.get("agent_awareness")
        final = getattr(awareness, "final", None)
        agent = final.to_json() if final is not None else None
        end = time.time_ns()
        if self.run.ended is None:  # the run ended now: the wait for the collector below is not part of it
            self.run.ended = end
        for span in self.builder.spans(self.run, agent, end):
            self.emitter.span(span)
        stats = self.emitter.finish(self.flush_timeout)
        self.result = {**stats.to_json(), **self.target.to_json()}
        self.run.extra["otlp"] = self.result
        if not stats.complete and not self.quiet:
            out = self.stream or sys.stderr
            unsent = stats.spans.unsent + stats.logs.unsent
            total = stats.spans.emitted + stats.logs.emitted
            why = f" ({stats.to_json()['error']})" if stats.to_json()["error"] else ""
            out.write(
                f"spyglass: otlp: {unsent} of {total} records not sent to {self.target.describe()}{why}; "
                f"re-send with `spyglass export {self.run.id} --otlp {self.target.endpoint}`\n"
            )
            out.flush()
