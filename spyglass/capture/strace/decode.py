"""Decoding of strace's value syntax: quoted strings, fd annotations, sockaddrs, argument lists.

strace (``-yy``, default ``-x`` off) writes:

* strings as ``"..."`` with C escapes; bytes that are not printable ASCII come
  out as octal (``\\303\\251``), three digits when a digit follows; a trailing
  ``...`` after the closing quote means the string was cut at ``-s``;
* a file descriptor as ``3</abs/path>``, ``AT_FDCWD</cwd>``, a socket as
  ``5<TCP:[127.0.0.1:40000->10.0.0.1:443]>``, a device as ``0</dev/null<char 1:3>>``;
  inside a path annotation ``<``, ``>``, ``"`` and ``\\`` are escaped;
* with ``--decode-pids=pidns``, a pid from another PID namespace as
  ``2 /* 3083 in strace's PID NS */`` (the second number is the one we use).

Text is handled as "fs strings": ``str`` in which bytes that are not valid
UTF-8 are carried as surrogates (``os.fsdecode`` style), so the exact bytes
come back with ``s.encode("utf-8", "surrogateescape")``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_SIMPLE_ESC = {
    ord("n"): 10,
    ord("t"): 9,
    ord("r"): 13,
    ord("v"): 11,
    ord("f"): 12,
    ord("a"): 7,
    ord("b"): 8,
    ord("e"): 27,
}
_ESC = re.compile(rb"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{2})|(.))", re.DOTALL)


def _esc_sub(m: re.Match[bytes]) -> bytes:
    octal, hexa, other = m.group(1), m.group(2), m.group(3)
    if octal is not None:
        return bytes((int(octal, 8) & 0xFF,))
    if hexa is not None:
        return bytes((int(hexa, 16),))
    c = other[0]
    return bytes((_SIMPLE_ESC.get(c, c),))


def unescape(text: str) -> str:
    """Undo strace's C escapes; the result is an fs string (exact bytes via surrogateescape)."""
    if "\\" not in text:
        return text
    raw = _ESC.sub(_esc_sub, text.encode("utf-8", "surrogateescape"))
    return raw.decode("utf-8", "surrogateescape")


def unquote(token: str) -> str:
    """``"a\\303\\251"`` (optionally followed by ``...``) -> fs string.  Not a string -> ``""``."""
    if token.endswith("..."):
        token = token[:-3]
    if len(token) < 2 or token[0] != '"' or token[-1] != '"':
        return ""
    return unescape(token[1:-1])


def unquote_bytes(token: str) -> bytes:
    """The exact bytes of a quoted strace string."""
    return unquote(token).encode("utf-8", "surrogateescape")


# --- argument lists ---------------------------------------------------------

_TOKEN = re.compile(
    r'"(?:[^"\\]|\\.)*"(?:\.\.\.)?'  # quoted string, maybe truncated
    r'|<(?!<)(?:\\.|"(?:[^"\\]|\\.)*"|->|<(?:char|block) \d+:\d+>|[^<>"\\])*>'  # fd annotation
    r"|[{\[(]|[}\])]|,"
    r'|(?:[^"<{}\[\](),]|<<)+'  # anything else (1<<CAP_CHOWN keeps its shifts)
    r"|.",
    re.DOTALL,
)


def split_args(text: str) -> list[str]:
    """Top-level comma split of an argument list, respecting strings, annotations and brackets."""
    out: list[str] = []
    depth = 0
    cur: list[str] = []
    for tok in _TOKEN.findall(text):
        c = tok[0]
        if c == "," and len(tok) == 1 and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        if c in "{[(" and len(tok) == 1:
            depth += 1
        elif c in "}])" and len(tok) == 1:
            depth -= 1
        cur.append(tok)
    last = "".join(cur).strip()
    if last or out:
        out.append(last)
    return out


def split_array(text: str) -> list[str] | None:
    """``["a", "b", ...]`` -> its elements (``...`` dropped); None when not an array."""
    text = text.strip()
    if not text.startswith("[") or not text.endswith("]"):
        return None
    inner = split_args(text[1:-1])
    return [e for e in inner if e and e != "..."]


def struct_fields(text: str) -> dict[str, str]:
    """``{a=1, b={c=2}}`` -> ``{"a": "1", "b": "{c=2}"}`` (top level only)."""
    text = text.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    fields: dict[str, str] = {}
    for part in split_args(text):
        key, sep, value = part.partition("=")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


# --- file descriptors and pids ----------------------------------------------

_ANN_BODY = r'(?:\\.|"(?:[^"\\]|\\.)*"|->|<(?:char|block) \d+:\d+>|[^<>"\\])*'
_FD = re.compile(rf"(-?\d+|AT_FDCWD)(?:<({_ANN_BODY})>(?:\(deleted\))?)?$")
_DEVICE_SUFFIX = re.compile(r"<(?:char|block) \d+:\d+>$")
_PIDNS = re.compile(r"(-?\d+)(?: /\* (\d+) in strace's PID NS \*/)?")


class Fd(NamedTuple):
    num: int | None  # None for AT_FDCWD
    ann: str | None  # the annotation text, still escaped


def parse_fd(token: str) -> Fd | None:
    m = _FD.match(token.strip())
    if m is None:
        return None
    num = None if m.group(1) == "AT_FDCWD" else int(m.group(1))
    return Fd(num, m.group(2))


def ann_path(ann: str | None) -> str | None:
    """The absolute path of a file annotation (``/dev/null<char 1:3>`` -> ``/dev/null``), else None."""
    if not ann or ann[0] != "/":
        return None
    if ann[-1] == ">":
        ann = _DEVICE_SUFFIX.sub("", ann)
    return unescape(ann)


def parse_pid(token: str) -> int | None:
    """A pid argument or return value, translated to strace's PID namespace."""
    m = _PIDNS.match(token.strip())
    if m is None:
        return None
    return int(m.group(2) or m.group(1))


def parse_int(token: str) -> int | None:
    token = token.strip()
    try:
        if token.startswith(("0x", "-0x")):
            return int(token, 16)
        if len(token) > 1 and token.startswith("0") and token.isdigit():
            return int(token, 8)
        return int(token)
    except ValueError:
        return None


# --- sockets ----------------------------------------------------------------


class SockAddr(NamedTuple):
    family: str  # "ipv4" | "ipv6" | "unix"
    address: str | None
    port: int | None


_FAMILY = re.compile(r"\{sa_family=(AF_[A-Z0-9]+)")
_INET = re.compile(r'sin_port=htons\((\d+)\), sin_addr=inet_addr\("([^"]*)"\)')
_INET6 = re.compile(r'sin6_port=htons\((\d+)\).*?inet_pton\(AF_INET6, "([^"]*)"')
_UNIX = re.compile(r'sun_path=(@?)("(?:[^"\\]|\\.)*")')


def parse_sockaddr(text: str) -> SockAddr | None:
    """A ``{sa_family=AF_INET, ...}`` struct; None for NULL and families we do not report."""
    m = _FAMILY.match(text.strip())
    if m is None:
        return None
    family = m.group(1)
    if family == "AF_INET":
        m4 = _INET.search(text)
        return SockAddr("ipv4", m4.group(2), int(m4.group(1))) if m4 else SockAddr("ipv4", None, None)
    if family == "AF_INET6":
        m6 = _INET6.search(text)
        return SockAddr("ipv6", m6.group(2), int(m6.group(1))) if m6 else SockAddr("ipv6", None, None)
    if family in ("AF_UNIX", "AF_LOCAL"):
        mu = _UNIX.search(text)
        if mu is None:
            return SockAddr("unix", None, None)
        return SockAddr("unix", mu.group(1) + unquote(mu.group(2)), None)
    return None


class SockInfo(NamedTuple):
    transport: str | None  # "tcp" | "udp" | "unix" | other lowercased protocol name
    net_type: str | None  # "ipv4" | "ipv6" | "unix"
    local: tuple[str, int] | None
    remote: tuple[str, int] | None
    unix_path: str | None
    inode: str | None


_SOCK = re.compile(r"([A-Za-z0-9_-]+):\[(.*)\]$", re.DOTALL)
_ENDPOINT = re.compile(r"\[?([0-9A-Fa-f:.%a-z]*?)\]?:(\d+)$")


def _endpoint(text: str) -> tuple[str, int] | None:
    m = _ENDPOINT.match(text)
    return (m.group(1), int(m.group(2))) if m else None


def parse_sock_ann(ann: str | None) -> SockInfo | None:
    """``TCP:[1.2.3.4:5->6.7.8.9:10]``, ``UDPv6:[[::1]:53]``, ``UNIX-STREAM:[7,"/run/x.sock"]``..."""
    if not ann:
        return None
    m = _SOCK.match(ann)
    if m is None:
        return None
    proto, body = m.group(1), m.group(2)
    up = proto.upper()
    if up.startswith("UNIX"):
        path = None
        inode = body
        comma = body.find(',"')
        if comma >= 0:
            path = unquote(body[comma + 1 :])
            inode = body[:comma]
        return SockInfo("unix", "unix", None, None, path, inode.split("->")[0])
    if proto == "socket":  # strace could not look inside (another network namespace)
        return SockInfo(None, None, None, None, None, body)
    if up.startswith("TCP"):
        transport = "tcp"
    elif up.startswith("UDP"):
        transport = "udp"
    else:
        transport = proto.lower()
    net_type = "ipv6" if up.endswith("V6") else ("ipv4" if transport in ("tcp", "udp") else None)
    if body.isdigit():
        return SockInfo(transport, net_type, None, None, None, body)
    local_s, _, remote_s = body.partition("->")
    return SockInfo(transport, net_type, _endpoint(local_s), _endpoint(remote_s) if remote_s else None, None, None)
