"""Spyglass's own source and ``__pycache__`` at a run's start and end: the one walk at the start
(spyglass.witness.protected), what changed since (spyglass.witness.endofrun), and removing a name
there as it still is."""

from __future__ import annotations

import ctypes
import errno
import os
import re
import stat
import time
from collections.abc import Container, Iterable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

FileId = tuple[int, int]


class Start(NamedTuple):
    """What the walk at a run's start found below a root, for :func:`changed_since` at its end."""

    #: device and inode -> status change time (ns) of every entry that is not a directory
    files: dict[FileId, int]
    #: the real path of each ``__pycache__`` (not inside another) -> its own device and inode
    caches: dict[str, FileId]


def walk(root: str) -> tuple[list[tuple[FileId, str | None]], Start]:
    """One walk of ``root`` for both facts the guard takes at the start (symlinked directories not
    descended into; one ``stat`` per entry, a second for a symlink): the device and inode of every
    file and directory below it (a symlink: of what it names, if a file or directory), with the
    path of each regular file outside a ``__pycache__`` (None for the rest); and what the end of
    the run compares with (:class:`Start`)."""
    ids: list[tuple[FileId, str | None]] = []
    states: dict[FileId, int] = {}
    caches: dict[str, FileId] = {}
    real = os.path.realpath(root)
    stack = [root]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    st = entry.stat()
                    stack.append(entry.path)
                    ids.append(((st.st_dev, st.st_ino), None))
                    if entry.name == "__pycache__" and "/__pycache__/" not in entry.path:
                        caches[real + entry.path[len(root):]] = (st.st_dev, st.st_ino)
                    continue
                lst = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            fid = (lst.st_dev, lst.st_ino)
            if entry.name == "__pycache__" and "/__pycache__/" not in entry.path:
                caches[real + entry.path[len(root):]] = fid
            if not stat.S_ISLNK(lst.st_mode):
                states[fid] = lst.st_ctime_ns
                if stat.S_ISREG(lst.st_mode):
                    ids.append((fid, entry.path if "/__pycache__/" not in entry.path else None))
                continue
            try:
                st = os.stat(entry.path)  # what the symlink names
            except OSError:
                states[fid] = lst.st_ctime_ns  # a dangling link is a file to os.walk
                continue
            if not stat.S_ISDIR(st.st_mode):
                states[fid] = lst.st_ctime_ns
            if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
                ids.append(((st.st_dev, st.st_ino), None))
    return ids, Start(states, caches)


def snapshot(roots: Iterable[str], taken: Mapping[str, Start] | None = None) -> Start:
    """What :func:`walk` found below ``roots``: from ``taken`` (the real path of a root -> what
    was found there already) or walked now."""
    seen = Start({}, {})
    for root in roots:
        start = taken.get(root) if taken is not None else None
        if start is None:
            start = walk(root)[1]
        seen.files.update(start.files)
        seen.caches.update(start.caches)
    return seen


def changed_since(roots: Iterable[str], started: float, known: Container[tuple[int, int]],
                  skip: Iterable[str] = (), before: Start | None = None,
                  ) -> tuple[list[str], list[str]]:
    """Every file in the ``__pycache__`` directories of ``roots`` changed since ``started`` (its
    status change time, which no process can set), and every file
    of the source itself changed since or not ``known`` at the start by device and inode (an older
    file moved in; a directory moved in).  Not below the directories ``skip`` (mount points).
    ``before``: what was there at the start (:func:`snapshot`): a file not there then, or whose
    status change time is not the same, changed too, whatever the clock said (set back by root
    meanwhile); a ``__pycache__`` that is not the one there then (made a symlink, a directory
    moved in: its files may be the source's as they were) is given as its path and ``/``, and is
    a change of the source too when it is a symlink or a directory the source held at the start."""
    found: list[str] = []
    source: list[str] = []
    skipped = set(skip)
    for root in roots:
        for top, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if os.path.join(top, d) not in skipped]
            cache = os.path.basename(top) == "__pycache__"
            if cache or "/__pycache__/" in top + "/":
                if cache:  # a directory blocks a file
                    found.extend(_newer(top, [*files, *dirs], started, before=before.files if before else None))
                continue
            source.extend(_newer(top, files, started, known, before.files if before is not None else None))
            if before is not None and "__pycache__" in dirs:
                pyc = os.path.join(top, "__pycache__")
                of_source = _replaced_cache(pyc, before, known)
                if of_source is not None:  # emptied at the end, or the link removed
                    found.append(pyc + "/")
                    if of_source:
                        source.append(pyc)
            for d in dirs:
                if d != "__pycache__" and _id(os.path.join(top, d)) not in known:
                    source.append(os.path.join(top, d))
    return found, source


def _replaced_cache(path: str, before: Start, known: Container[tuple[int, int]]) -> bool | None:
    """None if the ``__pycache__`` at ``path`` is the one there at the start (or none is there);
    else whether it is a change of the source: a symlink, or a directory the source held at the
    start (not one made during the run: Python's, for a package that had no cache)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    fid = (st.st_dev, st.st_ino)
    if before.caches.get(path) == fid:
        return None
    return stat.S_ISLNK(st.st_mode) or fid in known


def _id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _newer(top: str, names: Iterable[str], started: float, known: Container[tuple[int, int]] | None = None,
           before: dict[tuple[int, int], int] | None = None) -> Iterator[str]:
    for f in names:
        path = os.path.join(top, f)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        fid = (st.st_dev, st.st_ino)
        named = _id(path) if stat.S_ISLNK(st.st_mode) else fid  # what the start's walk knew it by
        if (st.st_ctime > started or (known is not None and named not in known)
                or (before is not None and not stat.S_ISDIR(st.st_mode) and before.get(fid) != st.st_ctime_ns)):
            yield path


def unlink_in(directory: str, name: str) -> None:
    """Unlink ``name`` in ``directory`` (a real path, checked) as it still is: opened without
    following a symlink put in its place since, the name removed relative to it.  A directory
    (no byte-code file can be read or written in its place) is removed when empty, else moved
    aside under a hidden name in the same directory (never descended into: it may be a mount)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if os.path.realpath(f"/proc/self/fd/{fd}") != directory:
            raise OSError(errno.ESTALE, "moved while it was being cleaned")
        try:
            os.unlink(name, dir_fd=fd)
        except IsADirectoryError:
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                os.rename(name, f".removed-{os.urandom(6).hex()}-{name}", src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)


def leaves_cache(path: str) -> bool:
    """Whether a name in a ``__pycache__`` reaches, symlinks followed, a file outside one (the
    source itself, through a symlink there or a symlink called ``__pycache__``)."""
    return os.path.basename(os.path.dirname(os.path.realpath(path))) != "__pycache__"


def stamp(run_dir: Path | None) -> float:
    """The kernel's time now, as it stamps a file's status change (a coarse clock, up to a tick
    behind ``time.time()``): the run directory's, touched now.  Spyglass's own byte-code written
    before (its imports) is not newer; the agent starts later."""
    if run_dir is not None:
        try:
            os.utime(run_dir)
            return os.stat(run_dir).st_ctime
        except OSError:
            pass
    return time.time()


def mounts_on(roots: Iterable[str]) -> set[str]:
    """Mount points at, below or above ``roots`` (this process's view, /proc/self/mountinfo):
    what would put other files in place of the source."""
    tops = [r.rstrip("/") for r in roots]
    if not tops:
        return set()
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError:
        return set()
    found: set[str] = set()
    for line in lines:
        parts = line.split(" ")
        if len(parts) > 4:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), parts[4])
            if any(point == t or point.startswith(t + "/") or _above(point, t) for t in tops):
                found.add(point)
    return found


def _above(point: str, top: str) -> bool:
    return point == "/" or top.startswith(point.rstrip("/") + "/")


def detach(point: str) -> bool:
    """Detach the mounts on ``point`` (``umount2(MNT_DETACH)``; as root only), each one stacked there."""
    libc = ctypes.CDLL(None, use_errno=True)
    for _ in range(16):
        if point not in mounts_on([point]):
            return True
        if libc.umount2(os.fsencode(point), 2) != 0:
            return False
    return point not in mounts_on([point])
