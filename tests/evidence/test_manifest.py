"""Walk order keys and exclude globs: the fast forms decide as the plain ones do."""

from __future__ import annotations

import itertools

from spyglass.evidence.ignore import GlobSet
from spyglass.evidence.manifest import DEFAULT_EXCLUDES, walk_key

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
