"""Which hashes of the before-manifest the after-manifest keeps without reading the file again.

The after-manifest walks the whole workspace again (a process outside the run
can write too, so the capture alone is never trusted), but a file whose
identity and stat are what they were when it was hashed (device, inode, size,
mtime, ctime, mode) keeps its hash.  ctime is set by the kernel on every change
of content or metadata, and no program can set it (``utime`` sets it to *now*),
so an agent that rewrites a file in place with the same size and puts its mtime
back still changes its ctime.  Two traps git knows too:

* racy timestamps: a change in the same timestamp tick as the file's previous
  change leaves ctime as it was.  A stat is trusted only when its ctime is
  older than the moment the listing began by :data:`RACY_MARGIN_NS` (more than
  a coarse clock tick, and more than the one-second timestamps of older file
  systems); any later change then gets a later ctime.  Files changed shortly
  before the run are read again.
* file systems whose ctime does not say that (FAT has none; network and FUSE file
  systems take times from another clock or from the server): only files on
  the local file systems of :data:`CTIME_FILESYSTEMS` keep hashes.

A write through a shared writable mapping changes the times at the first
write to a page through that mapping, not at the later ones until the page
is written back: a file some process holds mapped that way when the hashing
starts (:func:`mapped_for_writing`) is read again, as are the files the
capture saw changed, whatever their stat says (:meth:`HashMemo.forget`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence

#: a trusted stat's ctime is at least this much older than the listing that hashed it
RACY_MARGIN_NS = 2_000_000_000

#: local file systems whose ctime the kernel sets from its own clock on every change of the content.
#: Not overlay: with ``metacopy=on`` a file's stat is its upper (metadata) inode's and its content the
#: lower file's, which can be rewritten while the overlay is unmounted and the overlay mounted again
#: with the same device number: every number of the stat as it was, the content not
#: (tests/evidence/test_overlay_metacopy.py)
CTIME_FILESYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "f2fs", "zfs", "bcachefs", "jfs"}
)

#: (device, inode, size, mtime ns, ctime ns, mode)
StatKey = tuple[int, int, int, int, int, int]


def stat_key(st: os.stat_result) -> StatKey:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def _unescape(field: str) -> str:
    r"""A mountinfo path: spaces, tabs, newlines and backslashes are written ``\ooo``."""
    if "\\" not in field:
        return field
    out = bytearray()
    raw = field.encode("utf-8", "surrogateescape")
    i = 0
    while i < len(raw):
        if raw[i] == 0x5C and i + 4 <= len(raw) and raw[i + 1 : i + 4].isdigit():
            out.append(int(raw[i + 1 : i + 4], 8) & 0xFF)
            i += 4
        else:
            out.append(raw[i])
            i += 1
    return out.decode("utf-8", "surrogateescape")


def read_mounts(mountinfo: str = "/proc/self/mountinfo") -> tuple[dict[int, str], list[tuple[str, str]]]:
    """(device -> file system type, [(mount point, type)] longest mount point first)."""
    by_dev: dict[int, str] = {}
    points: list[tuple[str, str]] = []
    try:
        with open(mountinfo, encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError:
        return by_dev, points
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or not tail:
            continue
        major, _, minor = fields[2].partition(":")
        try:
            by_dev[os.makedev(int(major), int(minor))] = tail[0]
        except ValueError:
            continue
        points.append((_unescape(fields[4]), tail[0]))
    points.sort(key=lambda p: len(p[0]), reverse=True)
    return by_dev, points


def mapped_for_writing(roots: Sequence[str], proc: str = "/proc") -> set[str]:
    """Files under ``roots`` that a process (one this process may inspect) has mapped shared and
    writable, from ``/proc/<pid>/maps``: their content can change without a change of times."""
    return writable_mappings(roots, proc)[0]


def writable_mappings(roots: Sequence[str], proc: str = "/proc") -> tuple[set[str], set[int]]:
    """The files mapped shared and writable by a process (one this process may inspect): those named
    under ``roots``, and the inode numbers of all (a file of the workspace mapped through a hard
    link elsewhere is named there: it is known by its inode).  Their content can change without a
    change of times."""
    prefixes = [os.fsencode(r.rstrip("/") + "/") for r in roots]
    found: set[str] = set()
    inodes: set[int] = set()
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return found, inodes
    for pid in pids:
        try:
            with open(f"{proc}/{pid}/maps", "rb") as f:
                data = f.read()
        except OSError:
            continue  # gone, or not ours to read
        if b"w-s " not in data and b"wxs " not in data:
            continue  # no shared writable mapping
        for line in data.splitlines():
            fields = line.split(None, 5)
            if len(fields) < 6 or fields[1][1:2] != b"w" or fields[1][3:4] != b"s":
                continue
            try:
                inodes.add(int(fields[4]))
            except ValueError:
                pass
            path = fields[5].removesuffix(b" (deleted)")
            if any(path.startswith(p) for p in prefixes):
                found.add(os.fsdecode(path))
    inodes.discard(0)
    return found, inodes


class FileSystems:
    """Whether the ctime of a device's files can be trusted (its type in :data:`CTIME_FILESYSTEMS`)."""

    def __init__(self, mountinfo: str = "/proc/self/mountinfo") -> None:
        self._by_dev, self._points = read_mounts(mountinfo)
        self._trusted: dict[int, bool] = {}

    def fstype(self, dev: int, path: str) -> str | None:
        kind = self._by_dev.get(dev)
        if kind is not None:
            return kind
        # a device mountinfo does not name (a btrfs subvolume): the mount that holds the path
        for point, kind in self._points:
            if path == point or path.startswith(point.rstrip("/") + "/"):
                return kind
        return None

    def trusted(self, dev: int, path: str) -> bool:
        hit = self._trusted.get(dev)
        if hit is None:
            hit = self._trusted[dev] = self.fstype(dev, path) in CTIME_FILESYSTEMS
        return hit


class HashMemo:
    """The sha256 of files hashed while their stat was settled: path -> (stat key, sha256).

    ``since_ns``: the wall clock (``time.time_ns()``) before the listing whose
    files are noted began; a stat whose ctime is not older than ``since_ns -
    margin_ns`` is racy and not noted.  :meth:`note` is called by the hashing
    thread, :meth:`lookup` by the after-manifest once that thread has ended.
    """

    def __init__(
        self, since_ns: int, margin_ns: int = RACY_MARGIN_NS, filesystems: FileSystems | None = None
    ) -> None:
        self.settled_before = since_ns - margin_ns
        self._fs = filesystems
        self._known: dict[str, tuple[StatKey, str]] = {}
        self._never: set[str] = set()
        self._never_inodes: set[int] = set()  # mapped for writing under any name
        self._lock = threading.Lock()
        self.reused = 0  # hashes the after-manifest kept

    def note(self, path: str, st: os.stat_result, sha256: str) -> None:
        """``path`` (as listed) had stat ``st`` while its content hashed to ``sha256``."""
        if st.st_ctime_ns >= self.settled_before:
            return  # racy: a change in the same tick would leave the stat as it is
        if self._fs is None:
            self._fs = FileSystems()
        if not self._fs.trusted(st.st_dev, path) or path in self._never or st.st_ino in self._never_inodes:
            return
        with self._lock:
            self._known[path] = (stat_key(st), sha256)

    def trusts(self, path: str, st: os.stat_result) -> bool:
        """Whether a hash taken with stat ``st`` may stand for ``path``'s content without a read."""
        if st.st_ctime_ns >= self.settled_before or path in self._never or st.st_ino in self._never_inodes:
            return False
        if self._fs is None:
            self._fs = FileSystems()
        return self._fs.trusted(st.st_dev, path)

    def known(self) -> dict[str, tuple[StatKey, str]]:
        """path -> (stat key, sha256) of every file noted."""
        with self._lock:
            return dict(self._known)

    def note_all(self, noted: Iterable[tuple[str, os.stat_result, str]]) -> None:
        """:meth:`note` for many files at once (one lock)."""
        settled, never, inodes = self.settled_before, self._never, self._never_inodes
        if self._fs is None:
            self._fs = FileSystems()
        trusted, devs = self._fs.trusted, dict[int, bool]()  # device -> trusted, without a call per file
        with self._lock:
            known = self._known
            for path, st, sha256 in noted:
                if st.st_ctime_ns >= settled or path in never or st.st_ino in inodes:
                    continue
                dev = st.st_dev
                ok = devs.get(dev)
                if ok is None:
                    ok = devs[dev] = trusted(dev, path)
                if ok:
                    known[path] = ((dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode), sha256)

    def adopt(self, hashes: dict[str, tuple[StatKey, str]]) -> dict[str, str]:
        """Note hashes taken elsewhere (the store's entries from the previous run: path -> (stat key,
        sha256)) with the checks of :meth:`note`; returns path -> sha256 of those it trusts."""
        settled, never, inodes = self.settled_before, self._never, self._never_inodes
        if self._fs is None:
            self._fs = FileSystems()
        trusted, devs = self._fs.trusted, dict[int, bool]()
        taken: dict[str, str] = {}
        with self._lock:
            known = self._known
            for path, (key, sha256) in hashes.items():
                if key[4] >= settled or path in never or key[1] in inodes:
                    continue
                ok = devs.get(key[0])
                if ok is None:
                    ok = devs[key[0]] = trusted(key[0], path)
                if ok:
                    known[path] = (key, sha256)
                    taken[path] = sha256
        return taken

    def lookup(self, path: str, st: os.stat_result) -> str | None:
        """The hash of ``path`` if its stat ``st`` is the one it was hashed with."""
        hit = self._known.get(path)
        if hit is None or hit[0] != stat_key(st):
            return None
        self.reused += 1
        return hit[1]

    def never(self, paths: Iterable[str], inodes: Iterable[int] = ()) -> None:
        """These files are never noted (mapped for writing when the hashing began): by name, and by
        inode number (mapped under any name; another file system's file of that number is read
        again too, which costs a read, never a hash)."""
        with self._lock:
            self._never.update(paths)
            self._never_inodes.update(inodes)
            for path in self._never:
                self._known.pop(path, None)
            if self._never_inodes:
                for path in [p for p, (key, _) in self._known.items() if key[1] in self._never_inodes]:
                    del self._known[path]

    def forget(self, paths: Iterable[str]) -> None:
        """These files are read again (the capture saw them changed)."""
        with self._lock:
            for path in paths:
                self._known.pop(path, None)

    def __len__(self) -> int:
        return len(self._known)
