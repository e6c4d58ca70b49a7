"""Event fields both capture backends fill the same way: file text, path fields, open kinds.

Kept apart from the strace parser so the eBPF backend does not import it (its
module-level regular expressions and tables are start-up time a run under eBPF
never uses).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spyglass.events.codec import text_from_bytes


def to_text(value: str, wire: str, raw: dict[str, str] | None) -> tuple[str, dict[str, str] | None]:
    """Event text for an fs string; bytes that are not UTF-8 go to ``raw[wire]`` as base64."""
    if value.isascii():
        return value, raw
    try:
        value.encode("utf-8")
        return value, raw
    except UnicodeEncodeError:
        text, b64 = text_from_bytes(value.encode("utf-8", "surrogateescape"))
        if b64 is not None:
            raw = dict(raw) if raw else {}
            raw[wire] = b64
        return text, raw


def path_fields(path: str, raw: str | None = None, target: str | None = None) -> dict[str, Any]:
    """``path``/``raw_path``/``target`` event fields, with exact bytes where they are not UTF-8."""
    out: dict[str, Any] = {}
    rb: dict[str, str] | None = None
    out["path"], rb = to_text(path, "file.path", rb)
    if raw is not None and raw != path:
        out["raw_path"], rb = to_text(raw, "file.raw_path", rb)
    if target is not None:
        out["target"], rb = to_text(target, "file.target", rb)
    if rb:
        out["raw_bytes"] = rb
    return out


def open_kind(flags: str) -> str | None:
    """The event type an open with these flags stands for; None for ``O_PATH`` (no data access).

    ``O_CREAT`` gives ``file.create``.  Without ``O_EXCL`` that also covers an
    existing file opened for writing (the kernel does not say which it was).
    ``O_WRONLY``/``O_RDWR`` (or ``O_TRUNC``) without ``O_CREAT`` give
    ``file.write``; everything else is ``file.read``.
    """
    if "O_PATH" in flags:
        return None
    if "O_CREAT" in flags or "O_TMPFILE" in flags:
        return "file.create"
    if "O_WRONLY" in flags or "O_RDWR" in flags or "O_TRUNC" in flags:
        return "file.write"
    return "file.read"


def group_kill(target: int, pid: int, pgid_of: Callable[[int], int | None] | None) -> tuple[str, int | None]:
    """``kill(0, ...)`` or ``kill(-PGID, ...)`` by ``pid``: a whole process group, which may hold
    spyglass or its tracer.  The words naming the group, and the target to record (``-PGID``; None
    where the caller's own group is not known)."""
    pgid: int | None = -target
    if target == 0:
        try:
            pgid = pgid_of(pid) if pgid_of is not None else None
        except Exception:  # a host callback must never break decoding
            pgid = None
    where = f"process group {pgid}" if pgid is not None else "its own process group"
    return where, -pgid if pgid is not None else None
