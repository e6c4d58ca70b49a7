"""The directly written log records decode to the message the SDK's own encoder builds."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from spyglass.events import Alert, Event
from spyglass.otel.logwire import LogWire, varint
from spyglass.otel.mapping import LogRec, SpanBuilder, alert_log, event_log, trace_id_for
from spyglass.store.meta import RunMeta

TRACE = trace_id_for("r1")
RESOURCE = Resource.create({"service.name": "spyglass", "host.name": "h", "gen_ai.agent.id": "mini-1"})
SCOPE = InstrumentationScope("spyglass", "1.2.3")


def _sdk(rec: LogRec) -> ReadableLogRecord:
    ctx = Context()
    if rec.span_id is not None:
        ctx = trace.set_span_in_context(
            NonRecordingSpan(SpanContext(TRACE, rec.span_id, False, TraceFlags(TraceFlags.SAMPLED)))
        )
    record = LogRecord(
        timestamp=rec.ts,
        observed_timestamp=rec.ts,
        context=ctx,
        severity_number=SeverityNumber(rec.severity),
        severity_text=rec.severity_text,
        body=rec.body,
        attributes=rec.attributes,
        event_name=rec.event_name,
    )
    return ReadableLogRecord(log_record=record, resource=RESOURCE, instrumentation_scope=SCOPE)


def _records() -> list[LogRec]:
    b = SpanBuilder("r1")
    evs = [
        Event(seq=1, ts=10, type="process.start", pid=5, ppid=1),
        Event(seq=2, ts=11, type="process.exec", pid=5, ppid=1, exe="/bin/sh", argv=["sh", "-c", "cat ~/.ssh/id"],
              cwd="/w", uid=0),
        Event(seq=3, ts=12, type="file.read", pid=5, path="/etc/hostname", flags="O_RDONLY", syscall="openat"),
        Event(seq=4, ts=13, type="file.read", pid=5, path="/etc/hostname", flags="O_RDONLY", syscall="openat"),
        Event(seq=2**40, ts=2**62, type="file.write", pid=5, path="/tmp/é ☃ x", ok=False, errno="EACCES"),
        Event(seq=6, ts=15, type="net.connect", pid=5, address="127.0.0.1", port=443, transport="tcp",
              domain="example.org", nbytes=0),
        Event(seq=7, ts=16, type="process.exit", pid=5, exit_code=-1, signal="SIGKILL"),
        Event(seq=8, ts=17, type="sandbox.denied", pid=5, path="", detail="x" * 300),
        Event(seq=9, ts=18, type="agent.permission_change", pid=0, changes=["+a", "-b"], widened=[]),
    ]
    recs = [event_log(ev, b.feed(ev)) for ev in evs]
    run = RunMeta(id="r1", host="h", agent_id="mini-1", task="t", started=1)
    alert = Alert(seq=1, ts=19, rule_id="cred-secret-read", title="Secret read", level="high", message="m",
                  pid=5, event_seqs=[3, 4], tags=["attack.t1552"], argv=["cat"])
    recs.append(alert_log(alert, run, b.span_of(5)))
    recs.append(LogRec(0, "", 0, "", "", {"f": 1.5, "neg": -3, "b": True, "nb": False, "none": None}, None))
    # equal as dict keys, different on the wire: 1, True and 1.0 under one name
    for i, v in enumerate((1, True, 1.0, 1)):
        recs.append(LogRec(20 + i, "x", 9, "INFO", "b", {"same": v, "big": 2**40 + i}, 7))
    return recs


def test_encoded_request_decodes_to_the_sdk_message() -> None:
    recs = _records()
    wire = LogWire(RESOURCE, SCOPE, TRACE)
    ours = ExportLogsServiceRequest.FromString(wire.request(recs))
    theirs = encode_logs([_sdk(r) for r in recs])
    assert len(ours.resource_logs[0].scope_logs[0].log_records) == len(recs)
    assert ours == theirs
    # a second batch uses the kept attribute bytes: still the same
    assert ExportLogsServiceRequest.FromString(wire.request(recs[2:4])) == encode_logs([_sdk(r) for r in recs[2:4]])


def test_varint() -> None:
    for n in (0, 1, 127, 128, 300, 2**32, 2**63 - 1):
        out, shift, value = varint(n), 0, 0
        for byte in out:
            value |= (byte & 0x7F) << shift
            shift += 7
        assert value == n and all(b & 0x80 for b in out[:-1]) and not out[-1] & 0x80


def test_both_paths_deliver_the_same_records_to_a_real_receiver() -> None:
    """Encoded batches through the SDK exporter's client, and the SDK's own records (the path
    taken when an exporter cannot take encoded batches), reach the receiver alike."""
    from spyglass.otel.config import OtlpTarget
    from spyglass.otel.emit import Emitter

    from .conftest import start_http

    recs = _records()
    seen = []
    for encoded in (True, False):
        receiver = start_http()
        try:
            em = Emitter(OtlpTarget(receiver.url), dict(RESOURCE.attributes), TRACE, batch_size=4)
            assert (em._wire is not None) is True
            if not encoded:
                em._wire = None
            for rec in recs:
                em.log(rec)
            stats = em.finish()
            assert stats.logs.sent == len(recs) and stats.complete
            assert receiver.got.wait(lambda g: len(g.logs) == len(recs))
            seen.append(sorted(receiver.got.logs, key=lambda r: (r["ts"], r["event_name"])))
        finally:
            receiver.stop()
    assert seen[0] == seen[1]
