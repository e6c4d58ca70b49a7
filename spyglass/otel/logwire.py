"""A batch of log records as the bytes of an OTLP ``ExportLogsServiceRequest``.

The SDK's encoder (``encode_logs``) builds a protobuf message per record, per
attribute and per value, then serializes them: about 20 µs a record, most of
the live export's cost.  Here the same message is written directly in the
protobuf wire format, with the key and value bytes of repeated attributes
kept: a few µs a record.  The resource and the instrumentation scope are
encoded once, by the SDK's own encoder, and so is any attribute value other
than a string, a bool or a non-negative int (lists, floats, negative ints), so
the bytes decode to the message the SDK would have built
(``tests/otel/test_logwire.py`` checks this record by record).  The bytes go out
through the SDK's OTLP exporters (:mod:`spyglass.otel.emit`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any, Final

from opentelemetry.exporter.otlp.proto.common._internal import (
    _encode_instrumentation_scope,
    _encode_key_value,
    _encode_resource,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from spyglass.otel.mapping import LogRec

_SMALL: Final = [bytes([i]) for i in range(128)]
_fixed64 = struct.Struct("<Q").pack
# what is kept is bounded: at most _CACHE_MAX entries a table (cleared when full), and no string
# over _KEEP_LEN characters, so the tables hold a few MiB at most
_CACHE_MAX: Final = 8192
_KEEP_LEN: Final = 256
_UNIQUE: Final = frozenset({"spyglass.event.seq", "spyglass.alert.seq"})  # int attributes not worth keeping

# tags: (field number << 3) | wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32)
_T_TIME: Final = b"\x09"  # LogRecord.time_unix_nano (1)
_T_SEVERITY: Final = b"\x10"  # LogRecord.severity_number (2)
_T_SEVERITY_TEXT: Final = b"\x1a"  # (3)
_T_BODY: Final = b"\x2a"  # (5)
_T_ATTRIBUTE: Final = b"\x32"  # (6)
# (8) flags, fixed32: b"\x45" + 4 bytes
_T_TRACE_ID: Final = b"\x4a\x10"  # (9), 16 bytes
_T_SPAN_ID: Final = b"\x52\x08"  # (10), 8 bytes
_T_OBSERVED: Final = b"\x59"  # (11)
_T_EVENT_NAME: Final = b"\x62"  # (12)
_T_FIRST: Final = b"\x0a"  # field 1, length-delimited: KeyValue.key, AnyValue.string_value,
#                            ScopeLogs.scope, ResourceLogs.resource, ExportLogsServiceRequest.resource_logs
_T_SECOND: Final = b"\x12"  # field 2, length-delimited: KeyValue.value, ScopeLogs.log_records,
#                             ResourceLogs.scope_logs
_BOOL: Final = {True: b"\x12\x02\x10\x01", False: b"\x12\x02\x10\x00"}  # KeyValue.value = AnyValue{bool_value}


def varint(n: int) -> bytes:
    """A non-negative int as a protobuf varint (unrolled up to four bytes)."""
    if n < 0x80:
        return _SMALL[n]
    if n < 0x4000:
        return bytes((n & 0x7F | 0x80, n >> 7))
    if n < 0x200000:
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14))
    if n < 0x10000000:
        return bytes((n & 0x7F | 0x80, n >> 7 & 0x7F | 0x80, n >> 14 & 0x7F | 0x80, n >> 21))
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    return tag + varint(len(payload)) + payload


class LogWire:
    """Encodes one run's log records (one resource, one scope) as OTLP request bytes."""

    def __init__(self, resource: Resource, scope: InstrumentationScope, trace_id: int) -> None:
        self._resource = _field(_T_FIRST, _encode_resource(resource).SerializeToString())
        if resource.schema_url:
            self._resource += _field(b"\x1a", resource.schema_url.encode())
        self._scope = _field(_T_FIRST, _encode_instrumentation_scope(scope).SerializeToString())
        self._scope_tail = _field(b"\x1a", scope.schema_url.encode()) if scope.schema_url else b""
        self._trace = _T_TRACE_ID + trace_id.to_bytes(16, "big")
        self._keys: dict[str, bytes] = {}
        self._attrs: dict[tuple[str, Any], bytes] = {}
        self._strings: dict[tuple[bytes, str], bytes] = {}
        self._span_ids: dict[int, bytes] = {}
        self._heads: dict[tuple[int, str, str], bytes] = {}

    # -- pieces ------------------------------------------------------------------
    def _key(self, key: str) -> bytes:
        kb = self._keys.get(key)
        if kb is None:
            kb = self._keys[key] = _field(_T_FIRST, key.encode())
        return kb

    def _string(self, tag: bytes, text: str) -> bytes:
        """``tag`` + a length-delimited UTF-8 string (kept: names, severity texts, bodies)."""
        got = self._strings.get((tag, text))
        if got is None:
            got = _field(tag, text.encode("utf-8", "replace"))
            if len(text) <= _KEEP_LEN:
                if len(self._strings) >= _CACHE_MAX:
                    self._strings.clear()
                self._strings[(tag, text)] = got
        return got

    def attribute(self, key: str, value: Any) -> bytes:
        """One ``attributes`` entry of a LogRecord (tag included); b"" when the SDK would drop it."""
        t = type(value)
        if t is int and 0 <= value < 1 << 63:
            v = varint(value)
            kb = self._key(key)
            # KeyValue{key, value: AnyValue{int_value}}
            enc = _T_ATTRIBUTE + varint(len(kb) + 3 + len(v)) + kb + _T_SECOND + _SMALL[1 + len(v)] + b"\x18" + v
            if key not in _UNIQUE:  # pids, ports, exit codes repeat; sequence numbers never do
                if len(self._attrs) >= _CACHE_MAX:
                    self._attrs.clear()
                self._attrs[(key, value)] = enc
            return enc
        if t is bool:
            return _field(_T_ATTRIBUTE, self._key(key) + _BOOL[value])
        if t is str:
            got = self._attrs.get((key, value))
            if got is None:
                inner = self._key(key) + _field(_T_SECOND, _field(_T_FIRST, value.encode("utf-8", "replace")))
                got = _field(_T_ATTRIBUTE, inner)
                if len(value) <= _KEEP_LEN:
                    if len(self._attrs) >= _CACHE_MAX:
                        self._attrs.clear()
                    self._attrs[(key, value)] = got
            return got
        try:  # everything else as the SDK encodes it (and drops what it cannot encode)
            return _field(_T_ATTRIBUTE, _encode_key_value(key, value).SerializeToString())
        except Exception:
            return b""

    def _span(self, span_id: int) -> bytes:
        """flags (SAMPLED), trace id and span id: the same for every record of a span."""
        got = self._span_ids.get(span_id)
        if got is None:
            got = b"\x45\x01\x00\x00\x00" + self._trace + _T_SPAN_ID + span_id.to_bytes(8, "big")
            if len(self._span_ids) >= _CACHE_MAX:
                self._span_ids.clear()
            self._span_ids[span_id] = got
        return got

    def _head(self, severity: int, text: str, body: str) -> bytes:
        """severity number, severity text and body (field 5, an AnyValue string)."""
        key = (severity, text, body)
        got = self._heads.get(key)
        if got is None:
            got = (_T_SEVERITY + varint(severity) if severity else b"") + (
                _field(_T_SEVERITY_TEXT, text.encode()) if text else b""
            ) + _field(_T_BODY, _field(_T_FIRST, body.encode("utf-8", "replace")))
            if len(body) <= _KEEP_LEN:
                if len(self._heads) >= _CACHE_MAX:
                    self._heads.clear()
                self._heads[key] = got
        return got

    def record(self, rec: LogRec) -> bytes:
        """One LogRecord message (fields in number order, proto3 defaults left out)."""
        attribute, kept = self.attribute, self._attrs
        # a string or int seen before with this key: its bytes as kept (the common case, inline;
        # only those two are kept, so that True, 1 and 1.0, equal as keys, never meet)
        parts = [
            (kept.get((k, v)) if type(v) is str or type(v) is int else None) or attribute(k, v)
            for k, v in rec.attributes.items()
        ]
        ts = _fixed64(rec.ts) if rec.ts else b""
        head = _T_TIME + ts + self._head(rec.severity, rec.severity_text, rec.body) if ts else self._head(
            rec.severity, rec.severity_text, rec.body
        )
        tail = (self._span(rec.span_id) if rec.span_id else b"") + (_T_OBSERVED + ts if ts else b"")
        if rec.event_name:
            tail += self._string(_T_EVENT_NAME, rec.event_name)
        return head + b"".join(parts) + tail

    def request(self, records: Iterable[LogRec]) -> bytes:
        """An ExportLogsServiceRequest: one ResourceLogs, one ScopeLogs holding ``records``."""
        record = self.record
        parts: list[bytes] = [self._scope]
        for rec in records:
            body = record(rec)
            parts.append(_T_SECOND + varint(len(body)))
            parts.append(body)
        if self._scope_tail:
            parts.append(self._scope_tail)
        scope_logs = b"".join(parts)
        resource_logs = self._resource + _field(_T_SECOND, scope_logs)
        return _field(_T_FIRST, resource_logs)


class EncodedLogs:
    """A batch already encoded (the request's bytes) and the number of records in it."""

    __slots__ = ("count", "data")

    def __init__(self, data: bytes, count: int) -> None:
        self.data = data
        self.count = count

    def __len__(self) -> int:
        return self.count
