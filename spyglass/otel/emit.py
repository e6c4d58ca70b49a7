"""Handing spans and log records to the OpenTelemetry SDK and its OTLP exporters.

Imported only when export is on (the SDK costs import time).  Spans and log
records go through the SDK's batch processors: a bounded queue, a background
thread that sends batches, the exporters' own retries with back-off.  The
caller's thread only appends to the queue, so a collector that is down or
slow costs the run nothing; when the queue is full the oldest records are
dropped, and :meth:`Emitter.finish` says how many were sent and how many not.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from google.protobuf.json_format import MessageToDict
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    LogRecordExporter,
    LogRecordExportResult,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from spyglass import __version__
from spyglass.otel.config import OtlpTarget
from spyglass.otel.mapping import LogRec, SpanRec

_SCOPE = InstrumentationScope("spyglass", __version__)


@dataclass
class Tally:
    """What one signal's exporter did: items handed to it, sent, failed, and the last failure."""

    emitted: int = 0
    sent: int = 0
    failed: int = 0
    error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

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
        self.tally.count(len(spans), ok, None if ok else f"{self.what} did not accept the spans")
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class _CountingLogs(LogRecordExporter):
    def __init__(self, inner: LogRecordExporter, tally: Tally, what: str) -> None:
        self.inner, self.tally, self.what = inner, tally, what

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        try:
            result = self.inner.export(batch)
        except Exception as exc:
            self.tally.count(len(batch), False, f"{type(exc).__name__}: {exc}")
            return LogRecordExportResult.FAILURE
        ok = result == LogRecordExportResult.SUCCESS
        self.tally.count(len(batch), ok, None if ok else f"{self.what} did not accept the log records")
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
        line = json.dumps(_hex_ids(MessageToDict(message)), separators=(",", ":"))
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

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _network_exporters(target: OtlpTarget) -> tuple[SpanExporter, LogRecordExporter]:
    assert target.endpoint is not None
    if target.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans

        endpoint = target.endpoint
        insecure = not endpoint.startswith("https://")
        hostport = endpoint.split("://", 1)[-1].rstrip("/")
        headers = tuple(target.headers.items()) or None
        return (
            GrpcSpans(endpoint=hostport, insecure=insecure, headers=headers, timeout=target.timeout),
            GrpcLogs(endpoint=hostport, insecure=insecure, headers=headers, timeout=target.timeout),
        )
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogs
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans

    base = target.endpoint.rstrip("/")
    return (
        HttpSpans(endpoint=f"{base}/v1/traces", headers=dict(target.headers), timeout=target.timeout),
        HttpLogs(endpoint=f"{base}/v1/logs", headers=dict(target.headers), timeout=target.timeout),
    )


@dataclass
class ExportStats:
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
    """One run's spans and log records on their way to one OTLP target."""

    def __init__(
        self,
        target: OtlpTarget,
        resource: dict[str, Any],
        trace_id: int,
        *,
        max_queue_size: int = 65536,
        batch_size: int = 2048,
        delay_ms: int = 500,
    ) -> None:
        if not logging.getLogger().isEnabledFor(logging.DEBUG):
            # the SDK logs each failed batch and each dropped record; the outcome is reported once, at the end
            logging.getLogger("opentelemetry").setLevel(logging.CRITICAL)
        self.target = target
        self.trace_id = trace_id
        self.stats = ExportStats(target.describe(), Tally(), Tally())
        self._file: _JsonFile | None = None
        if target.file is not None:
            self._file = _JsonFile(target.file)
            spans: SpanExporter = _FileSpans(self._file)
            logs: LogRecordExporter = _FileLogs(self._file)
        else:
            spans, logs = _network_exporters(target)
        what = target.describe()
        self._span_exporter, self._log_exporter = spans, logs
        self.span_proc = BatchSpanProcessor(
            _CountingSpans(spans, self.stats.spans, what),
            max_queue_size=max_queue_size,
            max_export_batch_size=min(batch_size, max_queue_size),
            schedule_delay_millis=delay_ms,
        )
        self.provider = LoggerProvider(resource=Resource.create(resource), shutdown_on_exit=False)
        self.provider.add_log_record_processor(
            BatchLogRecordProcessor(
                _CountingLogs(logs, self.stats.logs, what),
                max_queue_size=max_queue_size,
                max_export_batch_size=min(batch_size, max_queue_size),
                schedule_delay_millis=delay_ms,
            )
        )
        self.resource = Resource.create(resource)
        self.logger = self.provider.get_logger("spyglass", __version__)
        self._contexts: dict[int, Context] = {}

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
        self.logger.emit(
            timestamp=rec.ts,
            observed_timestamp=rec.ts,
            context=self._context(rec.span_id) if rec.span_id is not None else None,
            severity_number=SeverityNumber(rec.severity),
            severity_text=rec.severity_text,
            body=rec.body,
            attributes=rec.attributes,
            event_name=rec.event_name,
        )

    def span(self, rec: SpanRec) -> None:
        self.stats.spans.emitted += 1
        status = Status(StatusCode.ERROR, rec.error) if rec.error else Status(StatusCode.UNSET)
        self.span_proc.on_end(
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

    def finish(self, timeout_s: float = 10.0) -> ExportStats:
        """Send what is queued, waiting at most ``timeout_s`` in all; what is left is counted unsent.

        The SDK's shutdown waits for the last batch without a bound of ours, so it runs
        in a daemon thread; past the deadline the exporters are shut down, which stops
        their retries, and spyglass goes on.
        """

        def close() -> None:
            self.span_proc.shutdown()  # type: ignore[no-untyped-call]
            self.provider.shutdown()

        if self.stats.spans.failed + self.stats.logs.failed and not self.stats.spans.sent + self.stats.logs.sent:
            timeout_s = min(timeout_s, 2.0)  # nothing got through so far: do not wait long for the rest
        closer = threading.Thread(target=close, name="spyglass-otlp-close", daemon=True)
        closer.start()
        closer.join(timeout_s)
        if closer.is_alive():
            for exporter in (self._span_exporter, self._log_exporter):
                try:
                    exporter.shutdown()
                except Exception:
                    pass
            closer.join(1.0)
        if self._file is not None:
            self._file.close()
        return self.stats
