"""The witness's fast paths (spyglass/witness/protected.py), each against the slow form it skips.

``which`` calls ``writers`` only for names under ``_PER_PROCESS``: ``writers`` leaves every other name as
it is.  ``_in_tree`` answers None at once for a name below no tree: the same as its loop over the trees.
The guard's ``_made_anew`` is memoised."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from spyglass.witness.protected import _DEV_FDS, _PER_PROCESS, Protected, writers


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


def _slow_in_tree(prot: Protected, p: str) -> str | None:
    for root, what in prot.trees.items():
        if p == root or p.startswith(root.rstrip("/") + "/"):
            return what
    return None


def test_in_tree_is_the_loop_over_the_trees(tmp_path: Path) -> None:
    prot = Protected()
    names = ["/", "/a", "/a/b", "/ab", "/a/bc", "/a/b/c/d", "/x/y", "/x", "/x/y/../z", "/etc/spyglass",
             "/etc/spyglass/policy.yaml", "/etc/spyglassx", str(tmp_path), str(tmp_path / "s" / "t")]
    steps = [("/a/b", "tree b"), ("/x/y", "tree y"), ("/a/b", "tree b again"), ("/etc/spyglass/", "etc"),
             (str(tmp_path / "s"), "tmp s"), ("/", "root")]
    for root, what in steps:  # the trees grow (and a name's ``what`` changes) between the looks
        for name in names:
            assert prot._in_tree(name) == _slow_in_tree(prot, name), (root, name)
        prot.trees[root] = what
    for name in names:
        assert prot._in_tree(name) == _slow_in_tree(prot, name), name
    for p, what in itertools.product(names, ["store"]):  # through follow_rename, as a run adds them
        prot.follow_rename(p, p + ".moved", what)
        assert prot._in_tree(p + ".moved/f") == _slow_in_tree(prot, p + ".moved/f")
    assert os.sep == "/"


def test_made_anew_memo_gives_what_the_function_gives() -> None:
    """The guard's ``_made_anew`` is memoised (spyglass/witness/guard.py): the same answers."""
    from spyglass.witness.guard import _made_anew

    types = ["file.create", "file.mkdir", "file.write", "file.chmod", "file.rename"]
    flags = [None, "", "O_WRONLY|O_CREAT|O_EXCL", "O_CREAT|O_EXCL|O_TMPFILE", "O_WRONLY|O_CREAT", "O_EXCL",
             "O_RDWR|O_CREAT|O_EXCL|O_CLOEXEC", "O_WRONLY|O_CREAT|O_EXCLX", "XO_CREAT|O_EXCL"]
    for _ in range(2):
        for t, f in itertools.product(types, flags):
            assert _made_anew(t, f) == _made_anew.__wrapped__(t, f), (t, f)
    assert _made_anew("file.create", "O_WRONLY|O_CREAT|O_EXCL") and not _made_anew("file.create", "O_WRONLY|O_CREAT")
