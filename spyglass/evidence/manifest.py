"""Workspace manifests: every file under the workspace roots with size, mode and sha256.

A manifest is taken before the agent starts and after it ends; the
difference between the two is what the run changed on disk (see
:mod:`spyglass.evidence.changes`).  Walks are deterministic (names sorted,
depth first, symlinks not followed), so two manifests of a tree that was cut
off at ``max_files`` cover the same leading part of it.
"""

from __future__ import annotations

import base64
import hashlib
import operator
import os
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import msgspec

from spyglass.evidence.hashers import Hashers
from spyglass.evidence.hashmemo import HashMemo
from spyglass.evidence.ignore import GitIgnore, GlobSet
from spyglass.policy.defaults import DEFAULT_MANIFEST_EXCLUDE

#: excluded unless the caller (or the policy's ``evidence.manifest_exclude``) says otherwise
DEFAULT_EXCLUDES: tuple[str, ...] = tuple(DEFAULT_MANIFEST_EXCLUDE)
DEFAULT_MAX_FILES = 50_000
DEFAULT_MAX_HASH_BYTES = 256 << 20
#: how many pruned directories a manifest names one by one
MAX_NOTED = 50


class FileEntry(msgspec.Struct, omit_defaults=True, kw_only=True):
    path: str  # absolute, as text (:func:`as_text`: bytes that are not UTF-8 written ``\\xHH``)
    kind: str = "file"  # file | symlink | fifo | socket | chardev | blockdev
    size: int = 0
    mode: str = ""  # permission bits, octal ("0644")
    sha256: str | None = None
    target: str | None = None  # symlink target
    mtime_ns: int = 0
    note: str | None = None  # why there is no hash (unreadable, too large)
    #: the exact bytes (base64) of ``path`` ("path") and ``target`` ("target") where they are not
    #: UTF-8, as events keep them: the text alone is ambiguous (a real name can read ``\\xff``)
    raw_bytes: dict[str, str] | None = None

    def disk_path(self) -> str:
        """The file's name as the OS has it (an fs string: exact bytes through surrogateescape)."""
        raw = self.raw_bytes.get("path") if self.raw_bytes else None
        return self.path if raw is None else os.fsdecode(base64.b64decode(raw))


class Manifest(msgspec.Struct, kw_only=True):
    version: int = 1
    taken: int = 0  # ns since the epoch
    roots: list[str] = msgspec.field(default_factory=list)
    files: list[FileEntry] = msgspec.field(default_factory=list)
    excludes: list[str] = msgspec.field(default_factory=list)
    gitignore: list[str] = msgspec.field(default_factory=list)  # .gitignore files applied
    excluded: dict[str, int] = msgspec.field(default_factory=dict)  # pattern -> entries left out
    pruned: list[str] = msgspec.field(default_factory=list)  # excluded directories (first MAX_NOTED)
    complete: bool = True  # False: stopped at max_files
    last_path: str | None = None  # where the walk stopped when incomplete
    max_files: int = DEFAULT_MAX_FILES
    notes: list[str] = msgspec.field(default_factory=list)
    seconds: float = 0.0
    #: hashes not read but taken from the previous run's sealed entries (stat unchanged)
    cached: int = 0

    def by_path(self) -> dict[str, FileEntry]:
        """Entries by their name on disk (:meth:`FileEntry.disk_path`: unambiguous, unlike the text)."""
        return {f.disk_path(): f for f in self.files}

    def rel(self, path: str) -> str:
        return relative_to_roots(path, self.roots)


def as_text(path: str) -> str:
    """A file name as JSON can carry it: bytes that are not UTF-8 written ``\\xHH``, as events write them."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "backslashreplace")
    return path


def _raw(name: str, field: str, raw: dict[str, str] | None) -> tuple[str, dict[str, str] | None]:
    """(:func:`as_text` of an fs string, ``raw`` with its exact bytes as base64 under ``field`` when
    they are not UTF-8)."""
    text = as_text(name)
    if text is not name:
        raw = dict(raw) if raw else {}
        raw[field] = base64.b64encode(os.fsencode(name)).decode("ascii")
    return text, raw


def relative_to_roots(path: str, roots: Sequence[str]) -> str:
    """``path`` relative to the first root that contains it (absolute otherwise)."""
    for root in roots:
        if path == root:
            return "."
        prefix = root.rstrip("/") + "/"
        if path.startswith(prefix):
            return path[len(prefix) :]
    return path


def inside(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def walk_key(path: str, roots: Sequence[str]) -> tuple[int, str]:
    """Position of ``path`` in walk order: root index, then the path with its separators as NUL,
    which orders as the tuple of its components would (NUL sorts before any character of a name)."""
    return walk_keyer(roots)(path)


def walk_keyer(roots: Sequence[str]) -> Callable[[str], tuple[int, str]]:
    """:func:`walk_key` for many paths under the same roots."""
    prefixes = [(i, root.rstrip("/") + "/") for i, root in enumerate(roots)]
    outside = len(prefixes)

    def key(path: str) -> tuple[int, str]:
        for i, prefix in prefixes:
            if path.startswith(prefix):
                return i, path[len(prefix) :].replace("/", "\0")
        return outside, path.replace("/", "\0")

    return key


#: receives (absolute path on disk, an fs string, and content) of small text files while hashing
TextKeeper = Callable[[str, bytes], None]


class ManifestOptions(msgspec.Struct):
    """What a workspace manifest leaves out and how much it hashes."""

    excludes: Sequence[str] = DEFAULT_EXCLUDES
    use_gitignore: bool = True
    max_files: int = DEFAULT_MAX_FILES
    max_hash_bytes: int = DEFAULT_MAX_HASH_BYTES
    skip_paths: Sequence[str] = ()  # absolute paths never listed (the run store)
    keep_text_max: int = 0  # files up to this size are offered to the keeper
    gitignore: GitIgnore | None = None  # fixed rules (the after-manifest reuses the before's)
    defer_hash: bool = False  # list only: the files are hashed later by :func:`hash_pending`
    remember: HashMemo | None = None  # notes each hash with the stat it was taken with
    reuse: HashMemo | None = None  # a file whose stat is the one noted here keeps its hash unread


#: a listed file waiting for its hash: (entry, path on disk, its stat at the listing)
Pending = tuple["FileEntry", str, os.stat_result]

#: the note of a file that changed between the listing and its hash (the agent already ran)
CHANGED_NOTE = "not hashed: changed after it was listed, while the agent ran"


class _Walk(msgspec.Struct):
    """The state of one manifest walk: options, exclusions, the .gitignore rules, the manifest so far."""

    opts: ManifestOptions
    globs: GlobSet
    ignore: GitIgnore | None
    keeper: TextKeeper | None
    manifest: Manifest
    count: int = 0
    skip: set[str] = msgspec.field(default_factory=set)
    pending: list[Pending] = msgspec.field(default_factory=list)
    noted: list[tuple[str, os.stat_result, str]] = msgspec.field(default_factory=list)
    hashed: int = 0  # files read and hashed so far
    pool: Hashers[tuple[str | None, str | None, bytes | None]] | None = None  # from the _INLINE-th file on
    jobs: list[tuple[FileEntry, os.stat_result]] = msgspec.field(default_factory=list)

    def exclude(self, rel: str, is_dir: bool) -> str | None:
        hit = self.globs.match(rel, is_dir)
        if hit is None and self.ignore is not None and self.ignore.ignored(rel, is_dir):
            hit = ".gitignore"
        if hit is not None:
            m = self.manifest
            m.excluded[hit] = m.excluded.get(hit, 0) + 1
            if is_dir and len(m.pruned) < MAX_NOTED:
                m.pruned.append(rel + "/")
        return hit


_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0)
#: a file smaller than this is hashed by the walk itself (a thread's hand-over costs more)
_POOL_MIN = 256 << 10
#: files a walk hashes itself before it hands the rest to threads (a small tree starts none)
_INLINE = 64
#: the threads that read and hash those, the walk going on meanwhile (reads and sha256 release the
#: interpreter's lock).  ``benchmarks/bench_evidence.py --only threads`` on 2 cores, 200 files of
#: 0.3-0.5 MB among 2000 small ones, wall time against the walk alone: 2 threads 0.90x, 3 0.86x, 4 0.79x
_WORKERS = 4
#: a file smaller than this is read in one call
_ONE_READ = 1 << 20
_CHUNK = 1 << 20


def hash_file(
    path: str, size: int, max_bytes: int, keep_max: int = 0
) -> tuple[str | None, str | None, bytes | None]:
    """(sha256, note, content if small enough to keep), read to its end whatever ``size`` said."""
    if size > max_bytes:
        return None, f"not hashed: larger than {max_bytes} bytes", None
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        return None, f"unreadable: {exc.strerror}", None
    try:
        if size < _ONE_READ:
            data = os.read(fd, size + 1)  # no larger buffer than the file needs
            if len(data) <= size:  # a short read: the end of the file
                return hashlib.sha256(data).hexdigest(), None, data if len(data) <= keep_max else None
            h = hashlib.sha256(data)  # it grew since its stat: hashed to its end, not kept
        else:
            h = hashlib.sha256()
        while chunk := os.read(fd, _CHUNK):
            h.update(chunk)
        return h.hexdigest(), None, None
    except OSError as exc:
        return None, f"unreadable: {exc.strerror}", None
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "chardev"
    if stat.S_ISBLK(mode):
        return "blockdev"
    return "other"


_by_name = operator.attrgetter("name")
_MODES: dict[int, str] = {}


def _mode_text(st_mode: int) -> str:
    """The permission bits in octal ("0644"), memoised (a tree has few distinct modes)."""
    bits = st_mode & 0o7777  # stat.S_IMODE
    text = _MODES.get(bits)
    if text is None:
        text = _MODES[bits] = f"{bits:04o}"
    return text


def _walk_dir(w: _Walk, root: str, rel_dir: str) -> bool:
    """Walk one directory; False when the file limit stopped the walk."""
    path = os.path.join(root, rel_dir) if rel_dir else root
    if w.opts.gitignore is None and w.ignore is not None:
        gi = os.path.join(path, ".gitignore")
        if os.path.isfile(gi):
            w.ignore.add_file(Path(gi), rel_dir)
    try:
        with os.scandir(path) as it:
            entries = sorted(it, key=_by_name)
    except OSError as exc:
        w.manifest.notes.append(f"directory {rel_dir or '.'} not listed: {exc.strerror}")
        return True
    opts, skip, files, exclude = w.opts, w.skip, w.manifest.files, w.exclude
    reuse, remember = opts.reuse, opts.remember
    # the common case at once: no exclude glob and no ignore rule for the path (else exclude() counts it)
    globbed = w.globs.match
    ignored = w.ignore.ignored if w.ignore is not None and w.ignore.by_file else None
    for entry in entries:
        name = entry.name
        rel = f"{rel_dir}/{name}" if rel_dir else name
        disk_path = entry.path
        if disk_path in skip:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError as exc:
            w.manifest.notes.append(f"{rel}: cannot stat: {exc.strerror}")
            continue
        st_mode = st.st_mode
        is_dir = stat.S_ISDIR(st_mode)
        if (globbed(rel, is_dir) is not None or (ignored is not None and ignored(rel, is_dir))) and (
            exclude(rel, is_dir) is not None
        ):
            continue
        if is_dir:
            if not _walk_dir(w, root, rel):
                return False
            continue
        if w.count >= opts.max_files:
            w.manifest.complete = False
            return False
        w.count += 1
        raw: dict[str, str] | None = None
        shown, raw = (disk_path, None) if disk_path.isascii() else _raw(disk_path, "path", None)
        kind = "file" if stat.S_ISREG(st_mode) else _kind(st_mode)
        fe = FileEntry(path=shown, kind=kind, size=st.st_size, mode=_mode_text(st_mode), mtime_ns=st.st_mtime_ns,
                       raw_bytes=raw)
        if kind == "file" and opts.defer_hash:
            w.pending.append((fe, disk_path, st))
        elif kind == "file":
            known = reuse.lookup(shown, st) if reuse is not None else None
            if known is not None:
                fe.sha256 = known  # same file, same stat as when it was hashed: not read again
            else:
                keep = opts.keep_text_max if w.keeper is not None else 0
                w.hashed += 1
                if st.st_size >= _POOL_MIN and st.st_size > keep and w.hashed > _INLINE and _WORKERS > 1:
                    if w.pool is None:
                        w.pool = Hashers(_WORKERS, hash_file)
                    w.pool.submit(disk_path, st.st_size, opts.max_hash_bytes, 0)  # (larger than keep)
                    w.jobs.append((fe, st))
                    files.append(fe)
                    continue
                fe.sha256, fe.note, content = hash_file(disk_path, st.st_size, opts.max_hash_bytes, keep)
                if content is not None and w.keeper is not None:
                    w.keeper(disk_path, content)
            if fe.sha256 is not None and remember is not None:
                w.noted.append((shown, st, fe.sha256))  # the stat from before the read
        elif kind == "symlink":
            try:
                fe.target, fe.raw_bytes = _raw(os.readlink(disk_path), "target", raw)
            except OSError as exc:
                fe.note = f"unreadable link: {exc.strerror}"
        files.append(fe)
    return True


def _collect(w: _Walk) -> None:
    """The hashes the threads took, in walk order; the threads end.  (They are given no file small
    enough for the keeper: it sees the files in walk order, its budget going to the first, as
    without threads.)"""
    if w.pool is None:
        return
    pool, jobs = w.pool, w.jobs
    w.pool, w.jobs = None, []
    remember = w.opts.remember
    for (fe, st), (sha256, note, _) in zip(jobs, pool.results(), strict=True):
        fe.sha256, fe.note = sha256, note
        if sha256 is not None and remember is not None:
            w.noted.append((fe.path, st, sha256))


def build_manifest(
    roots: Sequence[str | Path], options: ManifestOptions | None = None, keeper: TextKeeper | None = None
) -> tuple[Manifest, GitIgnore | None]:
    """List the files under ``roots``; returns the manifest and the .gitignore rules it applied."""
    m, ignore, _ = list_manifest(roots, options, keeper)
    return m, ignore


def hash_pending(pending: list[Pending], opts: ManifestOptions, keeper: TextKeeper | None = None) -> None:
    """Hash the files a ``defer_hash`` listing left (in a thread, while the agent runs).

    A file whose device, inode, size, mtime or ctime is not what the listing saw,
    when it was opened or after it was read, changed in between: it gets no hash
    but :data:`CHANGED_NOTE`, so the diff counts it modified (the kernel sets
    ctime: an agent cannot put it back to hide a change).  The stat after the read
    is taken on the open file (``fstat``): the content hashed is the listed file's."""
    keep = opts.keep_text_max if keeper is not None else 0
    max_bytes, remember = opts.max_hash_bytes, opts.remember
    noted: list[tuple[str, os.stat_result, str]] = []
    for fe, path, listed in pending:
        sha, note, content, st = _hash_listed(path, listed, max_bytes, keep)
        if note is None and st is None:
            sha, note, content = None, CHANGED_NOTE, None
        fe.sha256, fe.note = sha, note
        if content is not None and keeper is not None:
            keeper(path, content)
        if sha is not None and st is not None and remember is not None:
            noted.append((fe.path, st, sha))
    if remember is not None:
        remember.note_all(noted)


def _hash_listed(
    path: str, listed: os.stat_result, max_bytes: int, keep_max: int
) -> tuple[str | None, str | None, bytes | None, os.stat_result | None]:
    """(sha256, note, content kept, the file's stat after the read) of a listed file; no note and no
    stat: the file changed since it was listed.  One open, one read for a small file, one fstat."""
    size = listed.st_size
    if size > max_bytes:
        return None, f"not hashed: larger than {max_bytes} bytes", None, listed
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        return None, f"unreadable: {exc.strerror}", None, listed
    try:
        if size < _ONE_READ:
            data = os.read(fd, size + 1)  # a short read: the end of the file (its stat is checked after)
            if len(data) > size:
                return None, None, None, None  # it grew
            digest = hashlib.sha256(data).hexdigest()
            kept = data if size <= keep_max else None
        else:
            h = hashlib.sha256()
            while chunk := os.read(fd, _CHUNK):
                h.update(chunk)
            digest, kept = h.hexdigest(), None
        st = os.fstat(fd)
    except OSError as exc:
        return None, f"unreadable: {exc.strerror}", None, listed
    finally:
        os.close(fd)
    if (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns) != (
        listed.st_ino, listed.st_dev, size, listed.st_mtime_ns, listed.st_ctime_ns
    ):
        return None, None, None, None
    return digest, None, kept, st


def list_manifest(
    roots: Sequence[str | Path], options: ManifestOptions | None = None, keeper: TextKeeper | None = None
) -> tuple[Manifest, GitIgnore | None, list[Pending]]:
    """:func:`build_manifest`, and the files left to :func:`hash_pending` (``defer_hash``)."""
    opts = options or ManifestOptions()
    started = time.perf_counter()
    root_list = [str(Path(r).resolve()) for r in roots]
    # a root inside another root is walked as part of the outer one
    root_list = [r for r in dict.fromkeys(root_list) if not inside(r, [o for o in root_list if o != r])]
    ignore: GitIgnore | None = opts.gitignore
    if ignore is None and opts.use_gitignore:
        ignore = GitIgnore()
    m = Manifest(
        taken=time.time_ns(), roots=root_list, excludes=list(opts.excludes), max_files=opts.max_files
    )
    w = _Walk(
        opts,
        GlobSet(list(opts.excludes)),
        ignore,
        keeper,
        m,
        skip={str(Path(p).resolve()) for p in opts.skip_paths},
    )
    try:
        for root in root_list:
            if not os.path.isdir(root):
                m.notes.append(f"workspace root {root} does not exist")
                continue
            if opts.gitignore is None and ignore is not None:
                info = os.path.join(root, ".git", "info", "exclude")
                if os.path.isfile(info):
                    ignore.add_file(Path(info), "")
            if not _walk_dir(w, root, ""):
                m.last_path = m.files[-1].path if m.files else None  # the last file listed
                m.notes.append(
                    f"stopped after {opts.max_files} files (evidence.max_files): files after "
                    f"{m.last_path} in walk order are not listed"
                )
                break
    finally:
        _collect(w)
    if not m.complete:
        m.last_path = m.last_path or ""
    else:
        m.last_path = None
    if opts.remember is not None and w.noted:
        opts.remember.note_all(w.noted)
    if ignore is not None:
        m.gitignore = list(ignore.files)
    m.seconds = round(time.perf_counter() - started, 3)
    return m, ignore, w.pending


_enc = msgspec.json.Encoder(order="sorted")
_dec = msgspec.json.Decoder(Manifest)


def encode_manifest(m: Manifest) -> bytes:
    return _enc.encode(m) + b"\n"


def decode_manifest(data: bytes) -> Manifest:
    return _dec.decode(data)


def read_manifest(path: Path) -> Manifest | None:
    try:
        return decode_manifest(path.read_bytes())
    except FileNotFoundError:
        return None
