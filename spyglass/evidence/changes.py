"""What a run changed: the difference between two workspace manifests.

Files are *added*, *removed* or *modified* (content, mode, kind or symlink
target).  Text files up to ``max_diff_bytes`` get a unified diff until the
run's diffs reach ``max_run_diff_bytes`` in all: modified and removed files
first, then added files in path order; past the budget an added file is a
hash entry (its sha256 and size in the after-manifest) and is not even
read.  The old content of a file comes from what was kept when the
before-manifest was taken, the new content from the disk when the
after-manifest is taken.  Files outside the workspace that the events show
written are listed beside.

Stored, each diff is written once: in ``changes.patch``; ``changes.json``
gives each change's length in it (:func:`stored_form`, :func:`attach_patch`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import msgspec

from spyglass.evidence.manifest import CHANGED_NOTE, FileEntry, Manifest, walk_key, walk_keyer
from spyglass.evidence.writes import OutsideWrite

DEFAULT_MAX_DIFF_BYTES = 256 * 1024
#: the diffs of one run in all: past it, changes get a note instead of a diff
DEFAULT_MAX_RUN_DIFF_BYTES = 4 << 20
ADDED_NOTE = "no diff: an added file past the run's diff budget: its sha256 is in manifest-after.json"


class Change(msgspec.Struct, omit_defaults=True, kw_only=True):
    path: str  # relative to its workspace root
    abs_path: str
    status: str  # added | removed | modified
    what: list[str] = msgspec.field(default_factory=list)  # content, mode, kind, target
    before: FileEntry | None = None
    after: FileEntry | None = None
    diff: str | None = None  # unified diff
    diff_note: str | None = None  # why there is no diff
    #: stored runs: the diff is in changes.patch only, this many bytes of it (changes in path order)
    diff_bytes: int | None = None


class WorkspaceChanges(msgspec.Struct, kw_only=True):
    version: int = 1
    roots: list[str] = msgspec.field(default_factory=list)
    added: list[Change] = msgspec.field(default_factory=list)
    removed: list[Change] = msgspec.field(default_factory=list)
    modified: list[Change] = msgspec.field(default_factory=list)
    outside_writes: list[OutsideWrite] = msgspec.field(default_factory=list)
    complete: bool = True  # both manifests listed every file
    notes: list[str] = msgspec.field(default_factory=list)
    files_before: int = 0
    files_after: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.modified)

    def all_changes(self) -> list[Change]:
        return sorted([*self.added, *self.removed, *self.modified], key=lambda c: c.path)

    def patch(self) -> str:
        """Every unified diff, in path order: a patch file."""
        return "".join(c.diff for c in self.all_changes() if c.diff)


#: content of a file by its absolute path on disk (an fs string: :meth:`FileEntry.disk_path`, never the
#: text form, which another file may bear), or None when it was not kept / cannot be read
ContentSource = Callable[[str], bytes | None]


def is_text(data: bytes) -> bool:
    if b"\0" in data[:8192]:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def unified_diff(rel: str, old: bytes | None, new: bytes | None) -> str:
    """A git-style unified diff of two text contents (None: the file does not exist on that side)."""
    a_text, b_text = (old or b"").decode("utf-8"), (new or b"").decode("utf-8")
    fromfile = "/dev/null" if old is None else f"a/{rel}"
    tofile = "/dev/null" if new is None else f"b/{rel}"
    if (not a_text or not b_text) and only_newlines(a_text or b_text):
        return _whole_file(a_text, b_text, fromfile, tofile)
    a, b = a_text.splitlines(keepends=True), b_text.splitlines(keepends=True)
    out: list[str] = []
    for line in _one_sided(a, b, fromfile, tofile) if not a or not b else _difflib(a, b, fromfile, tofile):
        if line.startswith(("---", "+++")):
            out.append(line.rstrip("\n") + "\n")
        elif line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + NO_NEWLINE)
    return "".join(out)


NO_NEWLINE = "\n\\ No newline at end of file\n"
#: line breaks of str.splitlines other than "\n": those in ASCII, and the others
_ASCII_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e"
_OTHER_BREAKS = "\x85\u2028\u2029"


def only_newlines(text: str) -> bool:
    """Whether "\n" is the only line break ``str.splitlines`` finds in ``text``.  A search for each
    character alone (memchr) instead of one regular expression of all: 22x faster on the standard
    library's sources (``benchmarks/bench_evidence.py --only newlines``; a run adding files diffs
    them all, up to its budget)."""
    if any(ch in text for ch in _ASCII_BREAKS):
        return False
    return text.isascii() or not any(ch in text for ch in _OTHER_BREAKS)


def _whole_file(a_text: str, b_text: str, fromfile: str, tofile: str) -> str:
    """:func:`unified_diff` of an added or removed file whose lines all end in "\\n" (but maybe the
    last): the same text, made with string operations instead of line by line."""
    text, sign = (b_text, "+") if b_text else (a_text, "-")
    if not text:
        return ""
    ends = text.endswith("\n")
    core = text[:-1] if ends else text
    count = core.count("\n") + 1
    span = f"1,{count}" if count > 1 else "1"
    hunk = f"@@ -0,0 +{span} @@\n" if sign == "+" else f"@@ -{span} +0,0 @@\n"
    head = f"--- {fromfile}".rstrip("\n") + "\n" + f"+++ {tofile}".rstrip("\n") + "\n"
    body = sign + core.replace("\n", "\n" + sign) + ("\n" if ends else NO_NEWLINE)
    return head + hunk + body


def _difflib(a: list[str], b: list[str], fromfile: str, tofile: str) -> Iterator[str]:
    import difflib  # only when there is a diff to show (not at every run's start)

    return difflib.unified_diff(a, b, fromfile, tofile, n=3)


def _one_sided(a: list[str], b: list[str], fromfile: str, tofile: str) -> Iterator[str]:
    """What difflib's unified diff gives when one side is empty (an added or removed file: one hunk
    of every line), without its sequence matcher (which indexes every line of the other side)."""
    if not a and not b:
        return
    yield f"--- {fromfile}\n"
    yield f"+++ {tofile}\n"
    lines, sign = (b, "+") if b else (a, "-")
    span = f"1,{len(lines)}" if len(lines) > 1 else "1"
    yield f"@@ -0,0 +{span} @@\n" if b else f"@@ -{span} +0,0 @@\n"
    for line in lines:
        yield sign + line


def _entry_changes(a: FileEntry, b: FileEntry) -> list[str]:
    what: list[str] = []
    if a.kind != b.kind:
        what.append("kind")
    if a.kind == "file" and b.kind == "file":
        if a.note == CHANGED_NOTE:
            what.append("content")  # it changed after the listing: known, whatever its times say
        elif a.sha256 is None or b.sha256 is None:
            if a.size != b.size or a.mtime_ns != b.mtime_ns:
                what.append("content")
        elif a.sha256 != b.sha256:
            what.append("content")
    if a.target != b.target or _raw_target(a) != _raw_target(b):
        what.append("target")
    if a.mode != b.mode:
        what.append("mode")
    return what


def _raw_target(e: FileEntry) -> str | None:
    return e.raw_bytes.get("target") if e.raw_bytes else None


class _Budget:
    """The bytes of diff a run may still store."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.left = total


def _spent(change: Change, budget: _Budget) -> str:
    if change.status == "added":
        return ADDED_NOTE
    return f"no diff: the run's diffs reached {budget.total} bytes (evidence.max_run_diff_bytes)"


def _diff_for(change: Change, old: ContentSource, new: ContentSource, max_bytes: int, budget: _Budget) -> None:
    if "content" not in change.what and change.status == "modified":
        return
    if budget.left <= 0:
        change.diff_note = _spent(change, budget)
        return
    sides: list[bytes | None] = []
    missing = False
    for entry, source in ((change.before, old), (change.after, new)):
        if entry is None:
            sides.append(None)
            continue
        if entry.kind != "file":
            change.diff_note = f"no diff: {entry.kind}"
            return
        if entry.size > max_bytes:
            change.diff_note = f"no diff: larger than {max_bytes} bytes (evidence.max_diff_bytes)"
            return
        data = source(entry.disk_path())
        if data is None:
            missing = True
            sides.append(None)
            continue
        if entry.sha256 is not None and hashlib.sha256(data).hexdigest() != entry.sha256:
            change.diff_note = "no diff: the file changed again while it was read"
            return
        if not is_text(data):
            change.diff_note = "no diff: binary"
            return
        sides.append(data)
    if missing:
        change.diff_note = "no diff: content not available"
        return
    diff = unified_diff(change.path, sides[0], sides[1]) or None
    if diff is not None and len(diff) > budget.left:
        budget.left = 0
        change.diff_note = _spent(change, budget)
        return
    change.diff = diff
    budget.left -= len(diff or "")


def diff_manifests(
    before: Manifest,
    after: Manifest,
    *,
    old_content: ContentSource | None = None,
    new_content: ContentSource | None = None,
    max_diff_bytes: int = DEFAULT_MAX_DIFF_BYTES,
    max_run_diff_bytes: int = DEFAULT_MAX_RUN_DIFF_BYTES,
) -> WorkspaceChanges:
    """Compare two manifests of the same roots; unified diffs where contents are available."""
    budget = _Budget(max_run_diff_bytes)
    roots = after.roots or before.roots
    res = WorkspaceChanges(roots=roots, files_before=len(before.files), files_after=len(after.files))
    a, b = before.by_path(), after.by_path()
    limit: tuple[int, str] | None = None
    if not before.complete or not after.complete:
        res.complete = False
        ends = [walk_key(m.last_path or "", roots) for m in (before, after) if not m.complete]
        limit = min(ends)
        cut = min(
            (m.last_path or "" for m in (before, after) if not m.complete), key=lambda p: walk_key(p, roots)
        )
        res.notes.append(f"a manifest stopped at evidence.max_files: changes are compared only up to {cut}")
    if before.roots != after.roots:
        res.notes.append(f"the roots differ: before {before.roots}, after {after.roots}")
    for note in (*before.notes, *after.notes):
        if note not in res.notes:
            res.notes.append(note)
    old = old_content or (lambda p: None)
    new = new_content or _read_disk
    if limit is None and _same_paths(before.files, after.files):
        # the same files in the same (walk) order, the common case: compared pairwise, no sort
        for fa, fb in zip(before.files, after.files, strict=True):
            if (fa != fb or fa.note == CHANGED_NOTE) and (what := _entry_changes(fa, fb)):
                ch = Change(path=after.rel(fa.path), abs_path=fa.path, status="modified", what=what,
                            before=fa, after=fb)
                _diff_for(ch, old, new, max_diff_bytes, budget)
                res.modified.append(ch)
        return res
    # in walk order: the manifests list their files in that order already, so the sort has little to do;
    # files are told apart by their names on disk, shown (and ordered) by their text
    paths = {p: e.path for p, e in b.items()}
    paths.update((p, e.path) for p, e in a.items() if p not in b)
    keyer = walk_keyer(roots)
    keyed = sorted([(keyer(shown), shown, p) for p, shown in paths.items()])
    for key, path, disk in keyed:
        if limit is not None and key > limit:
            continue
        ea, eb = a.get(disk), b.get(disk)
        if ea is None and eb is not None:
            ch = Change(path=after.rel(path), abs_path=path, status="added", what=["content"], after=eb)
            res.added.append(ch)
        elif eb is None and ea is not None:
            ch = Change(path=before.rel(path), abs_path=path, status="removed", what=["content"], before=ea)
            _diff_for(ch, old, new, max_diff_bytes, budget)
            res.removed.append(ch)
        elif ea is not None and eb is not None:
            what = _entry_changes(ea, eb)
            if what:
                ch = Change(path=after.rel(path), abs_path=path, status="modified", what=what, before=ea, after=eb)
                _diff_for(ch, old, new, max_diff_bytes, budget)
                res.modified.append(ch)
    for ch in res.added:  # what the budget leaves (a mass of new files costs a hash each, no more)
        _diff_for(ch, old, new, max_diff_bytes, budget)
    return res


def _same_paths(a: list[FileEntry], b: list[FileEntry]) -> bool:
    return len(a) == len(b) and all(
        x.path == y.path and ((x.raw_bytes is None and y.raw_bytes is None) or x.disk_path() == y.disk_path())
        for x, y in zip(a, b, strict=True)
    )


def _read_disk(path: str) -> bytes | None:
    try:
        return Path(path).read_bytes()
    except OSError:
        return None


def content_from(mapping: Mapping[str, bytes]) -> ContentSource:
    return mapping.get


_enc = msgspec.json.Encoder(order="sorted")
_dec = msgspec.json.Decoder(WorkspaceChanges)


def encode_changes(c: WorkspaceChanges) -> bytes:
    return msgspec.json.format(_enc.encode(c), indent=1) + b"\n"


def decode_changes(data: bytes) -> WorkspaceChanges:
    return _dec.decode(data)


def stored_form(c: WorkspaceChanges) -> tuple[bytes, bytes]:
    """(changes.json, changes.patch) of the changes: each diff stored once, in the patch."""
    patch = c.patch().encode("utf-8")
    kept = msgspec.structs.replace(c)
    kept.added, kept.removed, kept.modified = ([
        msgspec.structs.replace(ch, diff=None, diff_bytes=len(ch.diff.encode("utf-8")) if ch.diff else None)
        for ch in group
    ] for group in (c.added, c.removed, c.modified))
    return encode_changes(kept), patch


def attach_patch(c: WorkspaceChanges, patch: bytes | None) -> None:
    """Put the diffs of a stored changes.json back from its changes.patch (read by :func:`stored_form`)."""
    at = 0
    for ch in c.all_changes():
        if ch.diff_bytes is None:
            continue
        if patch is None or at + ch.diff_bytes > len(patch):
            ch.diff_note = "no diff: changes.patch is missing or shorter than changes.json says"
        else:
            ch.diff = patch[at : at + ch.diff_bytes].decode("utf-8", "replace")
        at += ch.diff_bytes
        ch.diff_bytes = None


def read_changes(json_path: Path) -> WorkspaceChanges:
    """A stored changes.json with its diffs (from changes.patch beside it)."""
    c = decode_changes(json_path.read_bytes())
    if any(ch.diff_bytes is not None for ch in c.all_changes()):
        try:
            patch: bytes | None = (json_path.parent / "changes.patch").read_bytes()
        except OSError:
            patch = None
        attach_patch(c, patch)
    return c
