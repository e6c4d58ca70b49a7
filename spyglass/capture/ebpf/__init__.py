"""The eBPF capture backend: a CO-RE program follows the process tree from the kernel.

``EbpfBackend`` and ``EbpfSession`` load on first use, so that ``preload`` (light)
can start loading the program before the backend's modules are imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spyglass.capture.ebpf.session import EbpfBackend, EbpfSession

__all__ = ["EbpfBackend", "EbpfSession"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from spyglass.capture.ebpf import session

        return getattr(session, name)
    raise AttributeError(f"module 'spyglass.capture.ebpf' has no attribute {name!r}")
