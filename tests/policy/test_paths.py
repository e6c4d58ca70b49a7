"""Path globs (secrets, trusted programs, rule `glob` values) and directory sets."""

from __future__ import annotations

import pytest

from spyglass.policy.paths import DirSet, compile_globs, expand_home


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
