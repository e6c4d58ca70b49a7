"""Start-up phase marks: where a ``spyglass run`` spends its time before and after the agent.

Off unless ``SPYGLASS_PHASES`` names a file; then every :func:`mark` notes the wall
clock (``time.time()``, so a parent process can compare it with its own clock) and
the marks are appended to that file as one JSON line when the process exits.
``benchmarks/bench_startup.py`` reads them.  When off, a mark is one global lookup
and one test.
"""

from __future__ import annotations

import os
import time

_FILE = os.environ.get("SPYGLASS_PHASES") or None
_MARKS: list[tuple[str, float]] = []


def mark(name: str) -> None:
    """Note that the phase ``name`` ends now (nothing when phase marks are off)."""
    if _FILE is None:
        return
    if not _MARKS:
        import atexit

        atexit.register(_write)
    _MARKS.append((name, time.time()))


def enabled() -> bool:
    return _FILE is not None


def _write() -> None:
    import json

    assert _FILE is not None
    _MARKS.append(("exit", time.time()))
    try:
        with open(_FILE, "a", encoding="utf-8") as f:
            f.write(json.dumps({"pid": os.getpid(), "marks": _MARKS}) + "\n")
    except OSError:
        pass


mark("interpreter")  # the first import of this module ends the interpreter's own start-up
