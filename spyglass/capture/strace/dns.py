"""A small DNS response decoder (RFC 1035) for payloads seen in recvfrom/recvmsg.

Only what naming a connection needs: the question name and the A, AAAA and
CNAME records of the answer section.  Anything malformed gives ``None``;
nothing here raises on bad input.
"""

from __future__ import annotations

import ipaddress

import msgspec

TYPE_A = 1
TYPE_CNAME = 5
TYPE_AAAA = 28
_MAX_POINTERS = 32


class DnsResponse(msgspec.Struct):
    """A DNS answer read from a traced process: the question and what it resolved to."""

    name: str  # the question name, lower case, no trailing dot
    qtype: int
    answers: list[str] = msgspec.field(default_factory=list)  # addresses and CNAME targets, in order
    addresses: list[str] = msgspec.field(default_factory=list)  # A and AAAA data only
    rcode: int = 0


class _Bad(Exception):
    pass


def _u16(data: bytes, pos: int) -> int:
    if pos + 2 > len(data):
        raise _Bad
    return (data[pos] << 8) | data[pos + 1]


def _name(data: bytes, pos: int) -> tuple[str, int]:
    """A possibly compressed domain name at ``pos`` -> (name, position after it)."""
    labels: list[str] = []
    end = -1
    jumps = 0
    while True:
        if pos >= len(data):
            raise _Bad
        n = data[pos]
        if n == 0:
            pos += 1
            break
        if n & 0xC0 == 0xC0:
            if pos + 1 >= len(data) or jumps >= _MAX_POINTERS:
                raise _Bad
            if end < 0:
                end = pos + 2
            pos = ((n & 0x3F) << 8) | data[pos + 1]
            jumps += 1
            continue
        if n & 0xC0:
            raise _Bad
        label = data[pos + 1 : pos + 1 + n]
        if len(label) != n:
            raise _Bad
        labels.append(label.decode("ascii", "backslashreplace"))
        pos += 1 + n
    return ".".join(labels).lower(), (end if end >= 0 else pos)


def parse_response(data: bytes) -> DnsResponse | None:
    """Decode a DNS response with exactly one question; None if it is not one."""
    try:
        return _parse(data)
    except (_Bad, IndexError, ValueError):
        return None


def learn_answer(payload: bytes, names: dict[str, str]) -> DnsResponse | None:
    """``payload`` read from a socket, if it is a DNS answer (the response bit set): parsed, and the
    name of each address it gives noted in ``names`` (address -> name); None for anything else."""
    if len(payload) < 12 or not payload[2] & 0x80:
        return None
    resp = parse_response(payload)
    if resp is None:
        return None
    for addr in resp.addresses:
        names[addr] = resp.name
    return resp


def _parse(data: bytes) -> DnsResponse | None:
    if len(data) < 12:
        return None
    flags = _u16(data, 2)
    if not flags & 0x8000:  # QR=0: a query
        return None
    if flags & 0x7800:  # opcode other than QUERY
        return None
    qdcount, ancount = _u16(data, 4), _u16(data, 6)
    if qdcount != 1:
        return None
    qname, pos = _name(data, 12)
    qtype = _u16(data, pos)
    pos += 4
    resp = DnsResponse(name=qname, qtype=qtype, rcode=flags & 0xF)
    for _ in range(ancount):
        _, pos = _name(data, pos)
        rtype = _u16(data, pos)
        rdlen = _u16(data, pos + 8)
        rdata_pos = pos + 10
        rdata = data[rdata_pos : rdata_pos + rdlen]
        if len(rdata) != rdlen:
            raise _Bad
        if rtype == TYPE_A and rdlen == 4:
            addr = str(ipaddress.IPv4Address(rdata))
            resp.answers.append(addr)
            resp.addresses.append(addr)
        elif rtype == TYPE_AAAA and rdlen == 16:
            addr = str(ipaddress.IPv6Address(rdata))
            resp.answers.append(addr)
            resp.addresses.append(addr)
        elif rtype == TYPE_CNAME:
            target, _ = _name(data, rdata_pos)
            resp.answers.append(target)
        pos = rdata_pos + rdlen
    return resp


def parse_hosts(text: str) -> dict[str, str]:
    """``/etc/hosts`` text -> address -> first name (first line for an address wins)."""
    table: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        parts = line.split()
        if len(parts) < 2:
            continue
        addr = parts[0]
        try:
            addr = str(ipaddress.ip_address(addr.split("%", 1)[0]))
        except ValueError:
            continue
        table.setdefault(addr, parts[1].lower())
    return table
