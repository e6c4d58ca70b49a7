"""What the witness guard takes at a run's start and checks at its end (:class:`EndOfRun`).

A change the run's events did not show (a name reached through a symlink removed
at once, an event the capture lost, a file system mounted without a ``mount``
call) is still found: the protected places (the policy and rule files, the key,
the policy locations: :mod:`spyglass.witness.endcheck`) and spyglass's own source
are compared with their state at the start.  Spyglass's own ``__pycache__`` is
cleaned: what the run wrote there (every file not as it was at the start; a
``__pycache__`` the run replaced) is removed (``run.json``
``extra.own_bytecode``), since a forged byte-code file would otherwise run in
the next spyglass; so is the byte-code of the other modules spyglass runs, whose
files and import path are checked too (:mod:`spyglass.witness.imports`).  The
guard (:mod:`spyglass.witness.guard`) raises the alerts.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import msgspec

import spyglass
from spyglass.pipeline import RunContext
from spyglass.witness import endcheck, imports
from spyglass.witness.bytecode import Start, changed_since, detach, mounts_on, snapshot, stamp, unlink_in
from spyglass.witness.protected import OWN_SOURCE, Protected

#: the files :meth:`EndOfRun.note_written` keeps (a module's byte-code, source, extension)
WRITTEN = (".pyc", ".py", ".so")


#: entries :func:`changed_below` looks at in all, at most
WALK_MAX = 500_000


def changed_below(dirs: Iterable[str], started: float, suffixes: tuple[str, ...]) -> set[str]:
    """The files named with ``suffixes`` below ``dirs`` (symlinked directories not followed) whose
    status change time is ``started`` or later: what a run wrote there when its events named more
    than :meth:`EndOfRun.note_written` keeps (bounded by :data:`WALK_MAX` entries)."""
    found: set[str] = set()
    seen = 0
    for top in dict.fromkeys(d for d in dirs if d and os.path.isabs(d) and os.path.isdir(d)):
        stack = [top]
        while stack and seen < WALK_MAX:
            try:
                with os.scandir(stack.pop()) as it:
                    entries = list(it)
            except OSError:
                continue
            seen += len(entries)
            for e in entries:
                try:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    elif e.name.endswith(suffixes) and e.stat(follow_symlinks=False).st_ctime >= started:
                        found.add(e.path)
                except OSError:
                    continue
    return found


class EndOfRun:
    """The start's state of the protected places and of spyglass's own source, and the checks
    against it when the run ends."""

    def __init__(self, protected: Protected) -> None:
        self.protected = protected
        #: the kernel's time at the start, as it stamps a file's status change (:func:`~.bytecode.stamp`)
        self.started = time.time()
        self._mounts: set[str] = set()
        self._places: dict[str, endcheck.State | None] | None = None
        #: byte-code files the run's events show written (:meth:`note_written`)
        self.written: set[str] = set()
        #: more were written than ``written`` keeps: the import path is walked for them at the end
        self.written_overflow = False
        #: spyglass's own source and cache at the start (each file's status change time, each
        #: ``__pycache__``), as the walk that protected their inodes found them (:meth:`Protected.settle`)
        self._before: Start | None = None

    def start(self, run_dir: Path | None) -> None:
        self.started = stamp(run_dir)
        roots = self._own_roots()
        self._mounts = mounts_on(roots)
        self.protected.settle()  # the one walk (unless the capture was told the protected files already)
        self._before = snapshot(roots, self.protected.starts) if roots else None
        self._places = endcheck.snapshot(self._place_list(), self._allowed)

    def _place_list(self) -> list[tuple[str, str, bool]]:
        prot = self.protected
        return [*((p, w, True) for p, w in prot.trees.items()), *((p, w, False) for p, w in prot.files.items())]

    def _allowed(self, path: str) -> bool:
        return bool(self.protected.allowed) and self.protected._allowed(os.path.normpath(path))

    def _own_roots(self) -> set[str]:
        return {os.path.realpath(r) for r, what in self.protected.trees.items() if what == OWN_SOURCE}

    def changed_places(self) -> list[tuple[str, str]]:
        """(path, what) of each protected place (the policy and rule files, the key, the policy
        locations) or file in one that is not as it was at the start."""
        if self._places is None:
            return []
        return endcheck.changed(self._places, self._place_list(), self._allowed)

    def note_written(self, path: str) -> None:
        """A file the run wrote: a module's byte-code, source or extension is looked at when the run
        ends (that of a module no spyglass process loaded yet, which another command may import:
        ``copy`` for ``gate``)."""
        if path.endswith(WRITTEN):
            if len(self.written) < imports.MAX_ENTRIES:
                self.written.add(path)
            else:  # a flood of names (maybe to hide one): every such file there changed since is looked at
                self.written_overflow = True

    def check_imports(self, ctx: RunContext) -> imports.ImportsReport:
        """What the run changed among the modules spyglass runs besides its own package (its
        libraries, the standard library) and on its import path (:mod:`spyglass.witness.imports`):
        their byte-code changed since the start is removed; noted in ``run.json`` as
        ``extra.imports``.  Not spyglass's own package (above), not the places the run may
        write, not the run's workspace unless an installed package (``site-packages``) is there."""
        # by name, as the modules were loaded (a realpath per module costs more than the whole check;
        # a module reached through a symlink into the workspace is then checked, not left out)
        pkg = os.path.dirname(spyglass.__file__ or "")
        own = tuple({os.path.normpath(pkg) + "/", os.path.realpath(pkg) + "/"})
        tops = [w for w in (ctx.workspace or [ctx.root_cwd]) if w]
        workspace = tuple({p.rstrip("/") + "/" for w in tops for p in (os.path.normpath(w), os.path.realpath(w))})

        # ``python -m spyglass``: the working directory comes first on the import path, even in the workspace
        here = os.path.normpath(sys.path[0]) + "/" if sys.path and os.path.isabs(sys.path[0]) else None

        def skip(path: str) -> bool:
            if path == here:
                return False
            if path.startswith(own) or self._allowed(path):
                return True
            installed = "/site-packages/" in path or "/dist-packages/" in path
            return not installed and (path + "/").startswith(workspace)

        written: Iterable[str] = self.written
        if self.written_overflow:
            written = {*self.written, *changed_below([*sys.path, *imports.site_dirs()], self.started, WRITTEN)}
        report = imports.check(self.started, skip, written=written, ahead=spyglass.CWD_OFF_PATH)
        if report.bytecode or report.changed or report.shadowing or report.failed:
            ctx.note_fact("imports", msgspec.to_builtins(report))
        return report

    def clean_own_source(self, ctx: RunContext) -> list[str]:
        """Remove what the run wrote in spyglass's own ``__pycache__``: a byte-code file forged with
        the source's size and time in its header would run in the next spyglass.  A Python process
        of the run that imports spyglass writes there too; what it wrote is compiled again at the
        next import.  What goes: every file there that is not as it was at the start (not there
        then, or its status change time moved: written, created, moved or linked in, whatever
        name the run used) or whose status change time is after the run's start; only in a
        ``__pycache__`` directory of the source itself (its directory resolved, the name itself
        unlinked, never followed); a ``__pycache__`` that is not the one there at the start (moved
        in, or made a symlink, whatever name the run used) loses its files (the symlink itself).
        Returns what changed in the source itself (and the file systems mounted on or above it
        during the run), noted in ``run.json`` as ``extra.own_source_changed``."""
        roots = self._own_roots()
        if not roots:
            return []
        # a file system mounted on the source (or above it) during the run: what it shows would run
        # next, and what is below it is not spyglass's (a bind mount of the user's files would be
        # cleaned): detached when on the source, else left (it may be the user's) and nothing cleaned
        mounts: list[str] = []
        source_facts: list[str] = []
        for mp in sorted(mounts_on(roots) - self._mounts):
            on_source = any(mp == r or mp.startswith(r + "/") for r in roots)
            if not (on_source and detach(mp)):
                mounts.append(mp)
            source_facts.append(f"{mp}: a file system mounted on it" + ("" if mp not in mounts else " (still there)"))

        def inside(d: str) -> bool:
            return (os.path.basename(d) == "__pycache__" and any(d.startswith(r + "/") for r in roots)
                    and not any(d == m or d.startswith(m.rstrip("/") + "/") for m in mounts))

        removed: list[str] = []
        failed: list[str] = []
        # every file there changed since the start, and every __pycache__ replaced, whatever name
        # the run reached it by (a symlink gone by then) and whether the capture saw it or not
        changed, source = changed_since(roots, self.started, self.protected.ids, skip=mounts, before=self._before)
        source = source_facts + source
        for name in dict.fromkeys(changed):
            if name.endswith("/"):  # a __pycache__ the run replaced: the link, or every file in it
                where = os.path.join(os.path.realpath(os.path.dirname(name[:-1])), "__pycache__")
                if not inside(where):
                    continue
                if os.path.islink(where):
                    targets = [where]
                else:
                    try:
                        with os.scandir(where) as it:
                            targets = [e.path for e in it]
                    except OSError:
                        continue
            else:
                where = os.path.realpath(os.path.dirname(name))
                if not inside(where):
                    continue
                targets = [os.path.join(where, os.path.basename(name))]
            for target in targets:
                try:
                    unlink_in(os.path.dirname(target), os.path.basename(target))
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    failed.append(f"{target}: {exc.strerror or exc}")
                    continue
                removed.append(target)
        if removed or failed:
            ctx.note_fact("own_bytecode", {"removed": removed, "failed": failed})
        if source:
            ctx.note_fact("own_source_changed", source)
        return source
