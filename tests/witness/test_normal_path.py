"""``normal`` (spyglass/witness/protected.py): ``os.path.normpath`` without its work on a path that
is normal already.  Differential: the same answer as ``normpath`` on varied names."""

from __future__ import annotations

import itertools
import os

from spyglass.witness.protected import normal

PARTS = ["", "/", "//", "///", ".", "..", "a", ".a", "a.", "..a", "a..", "...", "b c", "é", "a/", "/a", "./", "../"]


def test_normal_is_normpath() -> None:
    names = {"/", "//", "///", "/a/b", "/a/./b", "/a/../b", "/a/b/", "//a/b", "/a//b", "/.", "/..", "/.git/x",
             "/a/.hidden", "/a/b/..", "/a/b/.", "a/b", "./a", "../a", "a", "", ".", "/proc/self/fd/3",
             "/dev/fd/3/../x", "/a/b.c/d..e", "/a/...", "/a/.../b"}
    names.update("".join(p) for p in itertools.product(PARTS, repeat=3))
    names.update("/" + "".join(p) for p in itertools.product(PARTS, repeat=3))
    for name in sorted(names):
        assert normal(name) == os.path.normpath(name), repr(name)
