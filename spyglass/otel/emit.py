"""Handing spans and log records to the OpenTelemetry SDK's OTLP exporters.

Imported only when export is on (the SDK costs import time): by
``spyglass export`` and by the live export's worker process.  Spans are
built as the SDK's readable spans; log records are encoded a batch at a time
by :mod:`spyglass.otel.logwire` (or built as the SDK's records when an
exporter cannot take encoded batches).  Both go in batches through the SDK's
OTLP exporters (HTTP/protobuf or gRPC, with their retries and back-off) or
are written as OTLP/JSON; each exporter's outcome is counted, so the caller
can say how many records were sent and how many not.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import msgspec
from opentelemetry import trace
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from spyglass import __version__
from spyglass.logs import load as load_logging
from spyglass.otel.config import OtlpTarget
from spyglass.otel.logwire import EncodedLogs, LogWire
from spyglass.otel.mapping import LogRec, SpanRec

_SCOPE = InstrumentationScope("spyglass", __version__)
_NO_SPAN = Context()  # a record outside any span (never the caller's current context)


class Tally(msgspec.Struct):
    """What one signal's exporter did: items handed to it, sent, failed, and the last failure."""

    emitted: int = 0
    sent: int = 0
    failed: int = 0
    error: str | None = None
    lock: threading.Lock = msgspec.field(default_factory=threading.Lock)

    def count(self, n: int, ok: bool, error: str | None = None) -> None:
        with self.lock:
            if ok:
                self.sent += n
            else:
                self.failed += n
                self.error = error or self.error

    @property
    def unsent(self) -> int:
        return max(0, self.emitted - self.sent)


class _CountingSpans(SpanExporter):
    def __init__(self, inner: SpanExporter, tally: Tally, what: str) -> None:
        self.inner, self.tally, self.what = inner, tally, what

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception as exc:
            self.tally.count(len(spans), False, f"{type(exc).__name__}: {exc}")
            return SpanExportResult.FAILURE
        ok = result == SpanExportResult.SUCCESS
        self.tally.count(len(spans), ok, None if ok else f"{self.what} unreachable or refused the spans")
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class _CountingLogs(LogRecordExporter):
    def __init__(self, inner: LogRecordExporter, tally: Tally, what: str) -> None:
        self.inner, self.tally, self.what = inner, tally, what
        #: the inner exporter takes a batch already encoded (:mod:`spyglass.otel.logwire`)
        self.encoded = callable(getattr(inner, "send_encoded", None)) and getattr(inner, "encoded_ok", True)

    def export(self, batch: Sequence[ReadableLogRecord] | EncodedLogs) -> LogRecordExportResult:
        try:
            if isinstance(batch, EncodedLogs):
                result: LogRecordExportResult = self.inner.send_encoded(batch)  # type: ignore[attr-defined]
            else:
                result = self.inner.export(batch)
        except Exception as exc:
            self.tally.count(len(batch), False, f"{type(exc).__name__}: {exc}")
            return LogRecordExportResult.FAILURE
        ok = result == LogRecordExportResult.SUCCESS
        self.tally.count(len(batch), ok, None if ok else f"{self.what} unreachable or refused the log records")
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()  # type: ignore[no-untyped-call]

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _hex_ids(node: Any) -> Any:
    """OTLP/JSON writes trace and span ids as hex, where protobuf's JSON gives base64."""
    import base64

    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str):
                out[k] = base64.b64decode(v).hex()
            else:
                out[k] = _hex_ids(v)
        return out
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


class _JsonFile:
    """OTLP/JSON lines: one ExportTraceServiceRequest or ExportLogsServiceRequest per line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.stream: IO[str] = path.open("w", encoding="utf-8")

    def write(self, message: Any) -> None:
        from google.protobuf.json_format import MessageToDict

        line = json.dumps(_hex_ids(MessageToDict(message, use_integers_for_enums=True)), separators=(",", ":"))
        with self.lock:
            self.stream.write(line + "\n")
            self.stream.flush()

    def close(self) -> None:
        with self.lock:
            if not self.stream.closed:
                self.stream.close()


class _FileSpans(SpanExporter):
    def __init__(self, out: _JsonFile) -> None:
        self.out = out

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.out.write(encode_spans(spans))
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class _FileLogs(LogRecordExporter):
    def __init__(self, out: _JsonFile) -> None:
        self.out = out

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        self.out.write(encode_logs(batch))
        return LogRecordExportResult.SUCCESS

    def send_encoded(self, batch: EncodedLogs) -> LogRecordExportResult:
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

        self.out.write(ExportLogsServiceRequest.FromString(batch.data))
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _network_exporters(target: OtlpTarget) -> tuple[SpanExporter, LogRecordExporter]:
    """The SDK's OTLP exporters for ``target``; the log exporter also sends encoded batches
    (``send_encoded``): the bytes through the same client, with the same retries."""
    assert target.endpoint is not None
    if target.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

        class _GrpcLogs(GrpcLogs):
            # the mixin's export loop (retries, back-off, reconnection) asks _translate_data for
            # the request: an encoded batch is parsed back in C, the rest is the SDK's
            def _translate_data(self, data: Any) -> ExportLogsServiceRequest:
                if isinstance(data, EncodedLogs):
                    request: ExportLogsServiceRequest = ExportLogsServiceRequest.FromString(data.data)
                    return request
                return super()._translate_data(data)

            def _count_data(self, data: Any) -> int:
                return len(data)

            def send_encoded(self, batch: EncodedLogs) -> LogRecordExportResult:
                return self.export(batch)  # type: ignore[arg-type]

        endpoint = target.endpoint
        insecure = not endpoint.startswith("https://")
        hostport = endpoint.split("://", 1)[-1].rstrip("/")
        headers = tuple(target.headers.items()) or None
        return (
            GrpcSpans(endpoint=hostport, insecure=insecure, headers=headers, timeout=target.timeout),
            _GrpcLogs(endpoint=hostport, insecure=insecure, headers=headers, timeout=target.timeout),
        )
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogs
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans

    class _HttpLogs(HttpLogs):
        @property
        def encoded_ok(self) -> bool:
            return callable(getattr(getattr(self, "_client", None), "export", None))

        def send_encoded(self, batch: EncodedLogs) -> LogRecordExportResult:
            # the exporter's own client: retries with back-off within the timeout, as export() does
            result = self._client.export(batch.data)
            return LogRecordExportResult.SUCCESS if result.success else LogRecordExportResult.FAILURE

    base = target.endpoint.rstrip("/")
    return (
        HttpSpans(endpoint=f"{base}/v1/traces", headers=dict(target.headers), timeout=target.timeout),
        _HttpLogs(endpoint=f"{base}/v1/logs", headers=dict(target.headers), timeout=target.timeout),
    )


class _RunResource(Resource):
    """A resource whose hash is computed once (the encoder hashes it for every record it groups)."""

    _hash: int | None = None

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = super().__hash__()
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or super().__eq__(other)


class ExportStats(msgspec.Struct):
    target: str
    spans: Tally
    logs: Tally

    @property
    def complete(self) -> bool:
        return self.spans.unsent == 0 and self.logs.unsent == 0

    def to_json(self) -> dict[str, Any]:
        def one(t: Tally) -> dict[str, Any]:
            return {"emitted": t.emitted, "sent": t.sent, "unsent": t.unsent}

        errors = [e for e in (self.spans.error, self.logs.error) if e]
        return {
            "target": self.target,
            "spans": one(self.spans),
            "logs": one(self.logs),
            "complete": self.complete,
            "error": errors[0] if errors else None,
        }


class Emitter:
    """One run's spans and log records on their way to one OTLP target, in batches.

    Spans are built as the SDK's ``ReadableSpan``, log records encoded as request
    bytes (:mod:`spyglass.otel.logwire`), and handed to the SDK's OTLP exporters
    (which retry with back-off within their timeout) a batch at a time, on the
    caller's thread: the live export runs this in a process of its own
    (:mod:`spyglass.otel.worker`), ``spyglass export`` in the command.
    After a batch fails, the next ``retry_after`` seconds' batches are counted as
    not sent without trying, so a collector that is down costs one timeout per
    interval, not one per batch; then sending is tried again.
    """

    def __init__(
        self,
        target: OtlpTarget,
        resource: dict[str, Any],
        trace_id: int,
        *,
        batch_size: int = 2048,
        retry_after: float = 5.0,
        on_batch: Callable[[int], None] | None = None,
        on_send: Callable[[], None] | None = None,
    ) -> None:
        logging = load_logging()  # configured as the CLI asked, before the SDK logs anything
        if not logging.getLogger().isEnabledFor(logging.DEBUG):
            # the SDK logs each failed request; the outcome is reported once, at the end
            logging.getLogger("opentelemetry").setLevel(logging.CRITICAL)
        self.target = target
        self.trace_id = trace_id
        self.batch_size = batch_size
        self.retry_after = retry_after
        #: called after each batch with the number of records handled so far (the worker's progress)
        self.on_batch = on_batch
        #: called before each request to the collector (the worker says a request is under way)
        self.on_send = on_send
        self.stats = ExportStats(target.describe(), Tally(), Tally())
        self._file: _JsonFile | None = None
        if target.file is not None:
            self._file = _JsonFile(target.file)
            spans: SpanExporter = _FileSpans(self._file)
            logs: LogRecordExporter = _FileLogs(self._file)
        else:
            spans, logs = _network_exporters(target)
        what = target.describe()
        self._spans = _CountingSpans(spans, self.stats.spans, what)
        self._logs = _CountingLogs(logs, self.stats.logs, what)
        self.resource = _RunResource(Resource.create(resource).attributes)
        self._span_batch: list[ReadableSpan] = []
        self._log_batch: list[LogRec] = []
        self._wire = LogWire(self.resource, _SCOPE, trace_id) if self._logs.encoded else None
        self._contexts: dict[int, Context] = {}
        self._down_until = 0.0

    def _span_context(self, span_id: int) -> SpanContext:
        return SpanContext(self.trace_id, span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))

    def _context(self, span_id: int) -> Context:
        ctx = self._contexts.get(span_id)
        if ctx is None:
            ctx = trace.set_span_in_context(NonRecordingSpan(self._span_context(span_id)))
            if len(self._contexts) > 100_000:
                self._contexts.clear()
            self._contexts[span_id] = ctx
        return ctx

    def log(self, rec: LogRec) -> None:
        self.stats.logs.emitted += 1
        self._log_batch.append(rec)
        if len(self._log_batch) >= self.batch_size:
            self._send_logs()

    def _readable(self, rec: LogRec) -> ReadableLogRecord:
        """The SDK's record (when the exporter takes only those)."""
        record = LogRecord(
            timestamp=rec.ts,
            observed_timestamp=rec.ts,
            context=self._context(rec.span_id) if rec.span_id is not None else _NO_SPAN,
            severity_number=SeverityNumber(rec.severity),
            severity_text=rec.severity_text,
            body=rec.body,
            attributes=rec.attributes,
            event_name=rec.event_name,
        )
        return ReadableLogRecord(log_record=record, resource=self.resource, instrumentation_scope=_SCOPE)

    def span(self, rec: SpanRec) -> None:
        self.stats.spans.emitted += 1
        status = Status(StatusCode.ERROR, rec.error) if rec.error else Status(StatusCode.UNSET)
        self._span_batch.append(
            ReadableSpan(
                rec.name,
                context=self._span_context(rec.span_id),
                parent=self._span_context(rec.parent_id) if rec.parent_id is not None else None,
                resource=self.resource,
                attributes=rec.attributes,
                kind=SpanKind.INTERNAL,
                status=status,
                start_time=rec.start,
                end_time=max(rec.end, rec.start),
                instrumentation_scope=_SCOPE,
            )
        )
        if len(self._span_batch) >= self.batch_size:
            self._send_spans()

    def _down(self) -> bool:
        return time.monotonic() < self._down_until

    @property
    def down(self) -> bool:
        """The collector failed within ``retry_after`` seconds: records are counted as not sent."""
        return self._down()

    def drop_log(self) -> None:
        """One log record counted as not sent without being built (the collector is down)."""
        logs = self.stats.logs
        logs.emitted += 1
        logs.failed += 1  # on the caller's thread, as every count of this emitter
        if not logs.emitted % self.batch_size:
            self._progress()

    def _send_logs(self) -> None:
        batch, self._log_batch = self._log_batch, []
        if not batch:
            return
        if self._down():
            self.stats.logs.count(len(batch), False)
            return
        encoded: Sequence[ReadableLogRecord] | EncodedLogs
        if self._wire is not None:
            encoded = EncodedLogs(self._wire.request(batch), len(batch))
        else:
            encoded = [self._readable(rec) for rec in batch]
        if self.on_send is not None:
            self.on_send()
        if self._logs.export(encoded) != LogRecordExportResult.SUCCESS:
            self._down_until = time.monotonic() + self.retry_after
        self._progress()

    def _send_spans(self) -> None:
        batch, self._span_batch = self._span_batch, []
        if not batch:
            return
        if self._down():
            self.stats.spans.count(len(batch), False)
            return
        if self.on_send is not None:
            self.on_send()
        if self._spans.export(batch) != SpanExportResult.SUCCESS:
            self._down_until = time.monotonic() + self.retry_after
        self._progress()

    def _progress(self) -> None:
        if self.on_batch is not None:
            st = self.stats
            self.on_batch(st.logs.sent + st.logs.failed + st.spans.sent + st.spans.failed)

    def flush(self) -> None:
        """Send what is batched now (the live worker calls it when the run goes quiet)."""
        self._send_logs()
        self._send_spans()

    def finish(self) -> ExportStats:
        """Send the last batches (unless the collector failed within ``retry_after``: then
        they are counted as not sent at once) and close the exporters."""
        self.flush()
        for exporter in (self._spans, self._logs):
            try:
                exporter.shutdown()
            except Exception:
                pass
        if self._file is not None:
            self._file.close()
        return self.stats
