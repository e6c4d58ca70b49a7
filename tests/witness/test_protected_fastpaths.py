"""The witness's fast paths (spyglass/witness/protected.py), each against the slow form it skips.

``normal``: ``os.path.normpath`` without its work on a path that is normal already.  ``which`` calls
``writers`` only for names under ``_PER_PROCESS``: ``writers`` leaves every other name as it is."""

from __future__ import annotations

import itertools
import os

from spyglass.witness.protected import _DEV_FDS, _PER_PROCESS, normal, writers

PARTS = ["", "/", "//", "///", ".", "..", "a", ".a", "a.", "..a", "a..", "...", "b c", "é", "a/", "/a", "./", "../"]


def test_normal_is_normpath() -> None:
    names = {"/", "//", "///", "/a/b", "/a/./b", "/a/../b", "/a/b/", "//a/b", "/a//b", "/.", "/..", "/.git/x",
             "/a/.hidden", "/a/b/..", "/a/b/.", "a/b", "./a", "../a", "a", "", ".", "/proc/self/fd/3",
             "/dev/fd/3/../x", "/a/b.c/d..e", "/a/...", "/a/.../b"}
    names.update("".join(p) for p in itertools.product(PARTS, repeat=3))
    names.update("/" + "".join(p) for p in itertools.product(PARTS, repeat=3))
    for name in sorted(names):
        assert normal(name) == os.path.normpath(name), repr(name)


def test_writers_changes_no_name_outside_the_per_process_places() -> None:
    assert all(alias.startswith(_PER_PROCESS) for alias, _ in _DEV_FDS)
    names = ["/dev/fd", "/dev/fd/3", "/dev/fd/3/x", "/dev/fdx", "/dev/stdin", "/dev/stdout", "/dev/stderr",
             "/dev/stdio", "/dev/shm/ws/a", "/dev/null", "/dev/", "/dev", "/proc/self/fd/3", "/proc/self",
             "/proc/thread-self/root/etc", "/proc/1/root/x", "/proc/999999999/root/etc/passwd", "/procx/self",
             "/home/u/.ssh/id_rsa", "/", "/tmp/dev/fd/3", "/etc/proc/self"]
    for name in names:
        out = writers(name, 424242)
        if not name.startswith(_PER_PROCESS):
            assert out == name, name
    assert writers("/dev/fd/3", 7) == "/proc/7/fd/3" and writers("/dev/shm/x", 7) == "/dev/shm/x"
