"""Fast JSON codec for events and alerts (msgspec), plus the byte-escaping rule."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TypeVar

import msgspec

from spyglass.events.alert import Alert
from spyglass.events.schema import Event

T = TypeVar("T")

_encoder = msgspec.json.Encoder()
_sorted_encoder = msgspec.json.Encoder(order="sorted")
_event_decoder = msgspec.json.Decoder(Event)
_alert_decoder = msgspec.json.Decoder(Alert)


def encode(obj: object) -> bytes:
    """Compact JSON of an event, alert or any msgspec-encodable object."""
    return _encoder.encode(obj)


def encode_canonical(obj: object) -> bytes:
    """Canonical JSON (sorted keys, no white space): the form the hash chain hashes."""
    return _sorted_encoder.encode(obj)


def decode_event(data: bytes | str) -> Event:
    return _event_decoder.decode(data)


def decode_alert(data: bytes | str) -> Alert:
    return _alert_decoder.decode(data)


def to_builtins(obj: object) -> object:
    """Plain dict/list form with wire names (for JSON output and schema checks)."""
    return msgspec.to_builtins(obj)


#: a line of a stored events file that starts so is a block seal of the store, not an event
SEAL_PREFIX = b'{"seal":'


def record_lines(f: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of every record of a JSONL file: blank lines and the store's seal lines skipped."""
    n = 0
    rest = b""
    while True:
        chunk = f.read(1 << 20)
        if not chunk:
            break
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            n += 1
            if line and not line.startswith(SEAL_PREFIX) and not line.isspace():
                yield n, line
    if rest.strip() and not rest.startswith(SEAL_PREFIX):
        yield n + 1, rest


def _segments(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) of the runs of record lines in complete lines ``data``, seal lines left out."""
    start, end = 0, len(data)
    while start < end:
        j = data.find(SEAL_PREFIX, start)
        while j > start and data[j - 1] != 0x0A:  # a seal starts a line (quotes in strings are escaped)
            j = data.find(SEAL_PREFIX, j + 1)
        if j < 0:
            yield start, data[start:]
            return
        if j > start:
            yield start, data[start:j]
        nl = data.find(b"\n", j)
        start = end if nl < 0 else nl + 1


def iter_event_stream(f: IO[bytes], on_bad_line: Callable[[int, str], None]) -> Iterator[Event]:
    """Every event of a JSONL file (a run's ``events.jsonl``, or any), decoded a run of lines at a time;
    a line that is not an event is reported with its number (``on_bad_line``) and skipped."""
    n = 0  # lines before ``data``
    rest = b""
    while True:
        chunk = f.read(1 << 20)
        if not chunk:
            if not rest.strip():
                break
            chunk, rest = rest + b"\n", b""
        data = rest + chunk
        cut = data.rfind(b"\n") + 1
        data, rest = data[:cut], data[cut:]
        for at, seg in _segments(data):
            try:
                evs = _event_decoder.decode_lines(seg)
            except (msgspec.DecodeError, msgspec.ValidationError):
                evs = None
            if evs is not None:
                yield from evs
                continue
            base = n + data.count(b"\n", 0, at)
            for i, line in enumerate(seg.split(b"\n")[:-1], 1):
                if not line or line.isspace():
                    continue
                try:
                    yield _event_decoder.decode(line)
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    on_bad_line(base + i, str(exc))
        n += data.count(b"\n")


def iter_events(lines: Iterable[bytes]) -> Iterator[Event]:
    for line in lines:
        line = line.strip()
        if line and not line.startswith(SEAL_PREFIX):
            yield decode_event(line)


def text_from_bytes(raw: bytes) -> tuple[str, str | None]:
    """Text form of raw bytes and, if they were not valid UTF-8, their base64.

    Valid UTF-8 comes back unchanged with ``None``.  Otherwise every byte that
    does not decode is written ``\\xHH`` and the exact bytes travel beside it.
    """
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError:
        return raw.decode("utf-8", "backslashreplace"), base64.b64encode(raw).decode("ascii")


def field_bytes(event: Event, wire_name: str) -> bytes | None:
    """The exact bytes of a text field (``"file.path"``), honouring ``raw_bytes``."""
    from spyglass.events.schema import get_field

    if event.raw_bytes and wire_name in event.raw_bytes:
        return base64.b64decode(event.raw_bytes[wire_name])
    value = get_field(event, wire_name)
    return value.encode("utf-8") if isinstance(value, str) else None
