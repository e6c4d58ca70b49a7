"""Egress decisions by host name, port and address."""

from __future__ import annotations

import pytest

from spyglass.errors import UsageError
from spyglass.sandbox.egress import EgressPolicy, ip_literal

POLICY = EgressPolicy(
    ["allowed.test", "*.github.com", "pypi.org:443", "10.1.0.0/16", "*"], ["denied.test", "evil.github.com"]
)


@pytest.mark.parametrize(
    ("host", "port", "allow", "reason", "rule"),
    [
        ("allowed.test", 443, True, "allowed-by-rule", "allowed.test"),
        ("Allowed.Test.", 80, True, "allowed-by-rule", "allowed.test"),
        ("api.github.com", 443, True, "allowed-by-rule", "*.github.com"),
        ("evil.github.com", 443, False, "denied-by-rule", "evil.github.com"),
        ("denied.test", 443, False, "denied-by-rule", "denied.test"),
        ("1.1.1.1", 443, False, "ip-literal", None),
        ("16843009", 443, False, "ip-literal", None),  # 1.1.1.1 spelled as one number
        ("0x7f.1", 80, False, "ip-literal", None),  # 127.0.0.1 in inet_aton's hex form
        ("[2606:4700::1111]", 443, False, "ip-literal", None),
        ("10.1.2.3", 22, True, "allowed-by-rule", "10.1.0.0/16"),
        ("bad host", 80, False, "bad-host", None),
        ("a..b", 80, False, "bad-host", None),
        ("allowed.test", 0, False, "bad-host", None),
    ],
)
def test_decide(host: str, port: int, allow: bool, reason: str, rule: str | None) -> None:
    d = POLICY.decide(host, port)
    assert (d.allow, d.reason, d.rule) == (allow, reason, rule)


def test_ports_and_subdomains() -> None:
    p = EgressPolicy(["pypi.org:443", "*.example.com", "svc.test:8000-8099"])
    assert p.decide("pypi.org", 443).allow and not p.decide("pypi.org", 80).allow
    assert p.decide("a.b.example.com", 1).allow and not p.decide("example.com", 443).allow
    assert p.decide("svc.test", 8042).allow and not p.decide("svc.test", 9000).allow


def test_nothing_is_allowed_without_allow_entries() -> None:
    assert EgressPolicy().decide("pypi.org", 443).reason == "not-allowed"


def test_resolved_addresses_must_be_public_unless_an_address_entry_allows_them() -> None:
    p = EgressPolicy(["x.test", "10.1.0.0/16"], ["203.0.113.0/24"])
    assert p.check_address("93.184.216.34", 443).allow
    for addr, reason in [
        ("127.0.0.1", "private-address"),
        ("10.2.0.1", "private-address"),
        ("192.168.1.1", "private-address"),
        ("100.64.0.1", "private-address"),
        ("::ffff:10.2.0.1", "private-address"),
        ("224.0.0.1", "private-address"),
        ("169.254.169.254", "metadata-address"),
        ("203.0.113.9", "denied-by-rule"),
    ]:
        assert p.check_address(addr, 443).reason == reason, addr
    assert p.check_address("10.1.9.9", 443).allow


def test_loopback_entries_mean_the_sandbox_loopback_unless_host_loopback_is_allowed() -> None:
    builtin = ["localhost", "127.0.0.0/8", "::1", "pypi.org"]
    assert not EgressPolicy(builtin).decide("127.0.0.1", 5432).allow
    assert not EgressPolicy(builtin).check_address("127.0.0.1", 5432).allow
    assert EgressPolicy(builtin, allow_host_loopback=True).decide("127.0.0.1", 5432).allow


def test_a_bad_entry_is_a_usage_error_naming_it() -> None:
    with pytest.raises(UsageError, match=r"pypi\.org:http"):
        EgressPolicy(["pypi.org:http"])


def test_ip_literal_spellings() -> None:
    assert str(ip_literal("127.1")) == "127.0.0.1"
    assert str(ip_literal("[::1]")) == "::1"
    assert ip_literal("1e100.net") is None and ip_literal("example.com") is None
