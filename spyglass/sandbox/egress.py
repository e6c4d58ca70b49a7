"""Egress decisions: which host names, ports and addresses the proxy lets through.

Pure logic, no I/O.  Entries of ``network.allow`` / ``network.deny`` use the
policy's host-pattern syntax (:mod:`spyglass.policy.hosts`): ``example.com``,
``*.example.com`` (subdomains only), ``*``, ``pypi.org:443``, ``host:8000-8099``,
``10.0.0.0/8``, ``192.0.2.7``, ``[::1]:8080``.

Order of the decision: malformed host, deny entries, then IP literals (only
an address or CIDR entry allows one; ``*`` does not), then host names (an
allow entry must match).  After resolution every address must be public, or
be allowed by an address entry: private, loopback, link-local (cloud metadata
at 169.254.169.254), shared, reserved and multicast targets are refused,
which also defeats DNS rebinding of an allowed name.  Deny beats allow; no
allow entry means nothing is allowed.

Loopback entries (``localhost``, ``127.0.0.0/8``, ``::1``) in the allow list
mean the *sandbox's* own loopback, which clients reach directly (``NO_PROXY``):
the proxy ignores them, so the host's loopback services stay out of reach,
unless ``allow_host_loopback`` is set (tests with loopback servers).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable

import msgspec

from spyglass.errors import UsageError
from spyglass.policy.hosts import HostPattern, parse_host_pattern

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_LABEL = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$")
_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}

# reasons (stable strings: they travel in events and the X-Spyglass-Denied header)
BAD_HOST = "bad-host"
DENIED = "denied-by-rule"
IP_LITERAL = "ip-literal"
NOT_ALLOWED = "not-allowed"
PRIVATE = "private-address"
METADATA = "metadata-address"
ALLOWED = "allowed-by-rule"
PUBLIC = "public-address"


class Decision(msgspec.Struct, frozen=True):
    allow: bool
    reason: str
    rule: str | None = None  # the policy entry that decided, if one did

    @property
    def word(self) -> str:
        return "allow" if self.allow else "deny"


def _unmap(addr: IPAddress) -> IPAddress:
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def parse_rules(entries: Iterable[str]) -> list[HostPattern]:
    out: list[HostPattern] = []
    for e in entries:
        try:
            out.append(parse_host_pattern(e))
        except ValueError as exc:
            raise UsageError(
                f"network rule {e!r}: {exc}",
                hint="examples: github.com, *.github.com, pypi.org:443, 10.0.0.0/8",
            ) from None
    return out


def _is_loopback_pattern(p: HostPattern) -> bool:
    if p.net is not None:
        return p.net.is_loopback
    return p.name in ("localhost", "localhost.localdomain") or bool(p.name and p.name.endswith(".localhost"))


def valid_hostname(host: str) -> bool:
    if not host or len(host) > 253:
        return False
    return all(_LABEL.match(label) for label in host.split("."))


def ip_literal(host: str) -> IPAddress | None:
    """The address if ``host`` is any spelling of an IP literal (``1.1.1.1``,
    ``[::1]``, and the forms inet_aton accepts such as ``16843009`` or ``0x7f.1``)."""
    h = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(h)
    except ValueError:
        pass
    if re.fullmatch(r"[0-9][0-9a-fA-FxX.]*", h):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(h))
        except OSError:
            return None
    return None


def normalize_host(host: str) -> str:
    h = host.strip().lower()
    if h.endswith(".") and not h.endswith(".."):
        h = h[:-1]
    return h


class EgressPolicy:
    """Allow/deny entries, compiled once per run."""

    def __init__(
        self,
        allow: Iterable[str] = (),
        deny: Iterable[str] = (),
        *,
        allow_host_loopback: bool = False,
        own_services: Iterable[str] = (),
    ) -> None:
        allowed = parse_rules(allow)
        if not allow_host_loopback:
            allowed = [p for p in allowed if not _is_loopback_pattern(p)]
        # spyglass's own services for the run (the model stub): exact host:port entries, kept
        # even on the host's loopback
        self.allow = [*allowed, *parse_rules(own_services)]
        self.deny = parse_rules(deny)

    @staticmethod
    def _addr_hit(patterns: list[HostPattern], addr: IPAddress, port: int) -> HostPattern | None:
        a = str(_unmap(addr))
        return next((p for p in patterns if p.net is not None and p.matches(None, a, port)), None)

    @staticmethod
    def _name_hit(patterns: list[HostPattern], host: str, port: int) -> HostPattern | None:
        return next((p for p in patterns if p.name is not None and p.matches(host, None, port)), None)

    def decide(self, host: str, port: int) -> Decision:
        """The decision on a request for ``host:port`` before any name is resolved."""
        h = normalize_host(host)
        addr = ip_literal(h)
        if addr is None and not valid_hostname(h):
            return Decision(False, BAD_HOST)
        if not 0 < port < 65536:
            return Decision(False, BAD_HOST)
        if addr is not None:
            hit = self._addr_hit(self.deny, addr, port)
            if hit is not None:
                return Decision(False, DENIED, hit.text)
            hit = self._addr_hit(self.allow, addr, port)
            return Decision(True, ALLOWED, hit.text) if hit is not None else Decision(False, IP_LITERAL)
        hit = self._name_hit(self.deny, h, port)
        if hit is not None:
            return Decision(False, DENIED, hit.text)
        hit = self._name_hit(self.allow, h, port)
        return Decision(True, ALLOWED, hit.text) if hit is not None else Decision(False, NOT_ALLOWED)

    def check_address(self, addr: IPAddress | str, port: int) -> Decision:
        """Whether a resolved address may be contacted (after ``decide`` allowed the name)."""
        a = _unmap(ipaddress.ip_address(addr) if isinstance(addr, str) else addr)
        hit = self._addr_hit(self.deny, a, port)
        if hit is not None:
            return Decision(False, DENIED, hit.text)
        if a.is_global and not a.is_multicast:
            return Decision(True, PUBLIC)
        hit = self._addr_hit(self.allow, a, port)
        if hit is not None:
            return Decision(True, ALLOWED, hit.text)
        return Decision(False, METADATA if a in _METADATA else PRIVATE)
