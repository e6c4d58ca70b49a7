"""Walk order keys and exclude globs: the fast forms decide as the plain ones do."""

from __future__ import annotations

import hashlib
import itertools
import os
import threading
import time
from pathlib import Path

import pytest

from spyglass.evidence import manifest
from spyglass.evidence.hashmemo import HashMemo
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


def _tree(root: Path, big: int, small: int) -> None:
    """``big`` files above the size that goes to the hashing threads, ``small`` text files below it."""
    for i in range(big):
        (root / f"d{i % 3}").mkdir(exist_ok=True)
        (root / f"d{i % 3}" / f"big{i}.bin").write_bytes(os.urandom(manifest._POOL_MIN + i))
    for i in range(small):
        (root / f"small{i}.txt").write_text(f"line {i}\n")


def _build(root: Path, workers: int, monkeypatch: pytest.MonkeyPatch, **kw: object) -> tuple[object, ...]:
    monkeypatch.setattr(manifest, "_WORKERS", workers)
    monkeypatch.setattr(manifest, "_INLINE", 4)
    kept: list[str] = []
    memo = HashMemo(time.time_ns() + 10**12)  # every stat settled: all noted
    opts = ManifestOptions(keep_text_max=4096, remember=memo, **kw)  # type: ignore[arg-type]
    hashed_by: list[str] = []
    real = manifest.hash_file

    def hash_file(path: str, size: int, max_bytes: int, keep_max: int = 0) -> tuple[object, ...]:
        hashed_by.append(threading.current_thread().name)
        return real(path, size, max_bytes, keep_max)

    monkeypatch.setattr(manifest, "hash_file", hash_file)
    m, _ = build_manifest([root], opts, keeper=lambda p, c: kept.append(p))
    _THREADS[workers] = hashed_by
    return m.files, m.complete, m.last_path, kept, memo.known()


_THREADS: dict[int, list[str]] = {}


def test_the_hashing_threads_give_the_manifest_the_walk_alone_gives(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path, big=12, small=20)
    before = {t.ident for t in threading.enumerate()}
    threaded = _build(tmp_path, 3, monkeypatch)
    assert {t.ident for t in threading.enumerate()} == before  # the threads ended with the walk
    alone = _build(tmp_path, 1, monkeypatch)
    assert threaded == alone
    assert sum(n.startswith("spyglass-hash") for n in _THREADS[3]) == 12 - 4  # the big files after the first 4
    assert not any(n.startswith("spyglass-hash") for n in _THREADS[1])
    assert len(threaded[3]) == 20  # type: ignore[arg-type]  # every small file offered to the keeper
    files = threaded[0]
    assert isinstance(files, list) and len(files) == 32 and all(f.sha256 for f in files)
    big = next(f for f in files if f.path.endswith("big0.bin"))
    assert big.sha256 == hashlib.sha256((tmp_path / "d0" / "big0.bin").read_bytes()).hexdigest()


def test_the_hashing_threads_stop_with_the_walk_at_max_files(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path, big=12, small=0)
    threaded = _build(tmp_path, 3, monkeypatch, max_files=9)
    alone = _build(tmp_path, 1, monkeypatch, max_files=9)
    assert threaded == alone and threaded[1] is False and len(threaded[0]) == 9  # type: ignore[arg-type]
