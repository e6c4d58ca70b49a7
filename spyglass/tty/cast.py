"""asciicast v2: a JSON header line, then one ``[seconds, code, data]`` line per event.

Codes used: ``o`` what the agent's processes wrote to the terminal, ``i`` what
the operator typed (relayed by spyglass from its own terminal), ``r`` a
resize (``"COLSxROWS"``), ``m`` a marker (spyglass notes: the recording was
cut at its size limit).  Any asciicast v2 player (asciinema) plays the file.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import IO, Any

import msgspec

from spyglass.tty.redact import Redactor


class CastEvent(msgspec.Struct, frozen=True):
    t: float  # seconds since the recording started
    code: str  # o, i, r, m
    data: str


class CastWriter:
    """Appends events to an asciicast file, masking secrets and bounding the size.

    Thread-safe: the output and input relays write from their own threads.
    """

    def __init__(self, path: Path, *, width: int = 80, height: int = 24, redactor: Redactor | None = None,
                 max_bytes: int = 64 * 1024 * 1024, env: dict[str, str] | None = None,
                 start_ns: int | None = None) -> None:
        self.path = path
        self.start_ns = start_ns or time.time_ns()
        self._mono0 = time.monotonic()
        self.max_bytes = max_bytes
        self.bytes = 0
        self.cut = False
        self.counts = {"o": 0, "i": 0}
        self._last_t = 0.0
        self._arrived: dict[str, float | None] = {"o": None, "i": None}  # oldest data the redactor holds
        self._lock = threading.Lock()
        self._red = {"o": redactor or Redactor(), "i": Redactor(redactor.literals if redactor else ())}
        if redactor is not None:
            self._red["i"] = Redactor(redactor.literals, (), builtin=True)
        self._f: IO[str] | None = path.open("w", encoding="utf-8")
        header: dict[str, Any] = {"version": 2, "width": width, "height": height,
                                  "timestamp": self.start_ns // 1_000_000_000}
        if env:
            header["env"] = env
        self._line(json.dumps(header, ensure_ascii=False))

    def _now(self) -> float:
        return round(time.monotonic() - self._mono0, 6)

    def _line(self, text: str) -> None:
        if self._f is None:
            return
        data = text + "\n"
        self._f.write(data)
        self.bytes += len(data.encode("utf-8", "surrogateescape"))

    def _event(self, code: str, data: str, t: float | None = None) -> None:
        if not data or self._f is None:
            return
        if self.cut:
            return
        # players want times in order: held-back text keeps its arrival time unless that would go backwards
        t = max(self._now() if t is None else t, self._last_t)
        self._last_t = t
        line = json.dumps([t, code, data], ensure_ascii=False)
        if self.bytes + len(line) + 1 > self.max_bytes:
            self.cut = True
            self._line(json.dumps([self._now(), "m", f"recording cut at {self.max_bytes} bytes"]))
            return
        self._line(line)
        if code in self.counts:
            self.counts[code] += len(data)

    def output(self, data: bytes) -> None:
        self._stream("o", data)

    def input(self, data: bytes) -> None:
        self._stream("i", data)

    def _stream(self, code: str, data: bytes) -> None:
        with self._lock:
            now = self._now()
            arrived = self._arrived[code]
            out = self._red[code].feed(data.decode("utf-8", "replace"))
            if out:
                self._event(code, out, arrived if arrived is not None else now)
            self._arrived[code] = (now if out else (arrived if arrived is not None else now)) \
                if self._red[code].pending else None

    def _flush(self, code: str) -> None:
        out = self._red[code].flush()
        if out:
            self._event(code, out, self._arrived[code])
        self._arrived[code] = None

    def idle(self) -> None:
        """Nothing arrived for a while: write what the redactor holds back."""
        with self._lock:
            for code in self._red:
                self._flush(code)

    def resize(self, cols: int, rows: int) -> None:
        with self._lock:
            self._event("r", f"{cols}x{rows}")

    def close(self) -> None:
        with self._lock:
            for code in self._red:
                self._flush(code)
            if self._f is not None:
                self._f.close()
                self._f = None

    @property
    def duration(self) -> float:
        return self._now()


def read_cast(path: Path) -> tuple[dict[str, Any], list[CastEvent]]:
    """The header and events of an asciicast v2 file; a bad line raises ``ValueError`` naming it."""
    header: dict[str, Any] = {}
    events: list[CastEvent] = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not JSON: {exc.msg}") from None
            if n == 1:
                if not isinstance(obj, dict) or obj.get("version") != 2:
                    raise ValueError(f"{path}:1: not an asciicast v2 header")
                header = obj
                continue
            if not (isinstance(obj, list) and len(obj) == 3 and isinstance(obj[0], int | float)):
                raise ValueError(f"{path}:{n}: not an asciicast event [time, code, data]")
            events.append(CastEvent(float(obj[0]), str(obj[1]), str(obj[2])))
    return header, events
