"""The strace capture backend: a pure line parser and a thin process runner around it.

``StraceBackend``, ``StraceSession`` and ``StraceParser`` load on first use: the eBPF
backend shares the decoding helpers of this package, not its parser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spyglass.capture.strace.backend import StraceBackend
    from spyglass.capture.strace.parser import StraceParser
    from spyglass.capture.strace.session import StraceSession

__all__ = ["StraceBackend", "StraceParser", "StraceSession"]
_WHERE = {"StraceBackend": "backend", "StraceSession": "session", "StraceParser": "parser"}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'spyglass.capture.strace' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"spyglass.capture.strace.{where}"), name)
