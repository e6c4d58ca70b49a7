"""The recorded terminal as lines a person reads: for ``spyglass terminal``, ``show`` and the HTML report."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from spyglass.tty.cast import read_cast

# CSI/OSC and other escape sequences, then the C0 controls left over (tab and newline stay)
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

CAST_FILE = "terminal.cast"


class TermLine(msgspec.Struct, frozen=True):
    t: float  # seconds since the recording started
    who: str  # "agent" (output) or "operator" (typed input)
    text: str


def plain(text: str) -> str:
    """Escape sequences removed; a carriage return keeps what was written after it (as a terminal shows)."""
    text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.rsplit("\r", 1)[-1] if not text.endswith("\r") else text.rstrip("\r").rsplit("\r", 1)[-1]
    return _CTRL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def lines(path: Path) -> list[TermLine]:
    """Output split into lines at their first byte's time; each typed chunk is one operator line."""
    _, events = read_cast(path)
    out: list[TermLine] = []
    partial = ""
    partial_t: float | None = None
    for ev in events:
        if ev.code == "i":
            out.append(TermLine(ev.t, "operator", plain(ev.data.replace("\r", "⏎").replace("\n", "⏎"))))
            continue
        if ev.code != "o":
            continue
        for piece in ev.data.splitlines(keepends=True):
            if partial_t is None:
                partial_t = ev.t
            partial += piece
            if piece.endswith(("\n", "\r\n")):
                out.append(TermLine(partial_t, "agent", plain(partial.rstrip("\r\n"))))
                partial, partial_t = "", None
    if partial and partial_t is not None:
        out.append(TermLine(partial_t, "agent", plain(partial)))
    return out


def cast_path(run_dir: Path) -> Path | None:
    p = run_dir / "evidence" / CAST_FILE
    return p if p.is_file() else None
