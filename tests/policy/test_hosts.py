"""Host patterns of network.allow / network.deny."""

from __future__ import annotations

import pytest

from spyglass.policy.hosts import HostMatcher, parse_host_pattern


@pytest.mark.parametrize(("pattern", "domain", "address", "port", "hit"), [
    ("pypi.org", "PyPI.org.", None, 443, True),
    ("pypi.org", "files.pypi.org", None, 443, False),
    ("*.github.com", "api.github.com", None, 443, True),
    ("*.github.com", "github.com", None, 443, False),
    ("*", "anything.example", None, 1, True),
    ("10.0.0.0/8", None, "10.1.2.3", 80, True),
    ("10.0.0.0/8", "ten.example", "11.0.0.1", 80, False),
    ("::1", None, "::1", 80, True),
    ("127.0.0.0/8", None, "::ffff:127.0.0.1", 80, True),  # v4-mapped v6
    ("pypi.org:443", "pypi.org", None, 80, False),
    ("host.example:8000-8099", "host.example", None, 8042, True),
    ("[::1]:8080", None, "::1", 8080, True),
    ("[::1]:8080", None, "::1", 8081, False),
])
def test_patterns(pattern: str, domain: str | None, address: str | None, port: int, hit: bool) -> None:
    assert parse_host_pattern(pattern).matches(domain, address, port) is hit


@pytest.mark.parametrize(("pattern", "message"), [
    ("", "empty host pattern"),
    ("bad host!", "bad host name"),
    ("a.com:99999", "bad port"),
    ("10.0.0.0/40", "bad CIDR"),
    ("[::1", "unclosed"),
])
def test_bad_patterns(pattern: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_host_pattern(pattern)


def test_deny_wins_over_allow() -> None:
    m = HostMatcher(["*.example.com", "127.0.0.0/8"], ["evil.example.com"])
    assert m.allowed("api.example.com", "1.2.3.4", 443)
    assert not m.allowed("evil.example.com", "1.2.3.4", 443) and m.denied("evil.example.com", None, 443)
    assert m.allowed(None, "127.0.0.1", 5432) and not m.allowed(None, "8.8.8.8", 53)
