"""The egress proxy's protocols on the wire: HTTP/1.x request heads and SOCKS5.

Parsing a proxy request head, finding its target, and rewriting an
absolute-form request (``GET http://host/path``) into the origin-form
request the upstream server expects, with ``Host`` set to the target and the
proxy's own and hop-by-hop headers removed; the SOCKS5 handshake (no
authentication, ``CONNECT`` with a domain name or an address).  Anything
malformed raises :class:`Refused` with the status and the reason the proxy
answers with.
"""

from __future__ import annotations

import asyncio
import ipaddress
import struct

import msgspec

MAX_HEAD_BYTES = 65536
MAX_HEAD_LINES = 200
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
    }
)
STATUS_TEXT = {
    400: "Bad Request",
    403: "Forbidden",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


class Refused(Exception):
    """The proxy answers ``status`` and records ``reason`` (and ``detail``)."""

    def __init__(self, status: int, reason: str, detail: str | None = None) -> None:
        super().__init__(reason)
        self.status, self.reason, self.detail = status, reason, detail


def bad() -> Refused:
    return Refused(400, "bad-request")


class RequestHead(msgspec.Struct, frozen=True):
    method: str  # upper case
    target: str
    version: str
    headers: list[tuple[str, str]]

    def header(self, name: str) -> str | None:
        n = name.lower()
        return next((v for k, v in self.headers if k.lower() == n), None)


def parse_head(lines: list[bytes]) -> RequestHead:
    """The request line and headers (``lines`` without their line ends)."""
    try:
        method, target, version = lines[0].decode("ascii").split(" ")
    except (ValueError, UnicodeDecodeError, IndexError):
        raise bad() from None
    if not version.startswith("HTTP/1.") or not method.isalpha():
        raise bad()
    headers: list[tuple[str, str]] = []
    for raw in lines[1:]:
        name, sep, value = raw.decode("latin-1").partition(":")
        if not sep or not name.strip() or name != name.strip():
            raise bad()
        headers.append((name, value.strip()))
    return RequestHead(method.upper(), target, version, headers)


def split_authority(authority: str, default_port: int | None) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) -> (host, port); the port may default."""
    a = authority.strip()
    if a.startswith("["):
        host, _, rest = a[1:].partition("]")
        port_s = rest[1:] if rest.startswith(":") else ""
    elif a.count(":") == 1:
        host, port_s = a.split(":")
    else:
        host, port_s = a, ""
    if port_s:
        if not port_s.isdigit():
            raise bad()
        port = int(port_s)
    elif default_port is not None:
        port = default_port
    else:
        raise bad()
    if not host:
        raise bad()
    return host, port


def http_target(head: RequestHead) -> tuple[str, int, str]:
    """(host, port, origin-form path) of a plain-HTTP proxy request."""
    target = head.target
    if target.lower().startswith("http://"):
        authority, slash, path = target[7:].partition("/")
        path = "/" + path if slash else "/"
        if "?" in authority:
            authority, _, query = authority.partition("?")
            path = "/?" + query
    elif target.startswith("/"):
        host_header = head.header("host")
        if not host_header:
            raise bad()
        authority, path = host_header, target
    else:
        raise Refused(501, "unsupported-scheme")
    if "@" in authority:
        authority = authority.rsplit("@", 1)[1]
    host, port = split_authority(authority, 80)
    return host, port, path


def content_length(head: RequestHead) -> int | None:
    v = head.header("content-length")
    return int(v) if v is not None and v.isdigit() else None


def origin_request(head: RequestHead, host: str, port: int, path: str) -> bytes:
    """The head to send upstream: origin form, ``Host`` = the target, no proxy or
    hop-by-hop headers, ``Connection: close`` (or ``upgrade`` for an upgrade)."""
    upgrade = head.header("upgrade") is not None
    name = f"[{host}]" if ":" in host and not host.startswith("[") else host
    out = [f"{head.method} {path} {head.version}", f"Host: {name}" + ("" if port == 80 else f":{port}")]
    for k, v in head.headers:
        kl = k.lower()
        if kl == "host" or (kl in HOP_BY_HOP and not (upgrade and kl == "upgrade")):
            continue
        out.append(f"{k}: {v}")
    out.append("Connection: upgrade" if upgrade else "Connection: close")
    return ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")


def refusal_response(status: int, reason: str, header: str, where: str | None) -> bytes:
    body = f"spyglass egress proxy: {reason}" + (f" ({where})" if where else "") + "\n"
    return (
        f"HTTP/1.1 {status} {STATUS_TEXT.get(status, 'Error')}\r\n{header}: {reason}\r\n"
        f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}"
    ).encode()


# ---------------------------------------------------------------- SOCKS5
SOCKS5_OK = b"\x05\x00\x00\x01" + b"\0" * 6


def socks5_refusal(status: int) -> bytes:
    """Reply 2 (not allowed by ruleset) for a denial, 1 (general failure) otherwise."""
    return b"\x05" + bytes([0x02 if status == 403 else 0x01]) + b"\x00\x01" + b"\0" * 6


async def socks5_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout: float
) -> tuple[str, int]:
    """The rest of a SOCKS5 greeting (its first byte, the version, is read) and the
    CONNECT request: (host, port).  A domain name stays a name (``socks5h``)."""

    async def read(n: int) -> bytes:
        return await asyncio.wait_for(reader.readexactly(n), timeout)

    methods = await read((await read(1))[0])
    if 0 not in methods:  # only "no authentication" is offered
        writer.write(b"\x05\xff")
        await writer.drain()
        raise bad()
    writer.write(b"\x05\x00")
    await writer.drain()
    ver, cmd, _rsv, atyp = await read(4)
    if ver != 5:
        raise bad()
    if atyp == 1:
        host = str(ipaddress.IPv4Address(await read(4)))
    elif atyp == 4:
        host = str(ipaddress.IPv6Address(await read(16)))
    elif atyp == 3:
        host = (await read((await read(1))[0])).decode("ascii", "replace")
    else:
        raise bad()
    (port,) = struct.unpack(">H", await read(2))
    if cmd != 1:
        raise Refused(501, "unsupported-command")
    return host, port
