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


def _rule_by_rule(gi: GitIgnore, rel: str, is_dir: bool) -> bool:
    """git's reading, one rule after the other: the last rule that matches decides."""
    hit = False
    for rule in gi.rules:
        if rule.dir_only and not is_dir:
            continue
        if rule.base and not rel.startswith(rule.base + "/"):
            continue
        sub = rel[len(rule.base) + 1 :] if rule.base else rel
        if rule.regex.fullmatch(sub):
            hit = not rule.negate
    return hit


def test_the_combined_rules_of_each_file_decide_as_rule_by_rule(tmp_path: Path) -> None:
    """Each ignore file's rules are one regex (the last matching rule wins); the answers are the
    rule-by-rule ones for every path of a tree of names that hit rules, negations, dir-only rules,
    anchored and nested rules, in files at several depths."""
    import itertools

    texts = {
        "": "*.log\n!keep.log\nbuild/\n/top.txt\ndocs/**/*.tmp\n*.py[cod]\n!b/*.pyc\nlib/\n!lib/\n",
        "a": "local.txt\n!important.log\n*.tmp\n!x.tmp\ncache/\n/anch\n",
        "a/b": "!*.log\nsecret*\n**/deep/\n?.txt\nc/plain.txt\n!s*1\n",
    }
    gi = GitIgnore()
    for base, text in texts.items():
        d = tmp_path / base
        d.mkdir(parents=True, exist_ok=True)
        (d / ".gitignore").write_text(text)
        gi.add_file(d / ".gitignore", base)
    names = ["x.log", "keep.log", "important.log", "build", "top.txt", "local.txt", "x.tmp", "y.tmp",
             "m.pyc", "cache", "anch", "secret1", "secret2", "deep", "lib", "plain.txt", "q.txt", "qq.txt"]
    dirs = ["", "a", "a/b", "a/b/c", "docs/q", "b", "lib", "a/deep"]
    checked = ignored = 0
    for d, name, is_dir in itertools.product(dirs, names, (False, True)):
        rel = f"{d}/{name}" if d else name
        assert gi.ignored(rel, is_dir) is _rule_by_rule(gi, rel, is_dir), (rel, is_dir)
        checked += 1
        ignored += gi.ignored(rel, is_dir)
    assert checked == len(dirs) * len(names) * 2 and 20 < ignored < checked - 20  # both answers, often
    assert all(f.combined for f in gi.by_file)
