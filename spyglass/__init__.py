"""spyglass: watch AI agents from the operating-system boundary.

The curated public API; everything else is internal.  Imports are lazy so that
``import spyglass`` costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from spyglass.api import open_run, run
    from spyglass.events import Alert, Event
    from spyglass.store import RunMeta, RunReader, Store

__all__ = ["Alert", "Event", "RunMeta", "RunReader", "Store", "__version__", "open_run", "run"]

_LAZY = {
    "run": "spyglass.api",
    "open_run": "spyglass.api",
    "Alert": "spyglass.events",
    "Event": "spyglass.events",
    "RunMeta": "spyglass.store",
    "RunReader": "spyglass.store",
    "Store": "spyglass.store",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'spyglass' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(mod), name)
