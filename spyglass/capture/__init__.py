"""Capture backends: turn kernel facts into events.  Knows nothing of rules or stores."""

from spyglass.capture.base import (
    BackendStatus,
    CaptureBackend,
    CaptureResult,
    CaptureSession,
    LaunchSpec,
    StillRunning,
)
from spyglass.capture.replay import ReplayBackend


def get_backend(name: str) -> CaptureBackend:
    """A live backend by name (``strace``)."""
    if name == "strace":
        from spyglass.capture.strace.backend import StraceBackend

        return StraceBackend()
    from spyglass.errors import UsageError

    raise UsageError(f"unknown capture backend {name!r}", hint="available: strace")


def all_backends() -> list[CaptureBackend]:
    from spyglass.capture.strace.backend import StraceBackend

    return [StraceBackend()]


__all__ = [
    "BackendStatus",
    "CaptureBackend",
    "CaptureResult",
    "CaptureSession",
    "LaunchSpec",
    "ReplayBackend",
    "StillRunning",
    "all_backends",
    "get_backend",
]
