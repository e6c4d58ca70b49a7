"""Walk order keys and exclude globs: the fast forms decide as the plain ones do."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from spyglass.evidence.ignore import GlobSet
from spyglass.evidence.manifest import DEFAULT_EXCLUDES, ManifestOptions, build_manifest, walk_key

NAMES = ["a", "a.txt", "a b", "a-b", "a/b", "a/b/c", "a.txt/x", "B", "a/\u00e9", "a!/x", "ab", "a/a.txt"]


def test_walk_keys_order_paths_as_their_components_do() -> None:
    roots = ["/r1", "/r2/"]
    paths = [f"{root.rstrip('/')}/{n}" for root in roots for n in NAMES] + ["/elsewhere/x", "/r1"]

    def components(p: str) -> tuple[int, tuple[str, ...]]:
        for i, root in enumerate(roots):
            prefix = root.rstrip("/") + "/"
            if p.startswith(prefix):
                return i, tuple(p[len(prefix):].split("/"))
        return len(roots), tuple(p.split("/"))

    assert sorted(paths, key=lambda p: walk_key(p, roots)) == sorted(paths, key=components)
    for p, q in itertools.combinations(paths, 2):
        assert (walk_key(p, roots) < walk_key(q, roots)) == (components(p) < components(q))


def test_the_combined_exclude_test_finds_the_first_pattern_the_list_does() -> None:
    patterns = [*DEFAULT_EXCLUDES, "*.pyc", "build/", "docs/**/*.tmp", "/top.txt"]
    globs = GlobSet(patterns)
    plain = GlobSet([])
    plain.patterns, plain._each = globs.patterns, globs._compiled()  # no combined test: each regex in turn
    assert plain._any is None and plain._any_dir is None
    rels = ["x.pyc", "a/b.pyc", "build", "build/x", "docs/a/b.tmp", "docs/x.tmp", "top.txt", "a/top.txt",
            ".git/objects", ".git/objects/ab/cd", ".git/HEAD", "src/__pycache__", "src/__pycache__/m.pyc",
            "node_modules", "a/node_modules/x", "plain.py", ".spyglass", "a/.spyglass"]
    for rel in rels:
        for is_dir in (False, True):
            assert globs.match(rel, is_dir) == plain.match(rel, is_dir), (rel, is_dir)


def test_large_and_small_files_hash_to_their_whole_content_both_ways(tmp_path: Path) -> None:
    """One read for a small file, chunks for a large one, in the listing's deferred hash and in a
    plain walk; a file that grew after its stat is hashed to its end and its content not kept."""
    import hashlib

    from spyglass.evidence.manifest import hash_file, hash_pending, list_manifest

    ws = tmp_path / "ws"
    ws.mkdir()
    contents = {"big.bin": os.urandom(3 << 20) + b"tail", "one.bin": os.urandom(1 << 20), "small.txt": b"x\n"}
    for name, data in contents.items():
        (ws / name).write_bytes(data)
    want = {str(ws / n): hashlib.sha256(d).hexdigest() for n, d in contents.items()}
    m, _ = build_manifest([ws], ManifestOptions())
    assert {f.path: f.sha256 for f in m.files} == want
    opts = ManifestOptions(defer_hash=True)
    listed, _, pending = list_manifest([ws], opts)
    hash_pending(pending, opts)
    assert {f.path: f.sha256 for f in listed.files} == want
    sha, note, kept = hash_file(str(ws / "small.txt"), 1, 1 << 20, keep_max=1024)  # it grew: 2 bytes now
    assert (sha, note, kept) == (hashlib.sha256(b"x\n").hexdigest(), None, None)
    assert hash_file(str(ws / "small.txt"), 2, 1 << 20, keep_max=1024)[2] == b"x\n"
