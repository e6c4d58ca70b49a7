"""Exporting a stored run: the same spans and log records as the live export gave.

Alerts are sent right after the last event that fired them, so each is tied
to the span of the process that was alive then, as it was live.
"""

from __future__ import annotations

from typing import Any

from spyglass.otel.config import OtlpTarget
from spyglass.otel.mapping import SpanBuilder, alert_log, event_log, resource_attributes, trace_id_for
from spyglass.store import RunReader


def export_run(reader: RunReader, target: OtlpTarget) -> dict[str, Any]:
    """Send one stored run to ``target``; returns what was sent and what not (``complete``)."""
    from spyglass.otel.emit import Emitter

    run = reader.meta
    emitter = Emitter(target, resource_attributes(run), trace_id_for(run.id))
    builder = SpanBuilder(run.id)
    pending = sorted(reader.alerts(), key=lambda a: (max(a.event_seqs, default=0), a.seq))
    i = 0
    last_ts = run.started
    for ev in reader.events():
        sid = builder.feed(ev)
        emitter.log(event_log(ev, sid))
        last_ts = max(last_ts, ev.ts)
        while i < len(pending) and max(pending[i].event_seqs, default=0) <= ev.seq:
            a = pending[i]
            emitter.log(alert_log(a, run, builder.span_of(a.pid)))
            i += 1
    for a in pending[i:]:
        emitter.log(alert_log(a, run, builder.span_of(a.pid)))
    agent = (run.extra or {}).get("agent")
    for span in builder.spans(run, agent, run.ended or last_ts):
        emitter.span(span)
    stats = emitter.finish()
    return {"run": run.id, **stats.to_json(), **target.to_json()}
