"""The workspace's hashes from the run before, kept in the store under the rule cache's seal.

A run lists the whole workspace before the agent starts (one stat per file)
and used to read every listed file for its sha256.  In a workspace of
thousands of files most are as the previous run left them, so the store keeps,
per set of workspace roots, what the previous run's after-manifest found:
path -> (device, inode, size, mtime, ctime, mode, sha256), only for files whose
stat was settled (:mod:`spyglass.evidence.hashmemo`: ctime older than the
walk by the racy margin, on a file system whose ctime the kernel keeps, not
mapped shared and writable by any process when the entries were taken).  The
next run's before-listing gives a file the kept hash, unread, when its stat is
that one: the kernel sets ctime on every change, and no program can set it,
so a file changed since, even with its size and mtime put back, is read again.

The old content of small text files (what a modified file's unified diff
starts from) is kept beside the entries in pack files, by sha256: a pack is
read only for the files the run modified or removed, and a content is used
only when it hashes to the sealed sha256 (a pack changed by anyone is no
diff, never a false one).

The agent may run as the same user and write the store: the entries carry an
HMAC-SHA256 under the store's key (:class:`spyglass.rules.cache.RuleCache`,
kind ``workspace``), and they are read and checked before the agent starts,
so nothing the agent writes during a run changes that run's before-manifest.
A forged entry needs the key: reading it is ``witness-key-read`` and writing
into the store ``witness-tamper`` in the run that does it (docs/evidence.md).
"""

from __future__ import annotations

import hashlib
import os
import time
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import msgspec

from spyglass.evidence.hashmemo import StatKey, stat_key
from spyglass.logs import get_logger

log = get_logger("spyglass.evidence")

FORMAT = b"spyglass-workspace-cache-v1"
KIND = "workspace"
#: workspaces (sets of roots) whose entries a store keeps; the least recently written go first
MAX_WORKSPACES = 16
#: a pack is rewritten with only the live contents when the dead bytes pass the live ones by this much
COMPACT_SLACK = 8 << 20

#: path -> ((device, inode, size, mtime ns, ctime ns, mode), sha256): as :meth:`HashMemo.known` gives them
Entries = dict[str, tuple[StatKey, str]]


class Body(msgspec.Struct, array_like=True):
    """What is sealed, in a form that decodes in a few long strings (no object per file: the hashing
    thread decodes it while the run starts, and a decode holds the interpreter lock throughout).

    Entry ``i``: the ``i``-th of the NUL-separated ``paths``, the six signed 64-bit numbers of its
    stat key at ``stats[48 i:]`` (native order), its sha256 at ``shas[64 i:]`` (hex).  Kept content
    ``j``: its sha256 at ``blob_shas[64 j:]``, (index in ``packs``, offset, length) at ``where[24 j:]``."""

    paths: str = ""
    stats: bytes = b""
    shas: str = ""
    packs: list[str] = msgspec.field(default_factory=list)
    blob_shas: str = ""
    where: bytes = b""

    def entries(self) -> Entries:
        """path -> (stat key, sha256), every entry (for tests and tools; lookups use :class:`WorkspaceCache`)."""
        if not self.paths:
            return {}
        nums = array("q", self.stats)
        return {
            path: (tuple(nums[6 * i : 6 * i + 6]), self.shas[64 * i : 64 * i + 64])  # type: ignore[misc]
            for i, path in enumerate(self.paths.split("\0"))
        }


_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder(Body)


def _pack_entries(entries: Entries) -> tuple[str, bytes, str]:
    """``entries`` as :class:`Body` holds them; an entry whose numbers do not fit 64 signed bits
    (an inode number past 2**63) is left out (its file is read next time)."""
    try:
        nums = array("q", [n for key, _ in entries.values() for n in key])
    except OverflowError:
        entries = {p: e for p, e in entries.items() if all(-(2**63) <= n < 2**63 for n in e[0])}
        nums = array("q", [n for key, _ in entries.values() for n in key])
    return "\0".join(entries), nums.tobytes(), "".join(sha for _, sha in entries.values())


def digest_of(roots: Sequence[str]) -> str:
    """The cache key of a set of workspace roots (resolved paths, in order)."""
    h = hashlib.sha256(FORMAT)
    for root in roots:
        h.update(b"\0" + os.fsencode(root))
    return h.hexdigest()


class WorkspaceCache:
    """The sealed entries of one set of workspace roots in ``<store>/cache``."""

    def __init__(self, store_root: str | Path, roots: Sequence[str]) -> None:
        from spyglass.rules.cache import RuleCache

        self._sealed = RuleCache(store_root, prefix=KIND)
        self.dir = self._sealed.dir
        self.digest = digest_of(roots)
        self.loaded_ns = time.time_ns()
        self._loaded: StatKey | None = None  # the sealed file's stat when it was loaded
        self._payload: bytes | None = None  # checked, not decoded yet
        self._body: Body | None = None
        self._index: dict[str, int] | None = None  # path -> entry
        self._nums: array[int] = array("q")
        self._shas = ""
        self._where: dict[str, tuple[str, int, int]] | None = None
        self._packs: dict[str, int] = {}  # pack name -> open descriptor

    def check(self) -> bool:
        """Read the sealed entries and check their seal.  Call it before the agent starts: the bytes
        used are fixed then.  They are decoded at their first use (:attr:`body`, in the hashing thread)."""
        self.loaded_ns = time.time_ns()
        self._loaded = self._stat()
        self._payload, self._body = self._sealed.get_bytes(self.digest), None
        self._index = self._where = None
        return self._payload is not None

    @property
    def body(self) -> Body | None:
        if self._body is None and self._payload is not None:
            payload, self._payload = self._payload, None
            try:
                self._body = _dec.decode(payload)
            except (msgspec.DecodeError, ValueError):  # our own bytes from another version: a miss
                self._body = None
        return self._body

    def load(self) -> Body | None:
        """The entries, if there are some whose seal holds (:meth:`check`, then :attr:`body`)."""
        self.check()
        return self.body

    def _entries(self) -> tuple[dict[str, int], array[int], str]:
        if self._index is None:
            body = self.body
            if body is None or not body.paths or len(body.stats) % 48:
                self._index, self._nums, self._shas = {}, array("q"), ""
            else:
                paths = body.paths.split("\0")
                self._index = dict(zip(paths, range(len(paths)), strict=False))
                self._nums, self._shas = array("q", body.stats), body.shas
                if len(self._nums) != 6 * len(paths) or len(self._shas) != 64 * len(paths):
                    self._index = {}
        return self._index, self._nums, self._shas

    def matches(self, listed: Iterable[tuple[str, os.stat_result]]) -> dict[str, tuple[StatKey, str]]:
        """path -> (stat key, kept sha256) of the listed files whose stat is the one kept."""
        index, nums, shas = self._entries()
        found: dict[str, tuple[StatKey, str]] = {}
        if not index:
            return found
        flat = nums.tolist()
        get = index.get
        for path, st in listed:
            i = get(path)
            if i is None:
                continue
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)
            j = 6 * i
            if key == tuple(flat[j : j + 6]):
                found[path] = (key, shas[64 * i : 64 * i + 64])
        return found

    def __len__(self) -> int:
        return len(self._entries()[0])

    def _blobs(self) -> dict[str, tuple[str, int, int]]:
        """sha256 -> (pack, offset, length) of the kept contents."""
        if self._where is None:
            self._where = {}
            body = self.body
            if body is not None and body.blob_shas:
                nums = array("q", body.where) if len(body.where) % 8 == 0 else array("q")
                n = len(body.blob_shas) // 64
                if len(nums) == 3 * n:
                    for j in range(n):
                        pack = nums[3 * j]
                        if 0 <= pack < len(body.packs):
                            self._where[body.blob_shas[64 * j : 64 * j + 64]] = (
                                body.packs[pack], nums[3 * j + 1], nums[3 * j + 2])
        return self._where

    def content(self, sha256: str) -> bytes | None:
        """The kept content whose hash is ``sha256`` (None: not kept, gone, or not that content)."""
        where = self._blobs().get(sha256)
        if where is None:
            return None
        data = self._read(*where)
        if data is None or hashlib.sha256(data).hexdigest() != sha256:
            return None
        return data

    def _read(self, pack: str, offset: int, length: int) -> bytes | None:
        fd = self._packs.get(pack)
        try:
            if fd is None:
                if "/" in pack or not pack.startswith(f"{KIND}-{self.digest}-"):
                    return None
                fd = self._packs[pack] = os.open(self.dir / pack, os.O_RDONLY | os.O_NOFOLLOW)
            return os.pread(fd, length, offset)
        except OSError:
            return None

    def close(self) -> None:
        for fd in self._packs.values():
            os.close(fd)
        self._packs.clear()

    def save(
        self, entries: Entries, contents: Callable[[], Mapping[str, bytes]], tag: str, max_bytes: int
    ) -> bool:
        """Seal ``entries`` for the next run, with the contents (by sha256) of those of their files that
        are kept: from the packs already there, else from ``contents()`` into a new pack ``tag``
        (at most ``max_bytes`` of content in all).  Nothing is written when the entries are the ones
        loaded.  Best effort: False if the store cannot be written."""
        paths, nums, shas = _pack_entries(entries)
        body = self.body
        if (body is not None and body.paths and (paths, nums, shas) == (body.paths, body.stats, body.shas)
                and self._loaded is not None and self._stat() == self._loaded):
            return True  # as the run found them, and the file is the one loaded: the seal and packs stand
        old = self._blobs()
        live = set(entries[p][1] for p in entries) if paths else set()
        blobs: dict[str, tuple[str, int, int]] = {}
        used: dict[str, int] = {}  # pack -> live bytes in it
        total = 0
        for sha in sorted(live):
            where = old.get(sha)
            if where is not None and total + where[2] <= max_bytes:
                blobs[sha] = where
                used[where[0]] = used.get(where[0], 0) + where[2]
                total += where[2]
        new = contents()
        if sum(self._size(p) for p in used) > 2 * total + COMPACT_SLACK:  # mostly dead bytes: repack
            kept = {sha: self.content(sha) for sha in blobs}
            new = {**{s: c for s, c in kept.items() if c is not None}, **new}
            blobs, used, total = {}, {}, 0
        name = f"{KIND}-{self.digest}-{tag}.pack"
        chunks: list[bytes] = []
        offset = 0
        for sha in sorted(live - blobs.keys()):
            data = new.get(sha)
            if data is None or total + len(data) > max_bytes:
                continue
            chunks.append(data)
            blobs[sha] = (name, offset, len(data))
            offset += len(data)
            total += len(data)
        try:
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            if chunks:
                self._write(name, b"".join(chunks))
                used[name] = offset
        except OSError as exc:
            log.debug("cannot write the workspace cache's pack: %s", exc)
            return False
        packs = sorted(used)
        index = {p: i for i, p in enumerate(packs)}
        locations = array("q")
        for pack, off, n in blobs.values():
            locations.extend((index[pack], off, n))
        sealed = Body(paths, nums, shas, packs, "".join(blobs), locations.tobytes())
        if not self._sealed.put_bytes(self.digest, _enc.encode(sealed)):
            return False
        self._prune(keep=used)
        return True

    def _stat(self) -> StatKey | None:
        try:
            return stat_key(os.stat(self.dir / f"{KIND}-{self.digest}.bin"))
        except OSError:
            return None

    def _size(self, pack: str) -> int:
        try:
            return os.stat(self.dir / pack).st_size
        except OSError:
            return 0

    def _write(self, name: str, data: bytes) -> None:
        tmp = self.dir / f".{name}.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, self.dir / name)

    def _prune(self, keep: Iterable[str]) -> None:
        """Remove this workspace's packs no entry names, and the entries and packs of the workspaces
        beyond the newest :data:`MAX_WORKSPACES`."""
        keep = set(keep)
        try:
            for p in self.dir.glob(f"{KIND}-{self.digest}-*.pack"):
                # a pack written since this run loaded the entries may be another run's, just sealed
                if p.name not in keep and p.stat().st_mtime_ns < self.loaded_ns:
                    p.unlink(missing_ok=True)
            sealed = sorted(self.dir.glob(f"{KIND}-*.bin"), key=lambda p: p.stat().st_mtime_ns)
            for old in sealed[:-MAX_WORKSPACES]:
                digest = old.name[len(KIND) + 1 : -len(".bin")]
                old.unlink(missing_ok=True)
                for p in self.dir.glob(f"{KIND}-{digest}-*.pack"):
                    p.unlink(missing_ok=True)
        except OSError:
            pass
