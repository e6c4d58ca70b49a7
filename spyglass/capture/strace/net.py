"""Socket syscalls -> ``net.*`` events, and DNS answers -> the address-to-name table.

Where a socket goes comes from, in order: the address argument of the call,
the ``[local->remote]`` of its ``-yy`` annotation, and what its own
``connect()`` said earlier (kept per process and fd, checked against the
socket inode where strace shows one).  Received UDP payloads that parse as a
DNS response feed ``net.dns`` events and name later connections to the
answered addresses.  Those names are claims made by the network peer (or by
the traced program itself), useful for attribution, not proof.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spyglass.capture.strace.decode import (
    SockAddr,
    SockInfo,
    parse_fd,
    parse_sock_ann,
    parse_sockaddr,
    split_array,
    struct_fields,
    to_text,
    unquote_bytes,
)
from spyglass.capture.strace.dns import learn_answer
from spyglass.capture.strace.state import Call, Peer, TraceState
from spyglass.events.schema import Event

Handler = Callable[[TraceState, Call], "Event | None"]


def _sock(c: Call) -> tuple[int | None, SockInfo | None]:
    fd = parse_fd(c.arg(0))
    if fd is None:
        return None, None
    return fd.num, parse_sock_ann(fd.ann)


def _addr_fields(st: TraceState, c: Call, sa: SockAddr) -> dict[str, Any]:
    """address/port/net_type (+ domain) fields for a sockaddr argument."""
    out: dict[str, Any] = {"net_type": sa.family, "port": sa.port}
    address = sa.address
    if address is not None and sa.family == "unix" and address and not address.startswith(("@", "/")):
        address = st.resolve(c, address)
    if address is not None:
        text, raw = to_text(address, "server.address", None)
        out["address"] = text
        if raw:
            out["raw_bytes"] = raw
        if sa.family != "unix":
            out["domain"] = st.domain_of(address)
    return out


def _transport(sock: SockInfo | None, sa: SockAddr | None) -> str | None:
    if sock is not None and sock.transport:
        return sock.transport
    if sa is not None and sa.family == "unix":
        return "unix"
    return None


def h_connect(st: TraceState, c: Call) -> Event | None:
    fdnum, sock = _sock(c)
    sa = parse_sockaddr(c.arg(1))
    if fdnum is not None:
        c.proc.peers.pop(fdnum, None)
    if sa is None:  # AF_UNSPEC (dissolve), netlink, packet...: not a destination
        return None
    ok = c.ok or c.err == "EINPROGRESS"
    fields = _addr_fields(st, c, sa)
    transport = _transport(sock, sa)
    if ok and fdnum is not None:
        c.proc.peers[fdnum] = Peer(
            fields.get("address"), sa.port, transport, sa.family, sock.inode if sock is not None else None
        )
    return st.event(c, "net.connect", ok=ok, transport=transport, **fields)


def h_bind(st: TraceState, c: Call) -> Event | None:
    fdnum, sock = _sock(c)
    if fdnum is not None:
        c.proc.peers.pop(fdnum, None)
    sa = parse_sockaddr(c.arg(1))
    if sa is None:
        return None
    fields = _addr_fields(st, c, sa)
    fields.pop("domain", None)
    return st.event(c, "net.bind", transport=_transport(sock, sa), **fields)


def h_listen(st: TraceState, c: Call) -> Event | None:
    _, sock = _sock(c)
    if sock is None:
        return st.event(c, "net.listen")
    if sock.transport == "unix":
        address = sock.unix_path
        raw = None
        if address is not None:
            address, raw = to_text(address, "server.address", None)
        return st.event(c, "net.listen", transport="unix", net_type="unix", address=address, raw_bytes=raw)
    address, port = sock.local if sock.local else (None, None)
    return st.event(c, "net.listen", transport=sock.transport, net_type=sock.net_type, address=address, port=port)


def _send_event(
    st: TraceState, c: Call, fdnum: int | None, sock: SockInfo | None, sa: SockAddr | None, nbytes: int | None
) -> Event | None:
    if sock is not None and sock.transport == "netlink":
        return None  # talking to the kernel, not to a peer
    transport = _transport(sock, sa)
    if sa is not None and (sa.address is not None or sa.family != "unix"):
        return st.event(c, "net.send", transport=transport, nbytes=nbytes, **_addr_fields(st, c, sa))
    if sock is not None and sock.remote is not None:
        address, port = sock.remote
        return st.event(
            c,
            "net.send",
            transport=transport,
            net_type=sock.net_type,
            nbytes=nbytes,
            address=address,
            port=port,
            domain=st.domain_of(address),
        )
    peer = c.proc.peers.get(fdnum) if fdnum is not None else None
    if peer is not None and _same_socket(peer, sock):
        return st.event(
            c,
            "net.send",
            transport=peer.transport or transport,
            net_type=peer.net_type,
            nbytes=nbytes,
            address=peer.address,
            port=peer.port,
            domain=st.domain_of(peer.address) if peer.net_type != "unix" else None,
        )
    if sock is not None and sock.unix_path is not None:
        return st.event(c, "net.send", transport="unix", net_type="unix", nbytes=nbytes, address=sock.unix_path)
    return st.event(c, "net.send", transport=transport, net_type=sock.net_type if sock else None, nbytes=nbytes)


def _same_socket(peer: Peer, sock: SockInfo | None) -> bool:
    """Whether a remembered connect() plausibly belongs to the socket now on that fd."""
    if sock is None:
        return True
    if sock.transport is not None and peer.transport is not None and sock.transport != peer.transport:
        return False
    return sock.inode is None or peer.inode is None or sock.inode == peer.inode


def _nbytes(c: Call) -> int | None:
    return c.ret if c.ok and c.ret is not None else None


def h_sendto(st: TraceState, c: Call) -> Event | None:
    fdnum, sock = _sock(c)
    return _send_event(st, c, fdnum, sock, parse_sockaddr(c.arg(4)), _nbytes(c))


def h_sendmsg(st: TraceState, c: Call) -> Event | None:
    fdnum, sock = _sock(c)
    msg = struct_fields(c.arg(1))
    return _send_event(st, c, fdnum, sock, parse_sockaddr(msg.get("msg_name", "")), _nbytes(c))


def h_sendmmsg(st: TraceState, c: Call) -> Event | None:
    fdnum, sock = _sock(c)
    total = 0
    sa: SockAddr | None = None
    for item in split_array(c.arg(1)) or []:
        entry = struct_fields(item)
        if sa is None:
            sa = parse_sockaddr(struct_fields(entry.get("msg_hdr", "")).get("msg_name", ""))
        length = entry.get("msg_len", "")
        if length.isdigit():
            total += int(length)
    return _send_event(st, c, fdnum, sock, sa, total if c.ok else None)


# --- receive: only DNS answers matter ------------------------------------------------


def _dns(st: TraceState, c: Call, sock: SockInfo | None, payload: bytes, src: SockAddr | None) -> Event | None:
    resp = learn_answer(payload, st.dns_names)
    if resp is None:
        return None
    fields: dict[str, Any] = {}
    if src is not None:
        fields = _addr_fields(st, c, src)
        fields.pop("domain", None)
    return st.event(c, "net.dns", transport="udp", dns_name=resp.name, dns_answers=resp.answers, **fields)


def h_recvfrom(st: TraceState, c: Call) -> Event | None:
    if not c.ok or not c.ret:
        return None
    _, sock = _sock(c)
    if sock is not None and sock.transport not in ("udp", None):
        return None
    payload = unquote_bytes(c.arg(1))[: c.ret]
    return _dns(st, c, sock, payload, parse_sockaddr(c.arg(4)))


def h_recvmsg(st: TraceState, c: Call) -> Event | None:
    if not c.ok or not c.ret:
        return None
    _, sock = _sock(c)
    if sock is not None and sock.transport not in ("udp", None):
        return None
    msg = struct_fields(c.arg(1))
    payload = b""
    for iov in split_array(msg.get("msg_iov", "")) or []:
        payload += unquote_bytes(struct_fields(iov).get("iov_base", ""))
    return _dns(st, c, sock, payload[: c.ret], parse_sockaddr(msg.get("msg_name", "")))


HANDLERS: dict[str, Handler] = {
    "connect": h_connect,
    "bind": h_bind,
    "listen": h_listen,
    "sendto": h_sendto,
    "sendmsg": h_sendmsg,
    "sendmmsg": h_sendmmsg,
    "recvfrom": h_recvfrom,
    "recvmsg": h_recvmsg,
}
