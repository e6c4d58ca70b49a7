"""What spyglass runs besides its own package, at the end of a run (spyglass.witness.guard): the
modules it has loaded (click, msgspec, the standard library) and the places a Python start reads.

A byte-code file of ``click`` forged with its source's size and time, a changed extension of
msgspec, a ``.pth`` file put in ``site-packages`` or a ``click.py`` put on the import path ahead
of the real one runs in the next spyglass as surely as a change to spyglass's own source: with
pyenv or a virtual environment all of them are the user's files, in the agent's reach.

What the check finds, by status change time (which no process can set; a root agent that sets
the clock back is not caught here):

* ``bytecode``: the cached byte-code of a loaded module (``__cached__``) changed since the start
  and not what Python makes of the source as it is (its header and its code compiled again):
  removed (Python writes it again from the source at the next import) and listed, no alert;
* ``changed``: a loaded module's own file (source or extension) changed since, or its
  ``__pycache__`` replaced by something other than a directory;
* ``shadowing``: a name made during the run in a directory of the import path that the next
  spyglass would import: a loaded top-level module's name (``click.py``, ``click/``, a
  ``click.*.so``, a sourceless ``click.pyc``), ``sitecustomize`` or ``usercustomize``, or a
  ``.pth`` file in a site directory (its ``import`` lines run at every start).

Only modules loaded by this spyglass process are looked at (those another command imports, such
as the report's jinja2, are not); the directories of the import path are walked only when their
own status change time says an entry came or went during the run.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import marshal
import os
import site
import stat
import sys
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType

import msgspec

from spyglass.witness.bytecode import unlink_in

#: names Python imports at every start when the import path holds them
START_HOOKS = frozenset({"sitecustomize", "usercustomize"})
#: entries looked at in one directory of the import path at most
MAX_ENTRIES = 20_000


class ImportsReport(msgspec.Struct):
    """What the check found (paths); ``failed``: byte-code it could not remove, with why."""

    bytecode: list[str] = []
    changed: list[str] = []
    shadowing: list[str] = []
    failed: list[str] = []

    def alarming(self) -> list[str]:
        return [*self.changed, *self.shadowing]


def site_dirs() -> list[str]:
    """The site directories whose ``.pth`` files a Python start reads."""
    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return dirs


def check(started: float, skip: Callable[[str], bool], *, modules: Mapping[str, ModuleType] | None = None,
          path: Iterable[str] | None = None, sites: Iterable[str] | None = None,
          remove: bool = True) -> ImportsReport:
    """What changed since ``started`` among the loaded ``modules`` (default: this process's) and in
    the directories of the import ``path`` (default ``sys.path``) and ``sites``; a file for which
    ``skip`` is true is left out (spyglass's own package, the places the run may write)."""
    mods = dict(sys.modules if modules is None else modules)
    report = ImportsReport()
    tops: set[str] = set(START_HOOKS)
    loaded: set[str] = set()  # the modules' own files (changed: said so once)
    for name, mod in mods.items():
        tops.add(name.partition(".")[0])
        source = getattr(mod, "__file__", None)
        if not isinstance(source, str) or not os.path.isabs(source) or skip(source):
            continue
        loaded.add(os.path.normpath(source))
        if _newer(source, started):
            report.changed.append(source)
        cached = getattr(mod, "__cached__", None)
        if isinstance(cached, str) and os.path.isabs(cached):
            _check_cached(cached, source, started, report, remove)
    site_set = {os.path.normpath(d) for d in (site_dirs() if sites is None else sites)}
    dirs = [*(sys.path if path is None else path), *site_set]
    for d in dict.fromkeys(os.path.normpath(p) for p in dirs if p and os.path.isabs(p)):
        if skip(d + "/") or not _newer(d, started):
            continue  # no entry came or went there during the run
        try:
            with os.scandir(d) as it:
                entries = [e.name for _, e in zip(range(MAX_ENTRIES), it, strict=False)]
        except OSError:
            continue
        for entry in entries:
            full = os.path.join(d, entry)
            if full not in loaded and _newer(full, started) and ((d in site_set and entry.endswith(".pth"))
                                          or _module_name(entry, full) in tops):
                report.shadowing.append(full)
    return report


def _check_cached(cached: str, source: str, started: float, report: ImportsReport, remove: bool) -> None:
    """A loaded module's byte-code: its ``__pycache__`` must still be a directory; a file there
    changed since the start goes unless it is what Python makes of the source as it is."""
    where = os.path.dirname(cached)
    try:
        st = os.lstat(where)
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode):
        report.changed.append(where)
        return
    if not _newer(cached, started) or _genuine(cached, source):
        return
    report.bytecode.append(cached)
    if not remove:
        return
    try:
        unlink_in(os.path.realpath(where), os.path.basename(cached))
    except FileNotFoundError:
        pass
    except OSError as exc:
        report.failed.append(f"{cached}: {exc.strerror or exc}")


def _genuine(cached: str, source: str) -> bool:
    """Whether a byte-code file is what importing ``source`` writes: a timestamp header that
    matches the source's time and size, and the code compiled from it now.  Spyglass writes the
    byte-code of a module it imports for the first time during the run: that stays (were it
    removed, every run would compile it again); a forged one does not."""
    if not source.endswith(".py"):
        return False
    try:
        with open(cached, "rb") as f:
            data = f.read()
        with open(source, "rb") as f:
            text = f.read()
        st = os.stat(source)
    except OSError:
        return False
    if len(data) < 16 or data[:4] != importlib.util.MAGIC_NUMBER or int.from_bytes(data[4:8], "little") != 0:
        return False  # not a timestamp-checked file of this Python
    if (int.from_bytes(data[8:12], "little") != int(st.st_mtime) & 0xFFFFFFFF
            or int.from_bytes(data[12:16], "little") != st.st_size & 0xFFFFFFFF):
        return False
    try:
        return bool(marshal.loads(data[16:]) == compile(text, source, "exec", dont_inherit=True))
    except (ValueError, TypeError, EOFError, SyntaxError):
        return False


_SUFFIXES = (*importlib.machinery.SOURCE_SUFFIXES, *importlib.machinery.BYTECODE_SUFFIXES,
             *importlib.machinery.EXTENSION_SUFFIXES)


def _module_name(entry: str, full: str) -> str | None:
    """The module an entry of an import directory would be imported as: ``click.py``,
    ``click.pyc`` (sourceless), ``click.cpython-311-x86_64-linux-gnu.so`` and a directory
    ``click`` holding an ``__init__`` are ``click``; anything else none."""
    for suffix in _SUFFIXES:
        if entry.endswith(suffix) and len(entry) > len(suffix):
            return entry[: -len(suffix)]
    if "." not in entry and any(os.path.isfile(os.path.join(full, "__init__" + s)) for s in _SUFFIXES):
        return entry
    return None


def _newer(path: str, started: float) -> bool:
    """Changed at or after ``started`` (the same tick of the kernel's coarse clock counts: the agent
    may write within it; what spyglass itself writes then is byte-code, removed harmlessly)."""
    try:
        return os.lstat(path).st_ctime >= started
    except OSError:
        return False
