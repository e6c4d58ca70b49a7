"""Masking secrets in chunked terminal streams and the asciicast file format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spyglass.tty import CastWriter, Redactor, read_cast
from spyglass.tty.redact import MASK
from spyglass.tty.view import lines, plain

SECRET = "s3cr3t-value-0123456789"


def _feed_all(red: Redactor, chunks: list[str]) -> str:
    return "".join(red.feed(c) for c in chunks) + red.flush()


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 11, 64, 1000])
def test_a_secret_split_across_chunks_is_masked(size: int) -> None:
    text = f"before {SECRET} middle {SECRET}\nafter\n" * 3
    chunks = [text[i:i + size] for i in range(0, len(text), size)]
    out = _feed_all(Redactor([SECRET], hold=16), chunks)
    assert SECRET not in out
    assert out == text.replace(SECRET, MASK)


def test_builtin_and_policy_patterns() -> None:
    token = "ghp_" + "a" * 36
    red = Redactor(patterns=[r"password=\S+"])
    out = _feed_all(red, [f"tok {token} ", "password=hunter2 ", "-----BEGIN OPENSSH PRIVATE KEY-----\n", "ok"])
    assert token not in out and "hunter2" not in out and "BEGIN OPENSSH PRIVATE KEY" not in out
    assert out.count(MASK) == 3 and out.endswith("ok")
    # nothing to mask: text passes through whole (held back until flushed)
    assert _feed_all(Redactor(builtin=False), ["plain ", "text"]) == "plain text"


def test_cast_writer_bounds_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "t.cast"
    w = CastWriter(path, width=100, height=30, redactor=Redactor([SECRET]), max_bytes=600)
    w.output(f"hello {SECRET}\r\n".encode())
    w.input(b"yes\r")
    w.idle()
    for _ in range(50):
        w.output(b"x" * 40 + b"\r\n")
        w.idle()
    w.close()
    header, events = read_cast(path)
    assert header["version"] == 2 and header["width"] == 100 and header["height"] == 30
    assert events[0].code == "o" and MASK in events[0].data and SECRET not in path.read_text()
    assert any(e.code == "i" and e.data == "yes\r" for e in events)
    assert events[-1].code == "m" and "cut" in events[-1].data and w.cut
    times = [e.t for e in events]
    assert times == sorted(times)
    assert path.stat().st_size <= 600 + 100  # the cut marker may pass the limit by one line


def test_bad_cast_lines_are_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.cast"
    path.write_text(json.dumps({"version": 2, "width": 80, "height": 24}) + "\n[0.1, \"o\", \"a\"]\n{oops\n")
    with pytest.raises(ValueError, match=r"bad.cast:3: not JSON"):
        read_cast(path)


def test_view_lines_strip_escapes_and_tell_who(tmp_path: Path) -> None:
    path = tmp_path / "v.cast"
    w = CastWriter(path, redactor=Redactor(builtin=False, hold=0))
    w.output(b"\x1b[31mred\x1b[0m line\r\nprogress 10%\rprogress 100%\r\n")
    w.input(b"ls\r")
    w.output(b"\x1b]0;title\x07tail")
    w.close()
    got = [(r.who, r.text) for r in lines(path)]
    assert got == [("agent", "red line"), ("agent", "progress 100%"), ("operator", "ls⏎"), ("agent", "tail")]
    assert plain("bell\x07 and esc\x1b") == "bell\\x07 and esc\\x1b"
