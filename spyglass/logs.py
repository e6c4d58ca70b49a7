"""Loggers that import :mod:`logging` at their first record, not at start-up.

``logging`` (with ``traceback``, ``linecache``, ``tokenize`` and ``string``) costs a few ms
of every ``spyglass run``'s start, and a run that goes well logs nothing.  :func:`get_logger`
returns a stand-in for ``logging.getLogger(name)`` that loads it when it is first used;
:func:`configure` is ``logging.basicConfig``: applied at once when ``logging`` is loaded
already, else by :func:`load`, which every stand-in calls first (so the CLI's format and
level hold for every record, spyglass's and that of a library it lets log).  Imports
nothing of spyglass: any layer may use it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import logging
    from types import ModuleType

#: the levels of :mod:`logging` (the same numbers)
DEBUG, INFO, WARNING = 10, 20, 30

_pending: dict[str, Any] | None = None


def configure(**kwargs: Any) -> None:
    """``logging.basicConfig(**kwargs)``, now if ``logging`` is loaded, else when it is (:func:`load`)."""
    global _pending
    loaded = sys.modules.get("logging")
    if loaded is not None:
        _pending = None
        loaded.basicConfig(**kwargs)
    else:
        _pending = kwargs


def load() -> ModuleType:
    """:mod:`logging`, configured as :func:`configure` asked."""
    global _pending
    import logging

    if _pending is not None:
        kwargs, _pending = _pending, None
        logging.basicConfig(**kwargs)
    return logging


class Logger:
    """``logging.getLogger(name)``, loaded at its first use."""

    __slots__ = ("_real", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._real: logging.Logger | None = None

    def _off(self, level: int) -> bool:
        """Whether a record at ``level`` would be dropped, told without loading :mod:`logging`: while it
        is not loaded, nothing but :func:`configure` can have set a level (the root's, WARNING unless set)."""
        want = (_pending or {}).get("level", WARNING)
        return "logging" not in sys.modules and isinstance(want, int) and level < want

    def _get(self) -> logging.Logger:
        real = self._real
        if real is None:
            real = self._real = load().getLogger(self.name)
        return real

    def debug(self, msg: object, *args: object, **kwargs: Any) -> None:
        if not self._off(DEBUG):
            self._get().debug(msg, *args, **kwargs)

    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        if not self._off(INFO):
            self._get().info(msg, *args, **kwargs)

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        if not self._off(WARNING):
            self._get().warning(msg, *args, **kwargs)

    def error(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._get().error(msg, *args, **kwargs)

    def exception(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._get().exception(msg, *args, **kwargs)

    def isEnabledFor(self, level: int) -> bool:
        return self._get().isEnabledFor(level)


def get_logger(name: str) -> Logger:
    """The logger ``name`` (``logging.getLogger(name)`` once something is logged)."""
    return Logger(name)
