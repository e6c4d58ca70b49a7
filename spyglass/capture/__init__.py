"""Capture backends: turn kernel facts into events.  Knows nothing of rules or stores.

The names below load on first use (PEP 562), so that a run can start loading the
eBPF program (``spyglass.capture.ebpf.preload``) before the event model is imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spyglass.capture.base import (
        BackendStatus,
        CaptureBackend,
        CaptureResult,
        CaptureSession,
        LaunchSpec,
        StillRunning,
    )
    from spyglass.capture.replay import ReplayBackend

_LAZY = {
    "BackendStatus": "base", "CaptureBackend": "base", "CaptureResult": "base", "CaptureSession": "base",
    "LaunchSpec": "base", "StillRunning": "base", "ReplayBackend": "replay",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'spyglass.capture' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"spyglass.capture.{module}"), name)
    globals()[name] = value
    return value


BACKEND_NAMES = ("auto", "ebpf", "strace")


def get_backend(name: str) -> CaptureBackend:
    """A live backend by name (``auto``, ``ebpf``, ``strace``)."""
    return select_backend(name)[0]


def select_backend(name: str, *, preload: bool = True) -> tuple[CaptureBackend, str]:
    """The backend for ``--backend NAME`` and why it was chosen (recorded in the run).

    ``auto`` picks eBPF when it can run here (privileged, kernel BTF, program built) and
    strace otherwise; it falls back to strace if the kernel then refuses the program.
    With ``preload`` the eBPF program starts loading now, in a thread (a run is coming).
    """
    if name == "strace":
        from spyglass.capture.strace.backend import StraceBackend

        return StraceBackend(), "requested: strace"
    if preload and name in ("ebpf", "auto"):
        from spyglass.capture.ebpf import preload as ebpf_preload

        ebpf_preload.start()  # before the backend's modules are imported: the load overlaps them
    if name == "ebpf":
        from spyglass.capture.ebpf import EbpfBackend

        backend = EbpfBackend()
        if preload:
            backend.preload()
        return backend, "requested: ebpf"
    if name == "auto":
        from spyglass.capture.auto import AutoBackend

        auto = AutoBackend(preload=preload)
        return auto, auto.reason
    from spyglass.errors import UsageError

    raise UsageError(f"unknown capture backend {name!r}", hint="available: " + ", ".join(BACKEND_NAMES))


def all_backends() -> list[CaptureBackend]:
    from spyglass.capture.ebpf import EbpfBackend
    from spyglass.capture.strace.backend import StraceBackend

    return [EbpfBackend(), StraceBackend()]


__all__ = [
    "BACKEND_NAMES",
    "BackendStatus",
    "CaptureBackend",
    "CaptureResult",
    "CaptureSession",
    "LaunchSpec",
    "ReplayBackend",
    "StillRunning",
    "all_backends",
    "get_backend",
    "select_backend",
]
