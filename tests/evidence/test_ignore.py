"""Exclude globs and .gitignore rules for manifests."""

from __future__ import annotations

from pathlib import Path

import pytest

from spyglass.evidence.ignore import GitIgnore, GlobSet


@pytest.mark.parametrize(
    ("pattern", "path", "is_dir", "hit"),
    [
        (".git/objects/**", ".git/objects/ab/cd", False, True),
        (".git/objects/**", ".git/objects", True, True),
        (".git/objects/**", ".git/HEAD", False, False),
        ("**/node_modules/**", "web/node_modules/x/y.js", False, True),
        ("**/node_modules/**", "node_modules", True, True),
        ("node_modules/**", "web/node_modules/x.js", False, False),  # anchored: has a '/'
        ("*.pyc", "a/b/c.pyc", False, True),
        ("*.pyc", "a/b/c.py", False, False),
        ("build", "sub/build", True, True),
        ("/build", "sub/build", True, False),
        ("data/*.csv", "data/a.csv", False, True),
        ("data/*.csv", "data/x/a.csv", False, False),
        ("file[0-9].txt", "file7.txt", False, True),
    ],
)
def test_globs(pattern: str, path: str, is_dir: bool, hit: bool) -> None:
    assert (GlobSet([pattern]).match(path, is_dir) is not None) is hit


def test_gitignore_rules(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("# comment\n\n*.log\n!keep.log\nbuild/\n/top.txt\ndocs/**/*.tmp\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("local.txt\n!important.log\n")
    gi = GitIgnore()
    gi.add_file(tmp_path / ".gitignore", "")
    gi.add_file(tmp_path / "sub" / ".gitignore", "sub")
    cases = {
        ("a.log", False): True,
        ("keep.log", False): False,
        ("x/build", True): True,
        ("x/build", False): False,  # dir-only rule
        ("top.txt", False): True,
        ("x/top.txt", False): False,
        ("docs/a/b/c.tmp", False): True,
        ("sub/local.txt", False): True,
        ("local.txt", False): False,
        ("sub/important.log", False): False,
    }
    for (path, is_dir), want in cases.items():
        assert gi.ignored(path, is_dir) is want, path
    assert gi.files == [".gitignore", "sub/.gitignore"]


def test_each_patterns_regex_compiles_only_when_one_matches_and_a_bad_glob_is_refused_at_once() -> None:
    from spyglass.policy.paths import GlobError

    globs = GlobSet(["*.pyc", "build/**"])
    assert globs.match("src/a.py") is None and globs._each is None  # the combined test said no
    assert globs.match("build", is_dir=True) == "build/**" and globs._each is not None
    with pytest.raises(GlobError):
        GlobSet(["ok/*", "bad/[z-a]"])
