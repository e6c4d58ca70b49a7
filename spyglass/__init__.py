"""spyglass: watch AI agents from the operating-system boundary.

The curated public API; everything else is internal.  Imports are lazy so that
``import spyglass`` costs nothing.
"""

from __future__ import annotations

import os as _os
import sys as _sys


def _run_as_module() -> bool:
    """Whether this is ``python -m spyglass`` (the package imported to run its ``__main__``)."""
    if _sys.argv[:1] != ["-m"]:
        return False
    argv: list[str] = [str(a) for a in getattr(_sys, "orig_argv", [])]
    for i, arg in enumerate(argv):
        name = argv[i + 1] if arg == "-m" and i + 1 < len(argv) else arg[2:] if arg.startswith("-m") else None
        if name is not None:
            return name.partition(".")[0] == "spyglass"
    return False


# ``python -m spyglass`` puts the working directory, often the agent's workspace, first on the import
# path: a ``json/`` or ``typing.py`` the agent made there would be what spyglass imports next.  It is
# taken off before spyglass imports anything (its own modules are found through the package).
#: that directory (None when it was not on the path): the next ``python -m spyglass`` started there
#: imports a ``spyglass`` made there before any of this runs (the end of a run looks: witness/imports.py)
CWD_OFF_PATH: str | None = None
if _run_as_module() and _sys.path and _sys.path[0] and _os.path.abspath(_sys.path[0]) == _os.getcwd():
    CWD_OFF_PATH = _os.getcwd()
    del _sys.path[0]

from typing import TYPE_CHECKING, Any  # noqa: E402


class _LeanMsgspec:
    """msgspec (pinned in constraints.txt) imports ``typing_extensions`` only for ``get_type_hints``,
    ``Required`` and ``NotRequired``, falling back to :mod:`typing`'s when it cannot; on Python 3.11
    they are the same.  ``typing_extensions`` loads ``inspect``, ``ast``, ``dis`` and ``tokenize``:
    5-10 ms of every ``spyglass run`` (benchmarks/bench_startup.py).  This finder refuses it to
    msgspec's ``_utils`` while that module runs its imports, and only then: twice at most (its two
    imports; a later msgspec made otherwise is refused no more than that), so anything else that asks
    for it later gets it."""

    refused = 0

    @classmethod
    def find_spec(cls, name: str, path: object = None, target: object = None) -> None:
        if name == "typing_extensions":
            utils = _sys.modules.get("msgspec._utils")
            if utils is not None and not hasattr(utils, "get_type_hints") and cls.refused < 2:  # importing
                cls.refused += 1
                raise ModuleNotFoundError("typing_extensions: typing's own is used", name=name)
        return None  # (it stays in ``sys.meta_path``: removed while the import system walks the list,
        # the finder after it would be skipped for that import)


if "msgspec" not in _sys.modules and _sys.version_info >= (3, 11):
    _sys.meta_path.insert(0, _LeanMsgspec)

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
