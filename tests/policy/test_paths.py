"""Path globs (secrets, trusted programs, rule `glob` values) and directory sets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spyglass.analysis.normalize import GlobSet as NormalizeGlobs
from spyglass.evidence.ignore import GitIgnore
from spyglass.evidence.ignore import GlobSet as ExcludeGlobs
from spyglass.policy import PolicyError, parse_policy
from spyglass.policy.paths import DirSet, GlobError, check_glob, compile_globs, expand_home, glob_to_regex


@pytest.mark.parametrize(("glob", "path", "hit"), [
    ("~/.ssh/**", "/home/u/.ssh", True),
    ("~/.ssh/**", "/home/u/.ssh/keys/id_rsa", True),
    ("~/.ssh/*.pub", "/home/u/.ssh/id_rsa.pub", True),
    ("~/.ssh/*.pub", "/home/u/.ssh/sub/id_rsa.pub", False),
    ("**/.env", "/srv/app/.env", True),
    (".env.*", "/srv/app/.env.local", True),  # no leading / or ~: any depth
    ("/etc/ssh/ssh_host_*_key", "/etc/ssh/ssh_host_ed25519_key", True),
    ("/etc/ssh/ssh_host_*_key", "/etc/ssh/ssh_host_ed25519_key.pub", False),
    ("/var/log/[!a]*", "/var/log/syslog", True),
    ("/var/log/[!a]*", "/var/log/auth.log", False),
    ("/tmp/?", "/tmp/x", True),
    ("/tmp/?", "/tmp/xy", False),
    ("~/dir/", "/home/u/dir/a/b", True),  # "dir/" is "dir/**": the directory and all below
    ("~/dir/", "/home/u/dir", True),
    ("~/dir/", "/home/u/dirx/a", False),
    ("/x/[\\]]y", "/x/]y", True),
    ("/x/a\\*b", "/x/a*b", True),
    ("/x/a\\*b", "/x/axb", False),
])
def test_globs(glob: str, path: str, hit: bool) -> None:
    assert (compile_globs([glob], "/home/u").fullmatch(path) is not None) is hit


def test_home_is_the_runs_home() -> None:
    assert expand_home("~/.aws/**", "/home/agent/") == "/home/agent/.aws/**"
    assert expand_home("~", "/h") == "/h" and expand_home("~other/x", "/h") == "~other/x"
    assert compile_globs([], "/h").fullmatch("/anything") is None
    assert compile_globs(["/TMP/*"], None, cased=False).fullmatch("/tmp/X") is not None


def test_dirset() -> None:
    ds = DirSet(["/home/u/project/", "/tmp"])
    assert "/home/u/project" in ds and "/home/u/project/a/b" in ds and "/tmp/x" in ds
    assert "/home/u/projectx" not in ds and "/home/u" not in ds and None not in ds
    assert "/anything" in DirSet(["/"]) and not DirSet([])


@pytest.mark.parametrize(("glob", "col"), [("[]]x", 1), ("a[b", 2), ("/x/[z-a]", 1), ("[!]", 1)])
def test_a_bad_pattern_is_named_with_its_column(glob: str, col: int) -> None:
    err = check_glob(glob)
    assert isinstance(err, GlobError) and err.col == col
    with pytest.raises(GlobError):
        glob_to_regex(glob)


def test_a_bad_pattern_stops_the_policy_with_file_line_col(tmp_path: Path) -> None:
    text = "secrets:\n  - \"~/ok/\"\n  - \"[]]x\"\nanalysis:\n  ignore_paths: [\"a[b\"]\n"
    with pytest.raises(PolicyError) as err:
        parse_policy(text, "spyglass.yaml", base_dir=str(tmp_path))
    places = [(e.line, e.col) for e in err.value.errors]
    assert places == [(3, 5), (5, 18)]
    assert "secrets[1]: bad path pattern '[]]x'" in err.value.errors[0].message


def test_every_reader_of_policy_paths_speaks_the_same_dialect() -> None:
    """manifest excludes (relative to a workspace), analysis paths (normalized) and
    secrets read `dir/`, `dir/**` and `*` alike."""
    excl = ExcludeGlobs(["build/", "dist/**", "*.pyc"])
    assert excl.match("build/x/y") and excl.match("dist/a") and excl.match("pkg/m.pyc")
    assert excl.match("build", is_dir=True) and excl.match("dist", is_dir=True)
    norm = NormalizeGlobs(["~/cache/", "build/**", "*.pyc"])
    assert norm.match("<HOME>/cache/x") and norm.match("<WS>/build/a") and norm.match("<WS>/pkg/m.pyc")
    assert compile_globs(["~/cache/"], "/h").fullmatch("/h/cache/x")


def test_gitignore_keeps_gits_reading_of_a_trailing_globstar(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("logs/**\n!logs/keep.txt\n[]]bad\n")
    gi = GitIgnore()
    gi.add_file(tmp_path / ".gitignore", "")
    assert not gi.ignored("logs", True)  # git: what is below logs, not logs itself
    assert gi.ignored("logs/a.txt", False) and not gi.ignored("logs/keep.txt", False)
    assert len(gi.rules) == 2  # the unreadable pattern is skipped, as git does
    assert re.fullmatch(glob_to_regex("logs/**", dir_itself=False), "logs") is None
