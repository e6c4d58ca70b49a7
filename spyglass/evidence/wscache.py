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
    """What is sealed: the entries, and where each kept content lies (sha256 -> index in ``packs``,
    offset, length)."""

    entries: Entries = msgspec.field(default_factory=dict)
    packs: list[str] = msgspec.field(default_factory=list)
    blobs: dict[str, tuple[int, int, int]] = msgspec.field(default_factory=dict)


_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder(Body)


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
        self._packs: dict[str, int] = {}  # pack name -> open descriptor

    def check(self) -> bool:
        """Read the sealed entries and check their seal.  Call it before the agent starts: the bytes
        used are fixed then.  They are decoded at their first use (:attr:`body`, in the hashing thread)."""
        self.loaded_ns = time.time_ns()
        self._loaded = self._stat()
        self._payload, self._body = self._sealed.get_bytes(self.digest), None
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

    def lookup(self, path: str, key: StatKey) -> str | None:
        """The kept sha256 of ``path`` when its stat is ``key`` (device, inode, size, mtime, ctime, mode)."""
        hit = self.body.entries.get(path) if self.body is not None else None
        if hit is None or hit[0] != key:
            return None
        return hit[1]

    def content(self, sha256: str) -> bytes | None:
        """The kept content whose hash is ``sha256`` (None: not kept, gone, or not that content)."""
        body = self.body
        where = body.blobs.get(sha256) if body is not None else None
        if body is None or where is None or not 0 <= where[0] < len(body.packs):
            return None
        data = self._read(body.packs[where[0]], where[1], where[2])
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
        body = self.body or Body()
        if body.entries and entries == body.entries and self._loaded is not None and self._stat() == self._loaded:
            return True  # as the run found them, and the file is the one loaded: the seal and packs stand
        live = {e[1] for e in entries.values()}
        blobs: dict[str, tuple[str, int, int]] = {}
        used: dict[str, int] = {}  # pack -> live bytes in it
        total = 0
        for sha in sorted(live):
            where = body.blobs.get(sha)
            if where is not None and 0 <= where[0] < len(body.packs) and total + where[2] <= max_bytes:
                pack = body.packs[where[0]]
                blobs[sha] = (pack, where[1], where[2])
                used[pack] = used.get(pack, 0) + where[2]
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
        sealed = Body(entries, packs, {sha: (index[p], off, n) for sha, (p, off, n) in blobs.items()})
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
