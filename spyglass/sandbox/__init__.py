"""Containment: bubblewrap sandbox, decoy home, egress proxy, enforcement.

``prepare()`` builds everything a sandboxed run needs and returns a
:class:`~spyglass.sandbox.prepared.PreparedSandbox`.  Imports are lazy: the
CLI loads this package only when a sandbox is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spyglass.sandbox.build import from_policy, prepare
    from spyglass.sandbox.doctor import sandbox_checks
    from spyglass.sandbox.prepared import PreparedSandbox

__all__ = ["PreparedSandbox", "from_policy", "prepare", "sandbox_checks"]

_LAZY = {
    "prepare": "spyglass.sandbox.build",
    "from_policy": "spyglass.sandbox.build",
    "PreparedSandbox": "spyglass.sandbox.prepared",
    "sandbox_checks": "spyglass.sandbox.doctor",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'spyglass.sandbox' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(mod), name)
