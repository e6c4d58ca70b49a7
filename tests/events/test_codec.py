from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from spyglass.events import Event
from spyglass.events.codec import (
    decode_event,
    encode,
    encode_canonical,
    field_bytes,
    text_from_bytes,
    to_builtins,
)
from spyglass.events.jsonschema import event_schema

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "spyglass" / "schemas" / "event.schema.json"


def test_wire_names_follow_otel() -> None:
    ev = Event(type="file.read", pid=7, path="/etc/hosts", seq=1, ts=5)
    data = json.loads(encode(ev))
    # ok is omitted when true (the common case) and written only as false
    assert data == {"seq": 1, "ts": 5, "type": "file.read", "process.pid": 7, "file.path": "/etc/hosts"}
    assert json.loads(encode(Event(type="file.read", pid=7, ok=False, errno="ENOENT")))["ok"] is False


def test_roundtrip_keeps_every_field() -> None:
    ev = Event(
        type="net.connect",
        pid=1,
        seq=3,
        ts=9,
        address="127.0.0.1",
        port=80,
        domain="localhost",
        transport="tcp",
        net_type="ipv4",
        ok=False,
        errno="ECONNREFUSED",
        syscall="connect",
    )
    assert decode_event(encode(ev)) == ev


def test_canonical_form_sorts_keys() -> None:
    ev = Event(type="file.read", pid=7, path="/x", seq=1, ts=5)
    keys = list(json.loads(encode_canonical(ev)).keys())
    assert keys == sorted(keys)


def test_invalid_utf8_is_escaped_and_reversible() -> None:
    raw = b"/tmp/caf\xe9-\xff.txt"
    text, b64 = text_from_bytes(raw)
    assert text == "/tmp/caf\\xe9-\\xff.txt"
    assert b64 is not None
    ev = Event(type="file.create", pid=1, path=text, raw_bytes={"file.path": b64}, seq=1, ts=1)
    back = decode_event(encode(ev))
    assert field_bytes(back, "file.path") == raw
    assert text_from_bytes(b"/ok/\xc3\xa9") == ("/ok/é", None)


def test_committed_schema_matches_the_code() -> None:
    assert json.loads(SCHEMA_FILE.read_text()) == json.loads(json.dumps(event_schema(), sort_keys=True))


def test_schema_rejects_unknown_type_and_accepts_events() -> None:
    schema = event_schema()
    good = to_builtins(Event(type="process.exec", pid=3, seq=1, ts=1, exe="/bin/true", argv=["true"]))
    jsonschema.validate(good, schema)
    bad = dict(good)  # type: ignore[arg-type]
    bad["type"] = "file.teleport"
    try:
        jsonschema.validate(bad, schema)
    except jsonschema.ValidationError:
        pass
    else:
        raise AssertionError("an unknown event type passed the schema")


def test_event_stream_skips_seals_and_names_bad_lines_across_chunks() -> None:
    """Runs of lines are decoded at once; a bad line falls back to line by line and is named exactly."""
    import io

    from spyglass.events.codec import encode, iter_event_stream

    lines: list[bytes] = []
    for i in range(1, 30_001):  # > 1 MiB: the stream is read in several chunks
        lines.append(encode(Event(seq=i, type="file.read", pid=7, path=f"/ws/some/longer/path/file{i}.txt")))
        if i % 1000 == 0:
            lines.append(b'{"seal":{"crc32":"00000000","chain":"' + b"0" * 64 + b'"}}')
    lines[20_000] = b"{not json"
    bad: list[tuple[int, str]] = []
    evs = list(iter_event_stream(io.BytesIO(b"\n".join(lines) + b"\n"), lambda n, why: bad.append((n, why))))
    assert len(evs) == 30_000 - 1 and [n for n, _ in bad] == [20_001]
    seqs = [e.seq for e in evs]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    # a last line without its newline is read too
    tail = list(iter_event_stream(io.BytesIO(encode(Event(seq=1, type="file.read", pid=1))), lambda n, w: None))
    assert [e.seq for e in tail] == [1]
