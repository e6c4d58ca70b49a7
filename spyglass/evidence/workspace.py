"""WorkspaceEvidence: the pipeline sink that fingerprints the workspace around a run.

``start()`` (before the agent is launched) lists the workspace (names, sizes,
times: what the rules need at once) and starts a thread that hashes the
listed files (it waits ``hash_wait`` for it when the workspace is small
enough to be hashed in that time, so a small workspace is hashed before the
agent starts; a large one is hashed while the agent runs, without the wait),
keeping the content of small text files so that modified files get a real
unified diff; a file that changed between the listing and its hash (its
ctime, set by the kernel, says so) gets no hash and counts as modified.
``done()`` (after the agent has ended) waits for that thread, then takes the
after-manifest with the same ``.gitignore`` rules (an agent that adds to
``.gitignore`` does not hide its files that way): it stats every file, and
reads again only those whose identity or stat changed since their hash, whose
stat was racy, or that the capture saw changed (:mod:`spyglass.evidence.hashmemo`);
it compares the two, and writes into ``runs/<id>/evidence/``:

* ``manifest-before.json``, ``manifest-after.json``: path, kind, size, mode, sha256
* ``changes.json``: added / removed / modified files, and the files outside
  the workspace that the events show written
* ``changes.patch``: the unified diffs (stored once: changes.json gives each
  change's length in it; :func:`load_workspace_changes` puts them together)

A summary goes into run.json (``extra["workspace_changes"]``).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spyglass.events import Event
from spyglass.evidence.changes import (
    DEFAULT_MAX_DIFF_BYTES,
    DEFAULT_MAX_RUN_DIFF_BYTES,
    WorkspaceChanges,
    diff_manifests,
    stored_form,
)
from spyglass.evidence.hashmemo import RACY_MARGIN_NS, HashMemo, stat_key, writable_mappings
from spyglass.evidence.ignore import GitIgnore
from spyglass.evidence.manifest import (
    DEFAULT_EXCLUDES,
    DEFAULT_MAX_FILES,
    DEFAULT_MAX_HASH_BYTES,
    Manifest,
    ManifestOptions,
    Pending,
    as_text,
    build_manifest,
    encode_manifest,
    hash_pending,
    list_manifest,
)
from spyglass.evidence.writes import OutsideWriteTracker
from spyglass.evidence.wscache import WorkspaceCache
from spyglass.logs import get_logger
from spyglass.pipeline import RunContext, Sink

log = get_logger("spyglass.evidence")

DEFAULT_MAX_KEPT_BYTES = 64 << 20
#: a workspace this small is hashed before the agent starts (start() waits up to ``hash_wait``)
HASH_FIRST_FILES = 2000
HASH_FIRST_BYTES = 16 << 20

MANIFEST_BEFORE = "manifest-before.json"
MANIFEST_AFTER = "manifest-after.json"
CHANGES = "changes.json"
PATCH = "changes.patch"


class WorkspaceEvidence(Sink):
    """Before/after manifests of the workspace and their diff, stored with the run.

    ``roots``: the workspace roots (default: the run's workspace from the context).
    ``store_root``: the run store's directory, never listed and used to find
    ``runs/<id>/evidence`` (found from the pipeline's store writer when not given).
    """

    name = "workspace-evidence"

    def __init__(
        self,
        roots: Sequence[str | Path] | None = None,
        *,
        excludes: Sequence[str] = DEFAULT_EXCLUDES,
        use_gitignore: bool = True,
        max_files: int = DEFAULT_MAX_FILES,
        max_diff_bytes: int = DEFAULT_MAX_DIFF_BYTES,
        max_run_diff_bytes: int = DEFAULT_MAX_RUN_DIFF_BYTES,
        max_hash_bytes: int = DEFAULT_MAX_HASH_BYTES,
        max_kept_bytes: int = DEFAULT_MAX_KEPT_BYTES,
        outside_allowed: Sequence[str] = (),
        store_root: str | Path | None = None,
        evidence_dir: str | Path | None = None,
        background_hash: bool = True,
        hash_wait: float = 0.05,
        racy_margin_ns: int = RACY_MARGIN_NS,
        keep_hashes: bool = True,
        use_cache: bool = True,
    ) -> None:
        self.roots = [str(Path(r).resolve()) for r in roots] if roots else []
        self.excludes = list(excludes)
        self.use_gitignore = use_gitignore
        self.max_files = max_files
        self.max_diff_bytes = max_diff_bytes
        self.max_run_diff_bytes = max_run_diff_bytes
        self.max_hash_bytes = max_hash_bytes
        self.max_kept_bytes = max_kept_bytes
        self.outside_allowed = list(outside_allowed)
        self.store_root = str(Path(store_root).resolve()) if store_root is not None else None
        self.evidence_dir = Path(evidence_dir) if evidence_dir is not None else None
        self.before: Manifest | None = None
        self.after: Manifest | None = None
        self.changes: WorkspaceChanges | None = None
        self._rules: GitIgnore | None = None
        self._kept: dict[str, bytes] = {}
        self._kept_bytes = 0
        self._kept_full = False
        self._outside: OutsideWriteTracker | None = None
        self._ctx: RunContext | None = None
        self._hasher: threading.Thread | None = None
        #: the before-manifest's hashes, kept by the after-manifest for files whose stat did not change
        self._memo: HashMemo | None = None
        self.racy_margin_ns = racy_margin_ns
        #: False: the after-manifest reads every file again, whatever its stat says
        self.keep_hashes = keep_hashes
        #: hash the before-manifest while the agent runs (False: before it starts; every early change diffed)
        self.background_hash = background_hash
        #: seconds start() waits for the hashes (a small workspace is hashed before the agent starts)
        self.hash_wait = hash_wait
        #: take the hashes of files whose stat is unchanged since the previous run from the store's
        #: sealed entries (:mod:`spyglass.evidence.wscache`), and leave this run's there
        self.use_cache = use_cache
        self._cache: WorkspaceCache | None = None
        #: path on disk -> sha256 of the before-manifest's files hashed from the cache (old content: its packs)
        self._cached: dict[str, str] = {}

    # -- setup ----------------------------------------------------------------
    def _find_store(self, ctx: RunContext) -> None:
        """The evidence directory and store root, from the run context."""
        if self.evidence_dir is None and ctx.run_dir is not None:
            self.evidence_dir = ctx.run_dir / "evidence"
        if self.store_root is None and ctx.store is not None:
            self.store_root = str(Path(ctx.store.root).resolve())

    def _options(self, gitignore: GitIgnore | None) -> ManifestOptions:
        return ManifestOptions(
            excludes=self.excludes,
            use_gitignore=self.use_gitignore,
            max_files=self.max_files,
            max_hash_bytes=self.max_hash_bytes,
            skip_paths=[self.store_root] if self.store_root else [],
            keep_text_max=self.max_diff_bytes,
            gitignore=gitignore,
        )

    def _keep(self, path: str, content: bytes) -> None:
        if self._kept_full:
            return
        if self._kept_bytes + len(content) > self.max_kept_bytes:
            self._kept_full = True
            return
        if b"\0" in content[:8192]:
            return
        self._kept[path] = content
        self._kept_bytes += len(content)

    def _write(self, name: str, data: bytes) -> None:
        if self.evidence_dir is None:
            return
        self.evidence_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.evidence_dir / (name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, self.evidence_dir / name)

    # -- hooks ----------------------------------------------------------------
    def start(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._find_store(ctx)
        if not self.roots:
            self.roots = list(ctx.workspace) or [ctx.root_cwd or os.getcwd()]
        self._outside = OutsideWriteTracker(self.roots, self.outside_allowed)
        opts = self._options(None)
        opts.defer_hash = True
        opts.remember = self._memo = HashMemo(time.time_ns(), self.racy_margin_ns)
        self.before, self._rules, pending = list_manifest(self.roots, opts)
        # which files existed before the run, for the rules (``file.pre_existing``)
        ctx.workspace_before = frozenset(f.path for f in self.before.files)
        if self.use_cache and self.keep_hashes and self.store_root is not None and self.before.files:
            # read and checked before the agent starts: nothing it writes can change this run's hashes
            # (an empty workspace takes no hash from it: it is opened at the end if the run made files)
            self._cache = WorkspaceCache(self.store_root, self.before.roots)
            self._cache.check()  # decoded later, by the hashing thread
        if not self.background_hash or not pending:  # nothing to hash: only the manifest to write
            self._hash_before(self.before, pending, opts)
            return
        self._hasher = threading.Thread(
            target=self._hash_before, args=(self.before, pending, opts), name="spyglass-manifest", daemon=True
        )
        self._hasher.start()
        if len(pending) <= HASH_FIRST_FILES and sum(p[0].size for p in pending) <= HASH_FIRST_BYTES:
            self._hasher.join(self.hash_wait)  # larger ones would not be done in that time: no wait

    def _hash_before(self, before: Manifest, pending: list[Pending], opts: ManifestOptions) -> None:
        """The thread: hash the listed files while the agent runs, then store the before-manifest."""
        try:
            # before any hash is taken (no file to hash, no hash to keep: no look at every process's maps)
            if self.keep_hashes and self._memo is not None and pending:
                paths, inodes = writable_mappings(before.roots)
                self._memo.never((as_text(p) for p in paths), inodes)
                pending = self._from_cache(pending, self._memo)
                before.cached = len(self._cached)
            hash_pending(pending, opts, keeper=self._keep)
        except Exception as exc:  # a failure costs hashes, never the run
            log.warning("hashing the workspace failed: %s", exc)
            before.notes.append(f"hashing stopped: {exc}")
        if self._kept_full:
            before.notes.append(
                f"kept the old content of text files only up to {self.max_kept_bytes} bytes in all: "
                "later files get no unified diff"
            )
        try:
            self._write(MANIFEST_BEFORE, encode_manifest(before))
        except OSError as exc:
            log.warning("cannot write %s: %s", MANIFEST_BEFORE, exc)

    def _from_cache(self, pending: list[Pending], memo: HashMemo) -> list[Pending]:
        """Give the listed files whose stat the sealed entries of the previous run know their hash
        (and that the memo trusts: settled, on a file system that keeps ctime, not mapped for
        writing); the others are left to hash."""
        cache = self._cache
        if cache is None or not len(cache):
            return pending
        matched = cache.matches((fe.path, st) for fe, _, st in pending)
        taken = memo.adopt(matched)
        if not taken:
            return pending
        rest: list[Pending] = []
        cached = self._cached
        for item in pending:
            fe, disk_path, st = item
            sha = taken.get(fe.path)
            # the entry's stat, not only its text name, is this file's (another name can read the same)
            if sha is None or matched[fe.path][0] != stat_key(st):
                rest.append(item)
            else:
                fe.sha256 = cached[disk_path] = sha
        return rest

    def _old_content(self, path: str) -> bytes | None:
        """The content a file had before the run, by its path on disk (an fs string)."""
        kept = self._kept.get(path)
        if kept is None and self._cache is not None and path in self._cached:
            kept = self._cache.content(self._cached[path])
        return kept

    def _on_file_change(self, ev: Event) -> None:
        if self._outside is not None:
            self._outside.feed(ev, lambda: self._command(ev.pid))

    def _command(self, pid: int) -> str | None:
        info = self._ctx.procs.procs.get(pid) if self._ctx is not None else None
        return info.command_line if info is not None else None

    file_write = file_create = file_delete = file_rename = file_link = file_symlink = _on_file_change
    file_chmod = file_chown = file_mkdir = file_truncate = _on_file_change

    def done(self, ctx: RunContext) -> None:
        if self._hasher is not None:
            self._hasher.join()
        if self.before is None:
            return
        opts = self._options(self._rules)
        opts.keep_text_max = 0
        opts.reuse = self._reusable()
        if self._cache is None and self._made_files():  # an empty workspace the run filled: for the next run
            self._cache = WorkspaceCache(self.store_root or "", self.before.roots)
            self._cache.check()
        saver = _Saver(self) if self._cache is not None else None
        if saver is not None:  # what the next run may take unread: noted as the after-walk hashes
            opts.remember, opts.keep_text_max = saver.memo, self.max_diff_bytes
        self.after, _ = build_manifest(self.roots, opts, keeper=saver.keep if saver is not None else None)
        if opts.reuse is not None:
            log.debug("after-manifest: %d of %d hashes kept unread", opts.reuse.reused, len(self.after.files))
        changes = diff_manifests(
            self.before, self.after, old_content=self._old_content, max_diff_bytes=self.max_diff_bytes,
            max_run_diff_bytes=self.max_run_diff_bytes,
        )
        if self._outside is not None:
            changes.outside_writes = self._outside.result()
        self.changes = changes
        try:
            self._write(MANIFEST_AFTER, encode_manifest(self.after))
            stored, patch = stored_form(changes)
            self._write(PATCH, patch)
            self._write(CHANGES, stored)
        except OSError as exc:  # a full disk: one line, and the run is marked evidence-incomplete
            line = f"{exc.strerror or exc}: {exc.filename or self.evidence_dir}"
            ctx.evidence_failures.append(line)
            sys.stderr.write(f"spyglass: cannot write the workspace evidence ({line}); "
                             "the run will be marked evidence-incomplete\n")
        ctx.note_fact("workspace_changes", summary(changes))
        if saver is not None:
            saver.save(ctx.run_id)
        self._kept.clear()
        if self._cache is not None:
            self._cache.close()


    def _made_files(self) -> bool:
        """An empty workspace (no cache opened at the start) in which the run may have made files whose
        hashes the next run can take unread: the capture saw a change inside it (or could not name them
        all).  A run that changed nothing there leaves the store's entries as they are (no look at every
        process's mappings, no sealing of an empty set)."""
        if not (self.use_cache and self.keep_hashes and self.store_root is not None):
            return False
        if self.before is None or self.before.files:
            return False  # a workspace with files opened the cache at the start (or chose not to)
        outside = self._outside
        return outside is None or outside.inside_overflow or bool(outside.inside_paths)

    def _reusable(self) -> HashMemo | None:
        """The hashes the after-manifest may keep: never those of files the capture saw changed."""
        memo, outside = self._memo, self._outside
        if not self.keep_hashes or memo is None or outside is None or outside.inside_overflow:
            return None  # the changed files are not all named: every file is read again
        memo.forget(outside.inside_paths)
        return memo


class _Saver:
    """The after-walk's hashes and small text contents, sealed for the next run (best effort)."""

    def __init__(self, sink: WorkspaceEvidence) -> None:
        self.sink = sink
        # files mapped shared and writable now may change without a change of times: never kept
        roots = sink.before.roots if sink.before is not None else sink.roots  # resolved, as /proc names them
        paths, self.mapped_inodes = writable_mappings(roots)
        self.mapped = {as_text(p) for p in paths}
        self.memo = HashMemo(time.time_ns(), sink.racy_margin_ns)
        self.kept: dict[str, bytes] = {}
        self.left = sink.max_kept_bytes

    def keep(self, path: str, content: bytes) -> None:
        if len(content) <= self.left and b"\0" not in content[:8192]:
            self.kept[path] = content
            self.left -= len(content)

    def save(self, tag: str) -> None:
        sink, cache = self.sink, self.sink._cache
        if cache is None or sink.after is None or sink.before is None:
            return
        entries = self.memo.known()
        for path in self.mapped:
            entries.pop(path, None)
        if self.mapped_inodes:  # mapped under another name (a hard link outside the workspace)
            entries = {p: e for p, e in entries.items() if e[0][1] not in self.mapped_inodes}

        before, after = sink.before, sink.after

        def contents() -> dict[str, bytes]:  # the small text files read by this run, by sha256
            found: dict[str, bytes] = {}
            for files, kept in ((before.files, sink._kept), (after.files, self.kept)):
                for f in files:
                    data = kept.get(f.disk_path())
                    if data is not None and f.sha256 is not None:
                        found[f.sha256] = data
            return found

        try:
            cache.save(entries, contents, tag, sink.max_kept_bytes)
        except OSError as exc:  # the next run reads every file: never the run's evidence
            log.debug("cannot keep the workspace's hashes: %s", exc)


def summary(changes: WorkspaceChanges) -> dict[str, Any]:
    return {
        "added": len(changes.added),
        "removed": len(changes.removed),
        "modified": len(changes.modified),
        "outside_writes": len(changes.outside_writes),
        "complete": changes.complete,
    }


def load_workspace_changes(run_dir: Path) -> WorkspaceChanges | None:
    """The stored changes of a run (``changes.json``), or a diff of its stored manifests
    (without unified diffs), or None when the run has no workspace evidence."""
    from spyglass.evidence.changes import read_changes
    from spyglass.evidence.manifest import read_manifest

    evdir = run_dir / "evidence"
    try:
        return read_changes(evdir / CHANGES)
    except FileNotFoundError:
        pass
    before, after = read_manifest(evdir / MANIFEST_BEFORE), read_manifest(evdir / MANIFEST_AFTER)
    if before is None or after is None:
        return None
    changes = diff_manifests(before, after, new_content=lambda p: None)
    changes.notes.append("rebuilt from the stored manifests: no unified diffs")
    return changes
