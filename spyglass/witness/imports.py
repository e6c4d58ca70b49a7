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

And around them: the byte-code of every module in a loaded package's directory (another command
imports more of it), a new module put ahead of any of the same name (in a package, or a later
directory of the path), a directory of the path through a symlink, a zip archive at an entry, a
``.pth`` file changed in place and the directories ``.pth`` files name, the working directory
that ``python -m`` puts first, the interpreter (:func:`interpreter`), and the modules' files the
run's events show written below the import path (a module no spyglass loaded).  A module no
spyglass loaded, changed by a write the events did not show, is not found; the directories of
the import path are walked only when their own status change time says an entry came or went
during the run.
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
from types import CodeType, ModuleType

import msgspec

import spyglass
from spyglass.witness.bytecode import unlink_in
from spyglass.witness.realdirs import real_dir
from spyglass.witness.standins import MAX_ENTRIES as MAX_ENTRIES  # (re-exported: endofrun, tests)
from spyglass.witness.standins import newer as _newer
from spyglass.witness.standins import stand_ins as stand_ins

#: names Python imports at every start when the import path holds them
START_HOOKS = frozenset({"sitecustomize", "usercustomize"})
#: libraries the other commands load and ``spyglass run`` may not (a plain command line is parsed
#: without click: spyglass/cli/direct.py; msgspec is loaded without ``typing_extensions`` and what it
#: imports: spyglass/__init__.py), and those a run imports only after its agent has ended (``difflib``
#: and ``heapq``, for a diff of the workspace: this check comes before, so their byte-code forged by
#: a writer the capture did not see is gone when they load): looked at as if loaded (:func:`stand_ins`)
LIBRARIES = ("click", "typing_extensions", "inspect", "ast", "dis", "opcode", "token", "tokenize", "linecache",
             "difflib", "heapq")
#: symlinks followed from ``sys.executable`` at most
MAX_LINKS = 40


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
          runs: Iterable[str] | None = None, written: Iterable[str] = (), remove: bool = True,
          ahead: str | None = None, libraries: Iterable[str] = LIBRARIES) -> ImportsReport:
    """What changed since ``started`` among the loaded ``modules`` (default: this process's), in
    their packages' directories, in the directories of the import ``path`` (default ``sys.path``)
    and ``sites``, and among the files that ``runs`` Python itself (default :func:`interpreter`);
    a file for which ``skip`` is true is left out (spyglass's own package, the places the run may
    write).  ``written``: byte-code files the run's events show written; those of a module below
    a directory of the import path are looked at too (a module no spyglass loaded yet), and
    so are modules' sources and extensions written there.  ``ahead``: the working directory
    ``python -m spyglass`` took off the path (:mod:`spyglass`): the next one started there imports a
    ``spyglass`` made there before spyglass's own code can run.  ``libraries`` not among the modules
    are looked at as if loaded, every module of theirs (:func:`stand_ins`)."""
    mods = dict(sys.modules if modules is None else modules)
    mods.update(stand_ins([n for n in libraries if n not in mods], path, started))
    report = ImportsReport()
    tops: set[str] = set(START_HOOKS)
    subs: dict[str, set[str]] = {}  # a package -> its loaded submodules' own names
    loaded: set[str] = set()  # the modules' own files (changed: said so once)
    cached_seen: set[str] = set()
    for name, mod in mods.items():
        tops.add(name.partition(".")[0])
        parent, dot, own = name.rpartition(".")
        if dot:
            subs.setdefault(parent, set()).add(own)
        source = getattr(mod, "__file__", None)
        if not isinstance(source, str) or not os.path.isabs(source) or skip(source):
            continue
        loaded.add(os.path.normpath(source))
        if _newer(source, started):
            report.changed.append(source)
        cached = getattr(mod, "__cached__", None)
        if isinstance(cached, str) and os.path.isabs(cached):
            cached_seen.add(cached)
            _check_cached(cached, source, started, report, remove)
    for name, mod in mods.items():  # inside a loaded package: a submodule put ahead, another's byte-code
        pkg_dirs = _package_dirs(mod)
        for i, d in enumerate(pkg_dirs):
            if not skip(d + "/"):
                _scan(d, started, subs.get(name, set()), loaded, report, pth=False, later=pkg_dirs[i + 1:])
                _check_package_cache(d, started, cached_seen, report, remove)
    site_set = {os.path.normpath(d) for d in (site_dirs() if sites is None else sites)}
    dirs = [*(sys.path if path is None else path), *site_set, *_pth_dirs(sorted(site_set))]
    ordered = list(dict.fromkeys(os.path.normpath(p) for p in dirs if p and os.path.isabs(p)))
    for i, d in enumerate(ordered):
        if skip(d + "/"):
            continue
        try:
            st, lst = os.stat(d), os.lstat(d)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):  # a zip archive (``python311.zip`` comes first)
            if max(st.st_ctime, lst.st_ctime) >= started:
                report.shadowing.append(d)
            continue
        _scan(d, started, tops, loaded, report, pth=d in site_set, later=ordered[i + 1:],
              made=max(st.st_ctime, lst.st_ctime) >= started)  # through a symlink: the directory's time too
    if ahead is not None:
        _spyglass_ahead(ahead, started, report)
    if written:
        _check_written(written, ordered, {os.path.realpath(d) for d in site_set}, started, cached_seen, skip,
                       report, remove)
    for f in interpreter() if runs is None else runs:
        if not skip(f) and _newer(f, started):
            report.changed.append(f)
    return report


def _scan(d: str, started: float, names: set[str], loaded: set[str], report: ImportsReport, *,
          pth: bool, later: list[str], made: bool | None = None) -> None:
    """Entries of an import directory made since ``started`` that would be imported in place of
    something (one of the loaded ``names``, or a module of that name there in another form or in
    a ``later`` directory: ``csv/`` ahead of ``csv.py``), looked for only when the directory's own
    status change time says an entry came or went; with ``pth`` (a site directory) every ``.pth``
    file changed since, even in place."""
    if made is None:
        try:
            st = os.lstat(d)
            made = (st if not stat.S_ISLNK(st.st_mode) else os.stat(d)).st_ctime >= started or st.st_ctime >= started
        except OSError:
            return
    if not (made or pth):
        return
    try:
        with os.scandir(d) as it:
            entries = [e.name for _, e in zip(range(MAX_ENTRIES), it, strict=False)]
    except OSError:
        return
    present = set(entries) if made else set()
    for entry in entries:
        is_pth = pth and entry.endswith(".pth")
        if not (made or is_pth):
            continue
        full = os.path.join(d, entry)
        if full in loaded or not _newer(full, started):
            continue
        name = None if is_pth else _module_name(entry, full)
        if is_pth or (name is not None and (name in names or _shadows(name, entry, d, present, later))):
            report.shadowing.append(full)


def _spyglass_ahead(d: str, started: float, report: ImportsReport) -> None:
    """A ``spyglass`` module, package or plain directory made in ``d`` since ``started`` (spyglass's own
    package left out: a checkout of spyglass is its own working directory).  A plain directory counts:
    under an editable install (whose finder comes after the path's) it makes ``spyglass`` a namespace
    package whose first portion is that directory, so a ``spyglass/cli/launch.py`` there is what runs."""
    own = os.path.realpath(os.path.dirname(spyglass.__file__ or ""))
    for entry in ("spyglass", *("spyglass" + s for s in _SUFFIXES)):
        full = os.path.join(d, entry)
        is_dir = entry == "spyglass" and os.path.isdir(full)
        if not (is_dir or _module_name(entry, full) == "spyglass") or os.path.realpath(full) == own:
            continue
        inits = [os.path.join(full, "__init__" + s) for s in _SUFFIXES] if is_dir else []
        if any(_newer(f, started) for f in (full, *inits)):
            report.shadowing.append(full)


def _shadows(name: str, entry: str, d: str, present: set[str], later: list[str]) -> bool:
    """Whether a module ``name`` is there besides ``entry`` (in ``d``, whose entries are
    ``present``, in another form: a package before a module, an extension before a source) or in
    a ``later`` directory of the same path."""
    forms = [name + s for s in _SUFFIXES] + [name]
    if any(f != entry and f in present and _module_name(f, os.path.join(d, f)) == name for f in forms):
        return True
    if not later or "." in name:
        return False
    try:
        return importlib.machinery.PathFinder.find_spec(name, later) is not None
    except (ImportError, ValueError, OSError):
        return False


def _package_dirs(mod: ModuleType) -> list[str]:
    where = getattr(mod, "__path__", None)
    if where is None or getattr(mod, "__file__", None) is None:
        return []  # not a package, or a namespace package (its directories are on the import path's side)
    try:
        return [os.path.normpath(d) for d in where if isinstance(d, str) and os.path.isabs(d)]
    except TypeError:
        return []


#: what the byte-code of a module is called in its ``__pycache__`` (this Python, no optimisation)
_TAG = f".{sys.implementation.cache_tag}.pyc"


def _check_package_cache(d: str, started: float, seen: set[str], report: ImportsReport, remove: bool) -> None:
    """The byte-code of every module in a loaded package's directory, imported or not (another
    spyglass command may import it: ``click._textwrap`` for ``--help``): changed since ``started``
    and not what Python makes of its source as it is, removed.  Looked at when a file came or went
    there (as Python writes one: a new name renamed in), then one ``lstat`` per file; a file
    written in place is found by the run's events (``written``)."""
    where = os.path.join(d, "__pycache__")
    if not _newer(where, started):
        return
    try:
        with os.scandir(where) as it:
            entries = [e for _, e in zip(range(MAX_ENTRIES), it, strict=False)]
    except OSError:
        return
    for e in entries:
        if not e.name.endswith(_TAG) or e.path in seen:
            continue
        try:
            newer = e.stat(follow_symlinks=False).st_ctime >= started
        except OSError:
            continue
        source = os.path.join(d, e.name[: -len(_TAG)] + ".py")
        if newer and os.path.exists(source):
            seen.add(e.path)
            _check_cached(e.path, source, started, report, remove)


def _check_written(written: Iterable[str], dirs: list[str], sites: set[str], started: float, seen: set[str],
                   skip: Callable[[str], bool], report: ImportsReport, remove: bool) -> None:
    """The files the run wrote (as its events show) below ``dirs`` (the import path), of modules
    not looked at yet (no spyglass loaded them: another command may import them): byte-code
    changed since ``started`` and not what Python makes of its source as it is is removed; a
    module's source or extension changed since is ``changed``.  Not below another environment's
    ``site-packages`` there (the base interpreter's, whose standard library a venv's spyglass runs);
    a source is not a new module of a site directory nor of a directory all of whose entries are
    new (a package installed during the run)."""
    roots = sorted(dict.fromkeys(os.path.realpath(d).rstrip("/") + "/" for d in dirs), key=len, reverse=True)
    said = {*report.changed, *report.shadowing}
    reals: dict[str, str] = {}  # directory -> its real path, from its parent's: an untar writes thousands
    for path in sorted(written):
        where, name = os.path.split(path)
        pyc = os.path.basename(where) == "__pycache__"
        folder = os.path.dirname(where) if pyc else where
        top = real_dir(os.path.normpath(folder), reals) if os.path.isabs(folder) else os.path.realpath(folder)
        root = next((r for r in roots if (top + "/").startswith(r)), None)
        if root is None or "-packages/" in (top + "/")[len(root):]:
            continue
        if not pyc:  # a module of the standard library or of an installed package there (not a new one)
            full = os.path.join(top, name)
            if (_module_name(name, full) is not None and full not in said and path not in said
                    and top not in sites and not skip(full) and _newer(full, started) and _older_there(top, started)):
                said.add(full)
                report.changed.append(full)
            continue
        cached = os.path.join(top, "__pycache__", name)
        source = os.path.join(top, name[: -len(_TAG)] + ".py")
        if (not name.endswith(_TAG) or cached in seen or skip(source) or not os.path.exists(source)):
            continue
        seen.add(cached)
        _check_cached(cached, source, started, report, remove)


def _older_there(d: str, started: float) -> bool:
    """Whether ``d`` holds an entry older than ``started`` (it is not a package made during the run)."""
    try:
        with os.scandir(d) as it:
            for _, e in zip(range(MAX_ENTRIES), it, strict=False):
                if e.stat(follow_symlinks=False).st_ctime < started:
                    return True
    except OSError:
        pass
    return False


def _pth_dirs(sites: Iterable[str]) -> list[str]:
    """The directories the ``.pth`` files of ``sites`` name that exist now (one that did not at
    the start is not on the import path yet: the next start adds it)."""
    found: list[str] = []
    for d in sites:
        try:
            names = [n for n in os.listdir(d) if n.endswith(".pth")]
        except OSError:
            continue
        for n in names:
            try:
                with open(os.path.join(d, n), encoding="utf-8", errors="replace") as f:
                    lines = f.read(1 << 16).splitlines()
            except OSError:
                continue
            for line in lines[:MAX_LINKS]:
                line = line.strip()
                if line and not line.startswith(("#", "import ", "import\t")):
                    target = os.path.normpath(os.path.join(d, line))
                    if os.path.isdir(target):
                        found.append(target)
    return found


def interpreter() -> list[str]:
    """The files that make this Python: ``sys.executable`` and each symlink on the way to the
    program (a virtual environment's ``bin/python``), the ``pyvenv.cfg`` it would read (its
    ``home`` names the standard library), and every file mapped executable in this process (the
    program, ``libpython``, the extensions' libraries)."""
    files: list[str] = []
    exe = sys.executable
    for _ in range(MAX_LINKS):
        if not exe:
            break
        files.append(exe)
        try:
            exe = os.path.normpath(os.path.join(os.path.dirname(exe), os.readlink(exe)))
        except OSError:
            break
    if sys.executable:
        bin_dir = os.path.dirname(sys.executable)
        files += [os.path.join(bin_dir, "pyvenv.cfg"), os.path.join(os.path.dirname(bin_dir), "pyvenv.cfg"),
                  os.path.join(bin_dir, "spyglass")]  # the command beside it (run as ``python -m spyglass`` now)
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="surrogateescape") as f:
            maps = f.read().splitlines()
    except OSError:
        maps = []
    for line in maps:
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and "x" in parts[1] and parts[5].startswith("/") and not parts[5].endswith(" (deleted)"):
            files.append(parts[5])
    return list(dict.fromkeys(files))


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
        found, made = marshal.loads(data[16:]), compile(text, source, "exec", dont_inherit=True)
    except (ValueError, TypeError, EOFError, SyntaxError):
        return False
    return isinstance(found, CodeType) and found == made and _same_instructions(found, made)


def _same_instructions(a: CodeType, b: CodeType) -> bool:
    """Code objects compare equal whatever specialised instructions one holds (``==`` maps them to
    their generic ones): the instructions as stored, of each nested code object too."""
    if getattr(a, "_co_code_adaptive", a.co_code) != getattr(b, "_co_code_adaptive", b.co_code):
        return False
    return all(_same_instructions(x, y) for x, y in zip(a.co_consts, b.co_consts, strict=False)
               if isinstance(x, CodeType) and isinstance(y, CodeType))


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
