"""What a run must not change or read: the witness's own files and places (:class:`Protected`).

The store, the policy file, the rule files and the signing key in use are
*protected*, and so is every place the next run may take its policy from
(``$SPYGLASS_POLICY``, the user config directory's ``spyglass/``,
``/etc/spyglass/``) and spyglass's own installed source with its rule pack,
whether a file is there yet or not.  Each is known by its path and by its
device and inode, so the store is still recognised after it is renamed aside,
under whatever name ``--store`` gave it, and a file reached by a hard link or
by a file handle.  The witness guard (:mod:`spyglass.witness.guard`) judges the
run's events by it; the end of the run (:mod:`spyglass.witness.endofrun`)
compares with what it found at the start.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

import msgspec

from spyglass.capture.procfs import realpath_as
from spyglass.witness.bytecode import FileId, Start, leaves_cache, walk
from spyglass.witness.realdirs import real_dir

__all__ = ["OWN_SOURCE", "FileId", "Protected", "file_id"]

#: what spyglass's own installed source is called in alerts (its byte-code cache is not guarded)
OWN_SOURCE = "spyglass's own source"
#: verdicts remembered per name at most (then the memo starts afresh)
VERDICTS_MAX = 65_536


def file_id(path: str | Path, follow: bool = True) -> FileId | None:
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def writers(path: str, pid: int) -> str:
    """``path`` as process ``pid`` meant it: ``/proc/self``, ``/proc/thread-self`` and ``/dev/fd``
    name the process's own entries (``/proc/self/fd/N/...``, ``/dev/fd/N/...``); judged in spyglass's
    process they would name spyglass's (its descriptor N may be the store's).  A process gone since
    leaves no verdict."""
    if path.startswith("/dev/"):  # /dev/fd is a symlink to /proc/self/fd, /dev/stdin to /proc/self/fd/0
        for alias, fd in _DEV_FDS:
            if path == alias or path.startswith(alias + "/"):
                return f"/proc/{pid}/{fd}" + path[len(alias):]
        return path
    if not path.startswith("/proc/"):
        return path
    for alias in ("/proc/self", "/proc/thread-self"):
        if path == alias or path.startswith(alias + "/"):
            path = f"/proc/{pid}" + path[len(alias):]
            break
    return _rooted(path)


def _rooted(path: str) -> str:
    """``/proc/PID/root/X`` of a process gone since: ``/X``, as the strace backend reads it (a
    ``chmod`` of the store through its own ``/proc/self/root`` exits before it is judged)."""
    who, sep, rest = path[len("/proc/"):].partition("/root")
    if not sep or not who.isdigit() or (rest and not rest.startswith("/")):
        return path
    try:
        os.stat(f"/proc/{who}/root")
    except OSError:
        return rest or "/"
    return path


#: where a name may be a process's own (:func:`writers`): no other name is rewritten (not the rest of
#: ``/dev``, where ``/dev/shm`` may hold a whole workspace)
_PER_PROCESS = ("/dev/fd", "/dev/std", "/proc/")
#: the names in /dev that are the process's own descriptors
_DEV_FDS = (("/dev/fd", "fd"), ("/dev/stdin", "fd/0"), ("/dev/stdout", "fd/1"), ("/dev/stderr", "fd/2"))


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
    #: protected directory (its real path) -> what was below it when it was walked (the status
    #: change time of each file, each ``__pycache__``: :func:`~spyglass.witness.bytecode.walk`)
    starts: dict[str, Start] = msgspec.field(default_factory=dict)
    #: protected directories not walked yet (path, what): see :meth:`settle`
    pending: list[tuple[str, str]] = msgspec.field(default_factory=list)
    #: directory -> what protected tree it lies in, as last seen; cleared by every rename, delete, link, symlink
    _dirs: dict[str, str | None] = msgspec.field(default_factory=dict)
    #: (path, follow) -> :meth:`_which`'s verdict, as last seen: cleared with ``_dirs`` and by every change
    #: of what is protected (a run writes each new file's name several times: one ``stat`` for them all)
    _verdicts: dict[tuple[str, bool], str | None] = msgspec.field(default_factory=dict)
    #: directory -> its real path (symlinks resolved), as last seen: cleared with ``_dirs``
    _reals: dict[str, str] = msgspec.field(default_factory=dict)
    #: no verdict is remembered per name any more (:meth:`distrust`): names may change unseen
    _unseen: bool = False
    #: each tree's name with a ``/`` after it, for the names in ``trees`` when there were ``_ntrees``
    _prefixes: tuple[str, ...] = ()
    _ntrees: int = 0

    def allow(self, path: str | Path) -> None:
        self._verdicts.clear()
        for p in {str(path), os.path.realpath(path)}:
            self.allowed.add(os.path.normpath(os.path.abspath(p)))

    def _allowed(self, p: str) -> bool:
        return any(p == a or p.startswith(a.rstrip("/") + "/") for a in self.allowed)

    def add(self, path: str | Path, what: str, *, secret: bool = False) -> None:
        self._verdicts.clear()
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
        if self.pending:
            self._verdicts.clear()
        while self.pending:
            path, what = self.pending.pop(0)
            ids, start = walk(path)
            for fid, name in ids:
                self.ids.setdefault(fid, what)
                if name is not None:  # the capture names it so, whatever name reaches it (a symlink)
                    self.paths.setdefault(fid, os.path.normpath(name))
            self.starts[os.path.realpath(path)] = start

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

    def which(self, path: str, *, follow: bool = True, pid: int | None = None, made: bool = False) -> str | None:
        """What protected thing ``path`` is or lies in, by name or by device and inode; ``pid``: the
        process that used the name (its ``/proc/self`` is judged, not spyglass's: :func:`writers`);
        ``made``: the call made ``path`` anew (a ``mkdir``, an ``O_CREAT|O_EXCL`` open that
        succeeded), so its inode is a new one that no protected file has and is not looked up
        (by name, and by its directory, it is judged as any other)."""
        if self.pending:
            self.settle()
        if pid is not None and path.startswith(_PER_PROCESS):  # (writers() leaves any other name as it is)
            path = writers(path, pid)
        what = self._which(path, follow=follow, made=made, pid=pid)
        if what == OWN_SOURCE and "/__pycache__/" in path and not (follow and leaves_cache(path)):
            return None  # Python's byte-code cache, written by any process of the run that imports spyglass
        return what

    def _which(self, path: str, *, follow: bool = True, made: bool = False, pid: int | None = None) -> str | None:
        """Memoised per name while no name changes (:meth:`forget_dirs`) and nothing is protected anew:
        a name's device and inode change only by a rename, delete, link, symlink or mount (each forgets
        all); a file or directory made where none was gets an inode no protected file has (theirs are
        in use, or freed by a delete).  Judged afresh each time: ``/proc`` names and names reached
        through a symlink (a descriptor's target or a process's ``cwd`` changes, no name does), and
        every name once the run used io_uring (:meth:`distrust`)."""
        key = (path, follow)  # as given (a backend's paths are normalised already: no normpath per event)
        memo = self._verdicts
        if key in memo:
            return memo[key]
        p = os.path.normpath(path)
        if pid is not None and p[:1] == "/":
            p = self._as_writer(p, pid)
        verdict, lasting = self._judge(p, follow, made)
        if lasting and not self._unseen and not p.startswith("/proc/"):
            if len(memo) >= VERDICTS_MAX:
                memo.clear()
            memo[key] = verdict
        return verdict

    def _judge(self, p: str, follow: bool, made: bool = False) -> tuple[str | None, bool]:
        """The verdict on ``p``, and whether it lasts until a name changes: not when a symlink
        leads there (its directory's or its own), which may be or lead to a ``/proc`` link
        (``/proc/PID/cwd``, ``/dev/fd/N``) that a ``chdir``, a ``dup2`` or a ``close`` turns
        elsewhere, with no name changed."""
        if self.allowed and self._allowed(p):
            return None, True
        hit = self.files.get(p)
        if hit is not None:
            return hit, True
        what = self._in_tree(p)
        if what is not None:
            return what, True
        d = os.path.dirname(p)
        lasting = not p.startswith("/proc/") and self._real(d) == d
        if made:  # a new inode: none of the protected ones, whatever the name has become since
            return self._dir_verdict(d) or self._resolved(d), lasting
        try:
            st = os.lstat(p)
            if follow and stat.S_ISLNK(st.st_mode):
                lasting = False
                st = os.stat(p)
            fid: FileId | None = (st.st_dev, st.st_ino)
        except (OSError, ValueError):
            fid = None
        if fid is not None and fid in self.ids:
            return self.ids[fid], lasting
        # an ancestor directory that is a protected tree under another name (renamed aside)
        return self._dir_verdict(d) or self._resolved(d), lasting

    def _as_writer(self, p: str, pid: int) -> str:
        """``p`` as process ``pid`` reaches it when a symlink on the way leads through ``/proc/self``
        or ``/proc/thread-self`` (``ln -s /proc/self/fd/7 x; mkdir x/new``): resolved in spyglass's
        process, that would be spyglass's own descriptor 7.  Such a name is never remembered
        (a symlink is on the way), and a writer gone since leaves ``/proc/PID/...``: no verdict."""
        d, name = os.path.split(p)
        if self._real(d) == d:  # no symlink on the way (memoised): the usual case
            return p
        real, crossed = realpath_as("", d, pid)
        if not crossed or real is None:
            return p
        return os.path.join(real, name) if name else real

    def _resolved(self, d: str) -> str | None:
        """What protected tree ``d`` lies in once its symlinks are resolved: a symlink to a directory
        inside a tree (the store's cache, an older run's evidence) whose inode is not known, only the
        tree's top directory's.  Resolved at each look (such names are rare): a symlink may be, or
        lead to, one in ``/proc`` that turns elsewhere with no name changed."""
        if d.startswith(("/proc/self", "/proc/thread-self")):
            return None  # ours, not the writer's (the guard names the writer's /proc/PID instead)
        # /proc/PID/fd/N: the writer's descriptor, while it has it; a directory reached through a
        # symlink is resolved afresh (the link may be, or lead to, one in /proc: /proc/PID/cwd)
        if d.startswith("/proc/") or self._real(d) != d:
            real = os.path.realpath(d)
        else:
            return None  # no symlink on the way: nothing to resolve
        if real != d and not (self.allowed and self._allowed(real)):
            return self._in_tree(real)
        return None

    def _real(self, d: str) -> str:
        """``os.path.realpath(d)`` of an absolute, normalised ``d``, from its parent's (memoised with
        ``_dirs``): one ``lstat`` per directory not seen yet instead of one per component."""
        return real_dir(d, self._reals, VERDICTS_MAX)

    def _in_tree(self, p: str) -> str | None:
        trees = self.trees
        if len(trees) != self._ntrees:  # trees only gain names (a name's ``what`` may change: not kept here)
            self._prefixes = tuple(root.rstrip("/") + "/" for root in trees)
            self._ntrees = len(trees)
        if not p.startswith(self._prefixes) and p not in trees:
            return None  # below no tree and none itself: the loop below would find none
        for root, what in trees.items():
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
        # /proc/PID/fd/N, or a symlink that may lead there: a descriptor's target changes, not memoised
        if not d.startswith("/proc/") and (d == "/" or not d or self._real(d) == d):
            cache[d] = verdict
        return verdict

    def forget_dirs(self) -> None:
        """Names were renamed, removed, linked or made symlinks, or a file system was mounted or
        unmounted: stat them again."""
        self._dirs.clear()
        self._verdicts.clear()
        self._reals.clear()

    def distrust(self) -> None:
        """Names may change without an event saying so (io_uring's renames and links, recorded once
        per process and operation or not at all): forget, and judge each name afresh from now on."""
        self.forget_dirs()
        self._unseen = True

    def made_dir(self, path: str, *, made: bool = False) -> None:
        """A directory was made at ``path`` (``mkdir``): only what was noted of that name while it
        did not exist goes (its new inode is no protected one); the rest stays true.  ``made``: the
        call succeeded, so the name is a directory (no symlink) whose real path is its parent's
        plus its name, and no ``lstat`` is needed to know it."""
        p = os.path.normpath(path)
        self._dirs.pop(p, None)
        self._reals.pop(p, None)
        for name in {p, path}:
            self._verdicts.pop((name, True), None)
            self._verdicts.pop((name, False), None)
        if made and p.startswith("/") and p != "/" and not p.startswith("/proc/"):
            real = os.path.join(self._real(os.path.dirname(p)), os.path.basename(p))
            if len(self._reals) >= VERDICTS_MAX:
                self._reals.clear()
            self._reals[p] = real

    def follow_rename(self, old: str, new: str, what: str) -> None:
        """``old`` (protected) is now called ``new``: protect the new name the same way."""
        o, n = os.path.normpath(old), os.path.normpath(new)
        self._verdicts.clear()
        if o in self.secrets:
            self.secrets[n] = self.secrets[o]
        if o in self.trees or any(o.startswith(r.rstrip("/") + "/") for r in self.trees) or os.path.isdir(n):
            self.trees[n] = what
        else:
            self.files[n] = what

    def protect_name(self, path: str, what: str) -> None:
        """A new name of a protected file (a hard link made during the run) is protected too."""
        self._verdicts.clear()
        self.files[os.path.normpath(path)] = what

    def secret(self, path: str) -> str | None:
        """By name: the key's paths, and the names it was linked or renamed to during the run."""
        if not self.secrets:
            return None
        return self.secrets.get(os.path.normpath(path))
