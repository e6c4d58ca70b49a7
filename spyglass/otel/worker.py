"""The live export's worker: a process of its own that maps and sends a run's telemetry.

``python -m spyglass.otel.worker`` reads, on stdin, a header line (the target,
the run's resource, its id), then one line per record as the run goes:
``E`` + an event's JSON, ``A`` + an alert's JSON, and at the end ``D`` + the
run's metadata and agent view, from which it builds the spans.  It sends in
batches (a batch is sent when full, or when no line came for half a second)
prints ``S`` on stdout before each request to the collector, ``P N SENT`` after
each batch (N records handled so far, SENT log records sent so far) and what
was sent as one JSON line when stdin closes.

Running apart from the recording means the SDK's encoding and the network
never hold the recorder's interpreter lock; the recorder only writes lines
to a pipe, and drops (and counts) what the pipe cannot take.
"""

from __future__ import annotations

import json
import os
import select
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec

from spyglass.events import Alert, Event
from spyglass.otel.config import OtlpTarget
from spyglass.otel.mapping import SpanBuilder, alert_log, event_log, trace_id_for

_event_dec = msgspec.json.Decoder(Event)
_alert_dec = msgspec.json.Decoder(Alert)


def _lines(fd: int, idle: float) -> Any:
    """Lines from ``fd``; ``None`` whenever nothing came for ``idle`` seconds."""
    buf = b""
    while True:
        ready, _, _ = select.select([fd], [], [], idle)
        if not ready:
            yield None
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            if buf:
                yield buf
            return
        buf += chunk
        *lines, buf = buf.split(b"\n")
        yield from lines


def serve(fd: int, out: Any) -> dict[str, Any]:
    from spyglass.otel.emit import Emitter

    gen = _lines(fd, 0.5)
    header_line = next(line for line in gen if line is not None)
    header = json.loads(header_line)
    t = header["target"]
    target = OtlpTarget(
        endpoint=t["endpoint"],
        protocol=t["protocol"],
        headers=dict(t["headers"]),
        timeout=float(t["timeout"]),
        file=Path(t["file"]) if t.get("file") else None,
        source=t.get("source", "option"),
    )
    run_id = header["run_id"]

    def progress(n: int) -> None:
        out.write(f"P {n} {emitter.stats.logs.sent}\n")
        out.flush()

    def sending() -> None:
        out.write("S\n")
        out.flush()

    emitter = Emitter(target, header["resource"], trace_id_for(run_id), on_batch=progress, on_send=sending)
    builder = SpanBuilder(run_id)
    run: Any = None
    for line in gen:
        if line is None:
            emitter.flush()
            continue
        kind, body = line[:1], line[1:]
        if kind == b"E":
            ev = _event_dec.decode(body)
            span_id = builder.feed(ev)
            if emitter.down:  # the collector failed a moment ago: counted, not built
                emitter.drop_log()
            else:
                emitter.log(event_log(ev, span_id))
        elif kind == b"A":
            alert = _alert_dec.decode(body)
            emitter.log(alert_log(alert, _RunView(header), builder.span_of(alert.pid)))
        elif kind == b"D":
            done = json.loads(body)
            # every field of the run's metadata (RunMeta, which the store's package would cost
            # this process its import time to decode into)
            run = SimpleNamespace(**done["run"])
            for span in builder.spans(run, done.get("agent"), int(done["end"])):
                emitter.span(span)
    stats = emitter.finish()
    result = stats.to_json()
    out.write(json.dumps(result) + "\n")
    out.flush()
    return result


class _RunView:
    """What an alert record needs of the run before the run's final metadata exists."""

    def __init__(self, header: dict[str, Any]) -> None:
        self.id: str = header["run_id"]
        self.policy_digest: str | None = header.get("policy_digest")
        self.task: str | None = header.get("task")
        self.agent_id: str | None = header.get("agent_id")
        self.host: str = header.get("host") or ""


def main() -> None:
    serve(sys.stdin.fileno(), sys.stdout)


if __name__ == "__main__":
    main()
