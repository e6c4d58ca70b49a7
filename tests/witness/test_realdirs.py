"""Real paths of directories from their parents' agree with ``os.path.realpath``."""

from __future__ import annotations

import os
from pathlib import Path

from spyglass.witness.realdirs import real_dir


def test_real_dirs_agree_with_realpath_and_look_once_per_directory(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "abs").symlink_to(tmp_path / "a")
    (tmp_path / "c" / "rel").symlink_to("../a/b")
    (tmp_path / "loop").symlink_to("loop")
    reals: dict[str, str] = {}
    names = ["c/abs/b", "c/rel", "c/rel/not/there", "none/x", "c/abs", "loop/x", "a/b", "c/abs/b/../b"]
    for p in names:
        d = os.path.normpath(tmp_path / p)
        assert real_dir(d, reals) == os.path.realpath(d), p
    assert reals[str(tmp_path / "c" / "abs")] == str(tmp_path / "a")  # noted on the way
    assert real_dir("/", reals) == "/"


def test_the_cap_empties_the_memo(tmp_path: Path) -> None:
    reals: dict[str, str] = {}
    for i in range(5):
        (tmp_path / str(i)).mkdir()
        real_dir(str(tmp_path / str(i)), reals, cap=3)
    assert len(reals) <= 3
