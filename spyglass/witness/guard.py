"""WitnessGuard: a pipeline sink that raises a critical alert when the run touches the witness.

The store, the policy file, the rule files and the signing key in use are
*protected*, and so is every place the next run may take its policy from
(``$SPYGLASS_POLICY``, the user config directory's ``spyglass/``,
``/etc/spyglass/``) and spyglass's own installed source with its rule pack,
whether a file is there yet or not.  Each is known by its path and by its device and inode, so the
guard still recognises the store after it is renamed aside, under whatever
name ``--store`` gave it, and a file reached by a hard link or by a file
handle (``open_by_handle_at`` events carry the resolved path).  Any change to
one of them by a process of the run (``witness-tamper``, critical; the agent
is stopped in enforce mode) and any read of the signing key
(``witness-key-read``, high) is an alert.  The guard stats paths of the live
filesystem, so it runs live only; ``check`` leaves its alerts as recorded.

Spyglass's own ``__pycache__`` is no alert (any Python process of the run that
imports spyglass writes there), but what the run wrote there (every file not
as it was at the start; a ``__pycache__`` the run replaced) is removed when the
run ends (``run.json`` ``extra.own_bytecode``): a forged byte-code file would
otherwise run in the next spyglass.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

import msgspec

from spyglass.events import FILE_WRITE_TYPES, Alert, Event, LineageEntry
from spyglass.pipeline import RunContext, Sink
from spyglass.witness import endcheck
from spyglass.witness.bytecode import changed_since, detach, leaves_cache, mounts_on, snapshot, stamp, unlink_in, walk

TAMPER_RULE = "witness-tamper"
KEY_READ_RULE = "witness-key-read"
_HANDLE_CALLS = ("open_by_handle_at", "name_to_handle_at")
_DIR_CHANGES = frozenset({"file.rename", "file.delete", "file.mkdir", "file.symlink"})
_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_TRUNC", "O_CREAT", "O_APPEND")

FileId = tuple[int, int]
#: what spyglass's own installed source is called in alerts (its byte-code cache is not guarded)
OWN_SOURCE = "spyglass's own source"
#: alerts of one rule per process (an ``rm -rf`` of the store is one story, not a thousand)
MAX_PER_PROCESS = 5
#: ``__pycache__`` directories of spyglass's own source the run replaced, kept to be emptied at its end (at most)
MAX_CACHES = 1_000


def file_id(path: str | Path, follow: bool = True) -> FileId | None:
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


class Protected(msgspec.Struct):
    """What the run must not change (``trees``: directories and all below) and must not read (``secrets``)."""

    #: path -> what it is ("the store", "the policy", "a rule file", "the signing key")
    trees: dict[str, str] = msgspec.field(default_factory=dict)
    files: dict[str, str] = msgspec.field(default_factory=dict)
    secrets: dict[str, str] = msgspec.field(default_factory=dict)
    ids: dict[FileId, str] = msgspec.field(default_factory=dict)
    secret_ids: dict[FileId, str] = msgspec.field(default_factory=dict)
    #: device and inode -> the canonical path of each protected file (for the capture: spyglass.capture.ident)
    paths: dict[FileId, str] = msgspec.field(default_factory=dict)
    #: directories inside a protected tree that the run may write (the sandbox's decoy home and /tmp)
    allowed: set[str] = msgspec.field(default_factory=set)
    #: protected directory (its real path) -> device and inode -> status change time (ns) of each file
    #: below it when it was walked (:func:`~spyglass.witness.bytecode.walk`: the guard's start snapshot)
    states: dict[str, dict[FileId, int]] = msgspec.field(default_factory=dict)
    #: protected directories not walked yet (path, what): see :meth:`settle`
    pending: list[tuple[str, str]] = msgspec.field(default_factory=list)
    #: directory -> what protected tree it lies in, as last seen; cleared by every rename, delete, mkdir, symlink
    _dirs: dict[str, str | None] = msgspec.field(default_factory=dict)

    def allow(self, path: str | Path) -> None:
        for p in {str(path), os.path.realpath(path)}:
            self.allowed.add(os.path.normpath(os.path.abspath(p)))

    def _allowed(self, p: str) -> bool:
        return any(p == a or p.startswith(a.rstrip("/") + "/") for a in self.allowed)

    def add(self, path: str | Path, what: str, *, secret: bool = False) -> None:
        real = os.path.realpath(path)
        for p in {str(path), real}:
            if os.path.isdir(p):
                self.trees[os.path.normpath(os.path.abspath(p))] = what
            else:
                self.files[os.path.normpath(os.path.abspath(p))] = what
            if secret:
                self.secrets[os.path.normpath(os.path.abspath(p))] = what
        fid = file_id(real)
        if fid is not None:
            self.ids[fid] = what
            if not os.path.isdir(real):
                self.paths.setdefault(fid, os.path.normpath(os.path.abspath(path)))
            if secret:
                self.secret_ids[fid] = what

    def add_place(self, path: str | Path, what: str, *, tree: bool, defer: bool = False) -> None:
        """A file or directory that need not exist yet: creating it is a change too.  A directory's
        files and directories are walked now, or with ``defer`` at the first need (:meth:`settle`)."""
        if os.path.exists(path):
            self.add(path, what)
            if tree and os.path.isdir(path):
                self.pending.append((str(path), what))
                if not defer:
                    self.settle()
        for p in {os.path.normpath(os.path.abspath(path)), os.path.realpath(path)}:
            (self.trees if tree else self.files).setdefault(p, what)

    def settle(self) -> None:
        """Walk the directories added and not walked yet, once for both facts (spyglass's own source
        is walked at every run's start): the device and inode of everything below them, and the
        status change times of their files, which the end of the run compares with.  A run
        settles when its capture is told the protected files or its guard starts (what comes
        first), after spyglass's own imports for the run: their byte-code, written by then, is
        then as at the start (a later walk would find it changed, remove it, and every run would
        compile it again).  Whoever reads ``ids`` or ``paths`` settles first."""
        while self.pending:
            path, what = self.pending.pop(0)
            ids, states = walk(path)
            for fid, name in ids:
                self.ids.setdefault(fid, what)
                if name is not None:  # the capture names it so, whatever name reaches it (a symlink)
                    self.paths.setdefault(fid, os.path.normpath(name))
            self.states[os.path.realpath(path)] = states

    @classmethod
    def for_run(
        cls,
        store_root: str | Path,
        *,
        policy_file: str | None = None,
        rule_paths: Iterable[str | Path] = (),
        sign_key: str | Path | None = None,
        places: Iterable[tuple[str | Path, str, bool]] = (),
    ) -> Protected:
        """``places``: (path, what, is a directory) protected whether they exist or not (the policy
        locations of the precedence chain, spyglass's own rule pack and source)."""
        prot = cls()
        for path, what, tree in places:
            prot.add_place(path, what, tree=tree, defer=True)
        prot.add(store_root, "the spyglass store")
        index = Path(store_root) / "index.sqlite"
        if index.exists():
            prot.add(index, "the spyglass store")
        if policy_file and os.path.isfile(policy_file):
            prot.add(policy_file, "the policy file in use")
        for rp in rule_paths:
            if os.path.exists(rp):
                prot.add(rp, "a rule file in use")
                if os.path.isdir(rp):
                    for f in Path(rp).rglob("*"):
                        if f.is_file():
                            prot.add(f, "a rule file in use")
        if sign_key is not None and os.path.exists(sign_key):
            prot.add(sign_key, "the signing key", secret=True)
        cache_key = Path(store_root) / "cache" / "rules.key"  # seals the rule cache (spyglass/rules/cache.py)
        if cache_key.exists():
            prot.add(cache_key, "the rule cache's key", secret=True)
        return prot

    def which(self, path: str, *, follow: bool = True) -> str | None:
        """What protected thing ``path`` is or lies in, by name or by device and inode."""
        if self.pending:
            self.settle()
        what = self._which(path, follow=follow)
        if what == OWN_SOURCE and "/__pycache__/" in path and not (follow and leaves_cache(path)):
            return None  # Python's byte-code cache, written by any process of the run that imports spyglass
        return what

    def _which(self, path: str, *, follow: bool = True) -> str | None:
        p = os.path.normpath(path)
        if self.allowed and self._allowed(p):
            return None
        hit = self.files.get(p)
        if hit is not None:
            return hit
        what = self._in_tree(p)
        if what is not None:
            return what
        fid = file_id(p, follow=follow)
        if fid is not None and fid in self.ids:
            return self.ids[fid]
        # an ancestor directory that is a protected tree under another name (renamed aside)
        d = os.path.dirname(p)
        return self._dir_verdict(d) or self._resolved(d)

    def _resolved(self, d: str) -> str | None:
        """What protected tree ``d`` lies in once its symlinks are resolved: a symlink to a directory
        inside a tree (the store's cache, an older run's evidence) whose inode is not known, only the
        tree's top directory's.  One ``realpath`` per directory, memoised like the inode verdicts."""
        if d.startswith("/proc/"):
            return None  # /proc/self and /proc/thread-self would be ours, not the writer's
        key = "\0real\0" + d
        if key in self._dirs:
            return self._dirs[key]
        real = os.path.realpath(d)
        verdict = None
        if real != d and not (self.allowed and self._allowed(real)):
            verdict = self._in_tree(real)
        self._dirs[key] = verdict
        return verdict

    def _in_tree(self, p: str) -> str | None:
        for root, what in self.trees.items():
            if p == root or p.startswith(root.rstrip("/") + "/"):
                return what
        return None

    def _dir_verdict(self, d: str) -> str | None:
        """What protected tree directory ``d`` is or lies in, by device and inode (memoised)."""
        cache = self._dirs
        if d in cache:
            return cache[d]
        verdict: str | None = None
        if d and d != "/":
            fid = file_id(d)
            verdict = self.ids.get(fid) if fid is not None else None
            if verdict is None:
                verdict = self._dir_verdict(os.path.dirname(d))
        cache[d] = verdict
        return verdict

    def forget_dirs(self) -> None:
        """Directories were renamed, made or removed: stat them again."""
        self._dirs.clear()

    def follow_rename(self, old: str, new: str, what: str) -> None:
        """``old`` (protected) is now called ``new``: protect the new name the same way."""
        o, n = os.path.normpath(old), os.path.normpath(new)
        if o in self.secrets:
            self.secrets[n] = self.secrets[o]
        if o in self.trees or any(o.startswith(r.rstrip("/") + "/") for r in self.trees) or os.path.isdir(n):
            self.trees[n] = what
        else:
            self.files[n] = what

    def secret(self, path: str) -> str | None:
        """By name: the key's paths, and the names it was linked or renamed to during the run."""
        if not self.secrets:
            return None
        return self.secrets.get(os.path.normpath(path))


class WitnessGuard(Sink):
    name = "witness-guard"

    def __init__(self, protected: Protected, *, mode: str = "observe") -> None:
        self.protected = protected
        self.mode = mode
        self.ctx: RunContext | None = None
        self.alerts: list[Alert] = []
        self._seen: set[tuple[str, int, str]] = set()
        self._per_proc: dict[tuple[str, int], int] = {}
        #: spyglass's own ``__pycache__`` directories the run replaced (emptied, or unlinked, when it ends)
        self.caches: dict[str, None] = {}
        self._started = time.time()
        self._mounts: set[str] = set()
        #: paths of spyglass's own source the run's alerts named
        self._told: set[str] = set()
        self._places: dict[str, endcheck.State | None] | None = None
        #: the files of spyglass's own source and cache at the start (device and inode -> ctime), as
        #: the walk that protected their inodes found them (:meth:`Protected.settle`)
        self._before: dict[FileId, int] | None = None

    def start(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self._started = stamp(ctx.run_dir)
        roots = self._own_roots()
        self._mounts = mounts_on(roots)
        self.protected.settle()  # the one walk (unless the capture was told the protected files already)
        self._before = snapshot(roots, self.protected.states) if roots else None
        self._places = endcheck.snapshot(self._place_list(), self._allowed)

    def _place_list(self) -> list[tuple[str, str, bool]]:
        prot = self.protected
        return [*((p, w, True) for p, w in prot.trees.items()), *((p, w, False) for p, w in prot.files.items())]

    def _allowed(self, path: str) -> bool:
        return bool(self.protected.allowed) and self.protected._allowed(os.path.normpath(path))

    def _own_roots(self) -> set[str]:
        return {os.path.realpath(r) for r, what in self.protected.trees.items() if what == OWN_SOURCE}

    def done(self, ctx: RunContext) -> None:
        """Remove what the run wrote in spyglass's own ``__pycache__``: a byte-code file forged with
        the source's size and time in its header would run in the next spyglass.  A Python process
        of the run that imports spyglass writes there too; what it wrote is compiled again at the
        next import.  What goes: every file there that is not as it was at the start (not there
        then, or its status change time moved: written, created, moved or linked in, whatever
        name the run used) or whose status change time is after the run's start; only in a
        ``__pycache__`` directory of the source itself (its directory resolved, the name itself
        unlinked, never followed); a ``__pycache__`` the run replaced (moved in, or made a
        symlink: by the events' names) loses its files (the symlink itself)."""
        if self._places is not None:  # the policy and rule files, the key, the policy locations
            for path, what in endcheck.changed(self._places, self._place_list(), self._allowed):
                if os.path.normpath(path) not in self._told:
                    self._end_alert(ctx, f"{what} changed during the run (found at its end): {path}")
        roots = self._own_roots()
        if not roots:
            return
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
        # what the events name, and every file there changed since the start: a write the events
        # named by a path that no longer resolves (a symlink gone by then), or that the capture lost
        changed, source = changed_since(roots, self._started, self.protected.ids, skip=mounts, before=self._before)
        source = source_facts + source
        names = [*(c + "/" for c in self.caches), *changed]
        for name in dict.fromkeys(names):
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
        if source:  # a change the events did not show (a name through a symlink gone since): too late to stop
            ctx.note_fact("own_source_changed", source)
            untold = [p for p in source if p not in self._told]  # not said by an alert of the run already
            for path in untold[:MAX_PER_PROCESS]:
                self._end_alert(ctx, f"{OWN_SOURCE} changed during the run (found at its end): {path}")

    def _end_alert(self, ctx: RunContext, message: str) -> None:
        alert = Alert(ts=time.time_ns(), rule_id=TAMPER_RULE, title="Witness tampered with", level="critical",
                      message=message, tags=["attack.defense_evasion", "attack.t1070"])
        self.alerts.append(alert)
        ctx.raise_alert(alert)

    def _note_cache(self, *names: str | None) -> None:
        """Keep a ``__pycache__`` of spyglass's own source that the run replaced (moved in or away,
        made a symlink), by the real path of the directory it is in (a symlink on the way may be
        gone at the end).  The files the run wrote in a ``__pycache__`` need no name: the end of
        the run finds every one that is not as it was at the start, whatever name reached it.
        What it cannot find is this: the walk does not follow a symlink put in the place of
        ``__pycache__``, and a directory moved there keeps the inodes and status change times of
        its files (files of the source or of another ``__pycache__`` as they were at the start)."""
        for name in names:
            if not name or os.path.basename(os.path.normpath(name)) != "__pycache__":
                continue
            keep = os.path.join(os.path.realpath(os.path.dirname(os.path.normpath(name))), "__pycache__")
            if keep in self.caches or self.protected._which(keep, follow=False) != OWN_SOURCE:
                continue
            if len(self.caches) >= MAX_CACHES:
                return
            self.caches[keep] = None

    def event(self, ev: Event) -> None:
        if not ev.path or not ev.path.startswith("/"):
            return
        # an attempt that failed (EACCES from a store owned by another user) is as telling as a success
        failed = "" if ev.ok else f" (attempted; failed: {ev.errno or 'error'})"
        t = ev.type
        if t == "file.rename" and not ev.ok and ev.errno == "EEXIST":
            # renameat2(RENAME_NOREPLACE) refusing to replace: nothing was touched, and mv, which tries
            # it first, follows with the plain rename that is the real change (one alert, not two)
            return
        if t in _DIR_CHANGES and ev.ok:
            self.protected.forget_dirs()
        handle = ev.syscall in _HANDLE_CALLS
        writes = t in FILE_WRITE_TYPES or (
            handle and bool(ev.flags) and any(f in (ev.flags or "") for f in _WRITE_FLAGS)
        )
        if writes or handle:
            # a link or rename is judged on its source without following it (the link itself may be the store)
            what = self.protected.which(ev.path, follow=t not in ("file.rename", "file.link", "file.symlink"))
            if what == OWN_SOURCE and t == "file.mkdir" and os.path.basename(ev.path) == "__pycache__":
                what = None  # Python making the cache of a subpackage that had none (what it writes there goes)
            if what is None and ev.target and t in ("file.rename", "file.link"):
                what = self.protected.which(ev.target)
            if what is not None:
                if not ev.ok:
                    pass
                elif t == "file.link" and ev.path:  # the new name is a way in: watch it too
                    self.protected.files[os.path.normpath(ev.path)] = what
                    if ev.target and os.path.normpath(ev.target) in self.protected.secrets:
                        self.protected.secrets[os.path.normpath(ev.path)] = what
                elif t == "file.rename" and ev.target:  # follows the store under its new name, in event order
                    self.protected.follow_rename(ev.path, ev.target, what)
                verb = "opened by file handle" if handle and not writes else _verb(t)
                self._raise(ev, TAMPER_RULE, "critical", "kill", "Witness tampered with",
                            f"{what} {verb}: {ev.path}" + (f" -> {ev.target}" if ev.target else "") + _as(ev) + failed)
                self._told.update(os.path.normpath(p) for p in (ev.path, ev.target) if p)
                if what == OWN_SOURCE:  # a __pycache__ moved in or made a symlink
                    self._note_cache(ev.path, ev.target if t == "file.rename" else None)
                return
        if t == "file.read" or handle:
            what = self.protected.secret(ev.path)
            if what is not None:
                title = "Signing key read" if what == "the signing key" else "Witness key read"
                self._raise(ev, KEY_READ_RULE, "high", "alert", title,
                            f"{what} read: {ev.path}{_as(ev)}{failed}")

    def _raise(self, ev: Event, rule: str, level: str, action: str, title: str, message: str) -> None:
        if self.ctx is None:
            return
        key = (rule, ev.pid, message)
        if key in self._seen:
            return
        self._seen.add(key)
        per_proc = self._per_proc.get((rule, ev.pid), 0) + 1
        self._per_proc[(rule, ev.pid)] = per_proc
        if per_proc > MAX_PER_PROCESS:  # rm -rf of a store: the first few say it, the rest are noise
            return
        procs = self.ctx.procs
        info = procs.procs.get(ev.pid)
        alert = Alert(
            ts=ev.ts,
            rule_id=rule,
            title=title,
            level=level,
            action=action,
            message=message,
            event_seqs=[ev.seq],
            pid=ev.pid,
            exe=info.exe if info is not None else ev.exe,
            argv=list(info.argv) if info is not None and info.argv else None,
            cwd=info.cwd if info is not None else None,
            lineage=[LineageEntry(pid=p.pid, exe=p.exe, argv=list(p.argv) if p.argv else None, cwd=p.cwd)
                     for p in reversed(procs.lineage(ev.pid))],
            tags=["attack.defense_evasion", "attack.t1070"] if rule == TAMPER_RULE else ["attack.credential_access"],
        )
        self.alerts.append(alert)
        self.ctx.raise_alert(alert)
        if action == "kill" and self.mode == "enforce" and self.ctx.stop_agent is not None:
            self.ctx.stop_agent(rule)


def _as(ev: Event) -> str:
    """The name the run used, where the capture recorded the protected file's own path instead (a link)."""
    return f" (opened as {ev.raw_path})" if ev.raw_path and ev.raw_path != ev.path else ""


def _verb(etype: str) -> str:
    return {
        "file.write": "opened for writing",
        "file.create": "created or opened for writing",
        "file.delete": "deleted",
        "file.rename": "renamed",
        "file.link": "hard-linked",
        "file.symlink": "linked",
        "file.chmod": "chmod-ed",
        "file.chown": "chown-ed",
        "file.mkdir": "written (mkdir)",
        "file.truncate": "truncated",
    }.get(etype, "changed")
