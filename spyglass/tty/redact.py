"""Masking secrets in a stream that arrives in arbitrary chunks.

A secret split across two reads must still be masked, so the redactor holds
back the last ``hold`` characters of what it has seen until more arrives (or
the stream ends).  Literal secrets (values the broker hands out, the run's
canary) and regular expressions (the policy's redaction patterns) are both
masked with ``MASK``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "«redacted»"

#: patterns masked in every recording: private key blocks and common token shapes
BUILTIN_PATTERNS: tuple[str, ...] = (
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    r"\bgh[pousr]_[A-Za-z0-9]{36,}\b",
    r"\bsk-[A-Za-z0-9_-]{20,}\b",
    r"\bAKIA[0-9A-Z]{16}\b",
    r"\bxox[abpr]-[A-Za-z0-9-]{10,}\b",
)


class Redactor:
    def __init__(self, literals: Iterable[str] = (), patterns: Iterable[str] = (), *, builtin: bool = True,
                 hold: int = 256) -> None:
        self.literals = sorted({s for s in literals if s}, key=len, reverse=True)
        pats = [*(BUILTIN_PATTERNS if builtin else ()), *patterns]
        parts = [re.escape(s) for s in self.literals] + [f"(?:{p})" for p in pats]
        self._re = re.compile("|".join(parts)) if parts else None
        longest = max((len(s) for s in self.literals), default=0)
        self.hold = max(hold, longest)
        self._pending = ""

    def mask(self, text: str) -> str:
        """Mask a complete text (no hold-back)."""
        return self._re.sub(MASK, text) if self._re is not None else text

    def feed(self, chunk: str) -> str:
        """Masked text that is safe to write now; the raw tail waits for the next chunk."""
        if self._re is None:
            return chunk
        buf = self._pending + chunk
        if len(buf) <= self.hold:
            self._pending = buf
            return ""
        cut = len(buf) - self.hold
        for m in self._re.finditer(buf):  # a match across the cut is written (masked) whole
            if m.start() < cut < m.end():
                cut = m.end()
                break
        head, self._pending = buf[:cut], buf[cut:]
        return self._re.sub(MASK, head)

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def flush(self) -> str:
        out, self._pending = self.mask(self._pending), ""
        return out
