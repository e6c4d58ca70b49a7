"""Host patterns of ``network.allow`` / ``network.deny``.

A pattern is a host name (``pypi.org``), a wildcard name (``*.github.com``
matches names below github.com, not github.com itself; ``*`` matches every
host), an IP address (``10.0.0.5``, ``::1``) or a CIDR block
(``127.0.0.0/8``), optionally followed by ``:PORT`` or ``:LOW-HIGH``
(IPv6 with a port is written ``[::1]:8080``).  Names compare case-insensitively.
"""

from __future__ import annotations

import fnmatch
import ipaddress
from collections.abc import Iterable
from functools import lru_cache

import msgspec

IPNet = ipaddress.IPv4Network | ipaddress.IPv6Network


class HostPattern(msgspec.Struct, frozen=True):
    """One allowed host: a name or wildcard, or an address or network, with optional ports."""

    text: str
    name: str | None = None  # lower-case name or wildcard
    net: IPNet | None = None
    ports: tuple[int, int] | None = None

    def matches(self, domain: str | None, address: str | None, port: int | None) -> bool:
        if self.ports is not None and (port is None or not self.ports[0] <= port <= self.ports[1]):
            return False
        if self.net is not None:
            ip = parse_ip(address) if address else None
            return ip is not None and ip.version == self.net.version and ip in self.net
        assert self.name is not None
        if self.name == "*":
            return True
        names = [n for n in (domain, address) if n]
        for n in names:
            n = n.lower().rstrip(".")
            if self.name.startswith("*."):
                if n.endswith(self.name[1:]) and len(n) > len(self.name) - 1:
                    return True
            elif "*" in self.name or "?" in self.name:
                if fnmatch.fnmatchcase(n, self.name):
                    return True
            elif n == self.name:
                return True
        return False


@lru_cache(maxsize=65536)
def parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _ports(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition("-")
    try:
        a, b = int(lo), int(hi) if sep else int(lo)
    except ValueError:
        raise ValueError(f"bad port {text!r}") from None
    if not (0 <= a <= 65535 and 0 <= b <= 65535 and a <= b):
        raise ValueError(f"bad port {text!r} (0-65535)")
    return a, b


def parse_host_pattern(text: str) -> HostPattern:
    """Parse one pattern; ValueError says what is wrong."""
    s = text.strip()
    if not s:
        raise ValueError("empty host pattern")
    ports: tuple[int, int] | None = None
    host = s
    if s.startswith("["):
        end = s.find("]")
        if end == -1:
            raise ValueError(f"unclosed '[' in {text!r}")
        host, rest = s[1:end], s[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"unexpected {rest!r} after ']' in {text!r}")
            ports = _ports(rest[1:])
    elif s.count(":") == 1:
        host, port = s.split(":")
        ports = _ports(port)
    if "/" in host:
        try:
            net = ipaddress.ip_network(host, strict=False)
        except ValueError as exc:
            raise ValueError(f"bad CIDR {host!r}: {exc}") from None
        return HostPattern(text, net=net, ports=ports)
    ip = parse_ip(host)
    if ip is not None:
        return HostPattern(text, net=ipaddress.ip_network(ip), ports=ports)
    name = host.lower().rstrip(".")
    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789-._*?")
    if not set(name) <= allowed:
        raise ValueError(f"bad host name {host!r}")
    if "*" in name[1:] and not name.startswith("*."):
        pass  # fnmatch-style, accepted
    return HostPattern(text, name=name, ports=ports)


class HostMatcher:
    """Allow/deny decision: denied patterns win over allowed ones."""

    def __init__(self, allow: Iterable[str], deny: Iterable[str] = ()) -> None:
        self.allow = [parse_host_pattern(p) for p in allow]
        self.deny = [parse_host_pattern(p) for p in deny]
        self._cache: dict[tuple[str | None, str | None, int | None], bool] = {}

    def allowed(self, domain: str | None, address: str | None, port: int | None) -> bool:
        key = (domain, address, port)
        hit = self._cache.get(key)
        if hit is None:
            if any(p.matches(domain, address, port) for p in self.deny):
                hit = False
            else:
                hit = any(p.matches(domain, address, port) for p in self.allow)
            if len(self._cache) > 65536:
                self._cache.clear()
            self._cache[key] = hit
        return hit

    def denied(self, domain: str | None, address: str | None, port: int | None) -> bool:
        return any(p.matches(domain, address, port) for p in self.deny)
