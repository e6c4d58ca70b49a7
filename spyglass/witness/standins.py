"""Modules spyglass did not load, as an import would find them: the end-of-run check of what spyglass
runs (:mod:`spyglass.witness.imports`) looks at them as if loaded (``imports.LIBRARIES``)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Iterable
from types import ModuleType

#: entries looked at in one directory of the import path at most
MAX_ENTRIES = 20_000


def stand_ins(names: Iterable[str], path: Iterable[str] | None = None,
              started: float | None = None) -> dict[str, ModuleType]:
    """Modules that are not loaded, as the import ``path`` (default ``sys.path``) would load them
    (found, not run): each of ``names`` that is a Python source module, or a package of them and
    every source module in its directory, with the ``__file__``, ``__cached__`` and ``__path__``
    an import gives.  A module of one file made since ``started`` (it and its directory changed
    since) with another of its name later on the path is left out: one put ahead, which the scan
    of that directory reports as such; one changed in place stays (its directory unchanged, the
    scan does not look there)."""
    out: dict[str, ModuleType] = {}
    search = list(sys.path if path is None else path)
    for name in names:
        spec = importlib.machinery.PathFinder.find_spec(name, search)
        if spec is None or not isinstance(spec.origin, str) or not spec.origin.endswith(".py"):
            continue
        locations = spec.submodule_search_locations
        if not locations:  # a module of one file
            if started is not None and _made_there(spec.origin, started) and _found_later(name, spec.origin, search):
                continue
            mod = ModuleType(name)
            mod.__file__ = spec.origin
            setattr(mod, "__cached__", importlib.util.cache_from_source(spec.origin))  # noqa: B010 (not typed)
            out[name] = mod
            continue
        pkg = ModuleType(name)
        pkg.__file__, pkg.__path__ = spec.origin, list(locations)
        setattr(pkg, "__cached__", importlib.util.cache_from_source(spec.origin))  # noqa: B010 (not typed)
        out[name] = pkg
        for d in pkg.__path__:
            try:
                entries = sorted(os.listdir(d))[:MAX_ENTRIES]
            except OSError:
                continue
            for entry in entries:
                if entry.endswith(".py") and entry != "__init__.py" and entry[:-3].isidentifier():
                    mod = ModuleType(f"{name}.{entry[:-3]}")
                    mod.__file__ = os.path.join(d, entry)
                    setattr(mod, "__cached__", importlib.util.cache_from_source(mod.__file__))  # noqa: B010
                    out.setdefault(mod.__name__, mod)
    return out


def _made_there(path: str, started: float) -> bool:
    """``path`` and its directory (through a symlink: the link's time too) changed since ``started``."""
    d = os.path.dirname(path)
    try:
        return newer(path, started) and max(os.stat(d).st_ctime, os.lstat(d).st_ctime) >= started
    except OSError:
        return False


def _found_later(name: str, origin: str, search: list[str]) -> bool:
    """Whether a module ``name`` is on the ``search`` path after the directory of ``origin``."""
    where = os.path.normpath(os.path.dirname(origin))
    for i, d in enumerate(search):
        if d and os.path.normpath(d) == where:
            try:
                return importlib.machinery.PathFinder.find_spec(name, search[i + 1:]) is not None
            except (ImportError, ValueError, OSError):
                return False
    return False


def newer(path: str, started: float) -> bool:
    """Changed at or after ``started`` (the same tick of the kernel's coarse clock counts: the agent
    may write within it; what spyglass itself writes then is byte-code, removed harmlessly)."""
    try:
        return os.lstat(path).st_ctime >= started
    except OSError:
        return False
