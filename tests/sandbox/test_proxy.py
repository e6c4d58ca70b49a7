"""The egress proxy on its own: real loopback servers, a real unix socket, raw clients."""

from __future__ import annotations

import base64
import os
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
from sandbox_helpers import CANARY, Collector, Servers, connect_tunnel, https_get, read_all, read_head, unix

from spyglass.sandbox.proxy import DENY_HEADER, RELAY_MAGIC, EgressProxy

Proxy = tuple[EgressProxy, Collector]


def plain(sock: str, request: bytes) -> bytes:
    s = unix(sock)
    s.sendall(request)
    out = read_all(s)
    s.close()
    return out


def test_https_through_connect_is_allowed_and_recorded(proxy: Proxy, servers: Servers) -> None:
    p, col = proxy
    assert servers.cert is not None
    head, body = https_get(p.socket_path, "allowed.test", "/", servers.cert)
    assert head.startswith(b"HTTP/1.1 200")
    assert b"hello from allowed.test" in body
    ev = col.wait_for(1)[-1]
    assert (ev.type, ev.address, ev.port, ev.method, ev.decision) == (
        "proxy.request",
        "allowed.test",
        443,
        "CONNECT",
        "allow",
    )
    assert ev.rule == "allowed.test"
    assert ev.bytes_out and ev.bytes_in and ev.bytes_in > len(b"hello")
    assert ev.pid == os.getpid()  # no relay: the peer of the unix socket is to blame


def test_denied_host_gets_403_with_reason_and_a_deny_event(proxy: Proxy) -> None:
    p, col = proxy
    head, s = connect_tunnel(p.socket_path, "denied.test", 443)
    s.close()
    assert head.startswith(b"HTTP/1.1 403")
    assert f"{DENY_HEADER}: denied-by-rule".encode() in head
    ev = col.wait_for(1)[-1]
    assert (ev.decision, ev.reason, ev.rule, ev.ok) == ("deny", "denied-by-rule", "denied.test", False)


def test_unlisted_host_is_not_allowed(proxy: Proxy) -> None:
    p, _col = proxy
    head, s = connect_tunnel(p.socket_path, "elsewhere.test", 443)
    s.close()
    assert f"{DENY_HEADER}: not-allowed".encode() in head
    assert p.upstream_attempts == type(p.upstream_attempts)() or all(
        a != "elsewhere.test" for a, _ in p.upstream_attempts
    )


@pytest.mark.parametrize("target", ["1.1.1.1:443", "16843009:443", "[2606:4700::1111]:443"])
def test_ip_literals_are_refused_before_any_connection(proxy: Proxy, target: str) -> None:
    p, col = proxy
    host, _, port = target.rpartition(":")
    head, s = connect_tunnel(p.socket_path, host, int(port))
    s.close()
    assert f"{DENY_HEADER}: ip-literal".encode() in head
    assert col.wait_for(1)[-1].reason == "ip-literal"
    assert not any(a in ("1.1.1.1", "2606:4700::1111") for a, _ in p.upstream_attempts)


def test_private_resolution_is_refused_unless_an_address_entry_allows_it(
    servers: Servers, short_dir: Path
) -> None:
    from spyglass.sandbox.egress import EgressPolicy
    from spyglass.sandbox.proxy import static_resolver

    col = Collector()
    table = {"allowed.test": "127.0.0.1", "meta.test": "169.254.169.254"}
    with EgressProxy(
        str(short_dir / "p.sock"),
        EgressPolicy(["allowed.test", "meta.test"]),
        sink=col,
        resolver=static_resolver(table),
    ) as p:
        for host, reason in (("allowed.test", "private-address"), ("meta.test", "metadata-address")):
            head, s = connect_tunnel(p.socket_path, host, 443)
            s.close()
            assert f"{DENY_HEADER}: {reason}".encode() in head
        assert not p.upstream_attempts


def test_plain_http_is_forwarded_in_origin_form_with_proxy_headers_removed(
    proxy: Proxy, servers: Servers
) -> None:
    p, col = proxy
    out = plain(
        p.socket_path,
        b"GET http://allowed.test/hello HTTP/1.1\r\nHost: evil.test\r\n"
        b"Proxy-Authorization: Basic eDp5\r\nProxy-Connection: keep-alive\r\n\r\n",
    )
    assert out.startswith(b"HTTP/1.1 200") and b"hello from allowed.test" in out
    got = servers.received[-1]
    assert got.path == "/hello" and got.headers["Host"] == "allowed.test"
    assert "Proxy-Authorization" not in got.headers and "Proxy-Connection" not in got.headers
    ev = col.wait_for(1)[-1]
    assert (ev.method, ev.port, ev.decision) == ("GET", 80, "allow")


def test_canary_in_a_plain_http_body_is_blocked_before_it_leaves(proxy: Proxy, servers: Servers) -> None:
    p, col = proxy
    before = len(servers.received)
    body = f"key={CANARY}".encode()
    out = plain(
        p.socket_path,
        b"POST http://allowed.test/upload HTTP/1.1\r\nHost: allowed.test\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body),
    )
    ev = col.wait_for(1)[-1]
    assert (ev.decision, ev.reason, ev.detail) == ("deny", "canary", "canary")
    assert b"200" not in out.split(b"\r\n")[0]
    assert all(CANARY.encode() not in r.body for r in servers.received[before:])


def test_canary_split_across_writes_and_base64_in_a_header_is_found(proxy: Proxy, servers: Servers) -> None:
    p, col = proxy
    s = unix(p.socket_path)
    body = b"a" * 70000 + CANARY.encode() + b"b" * 10
    s.sendall(
        b"POST http://allowed.test/upload HTTP/1.1\r\nHost: allowed.test\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    )
    s.sendall(body[:70010])
    time.sleep(0.1)
    s.sendall(body[70010:])
    read_all(s)
    s.close()
    assert col.wait_for(1)[-1].detail == "canary"
    token = base64.b64encode(b"user:" + CANARY.encode()).decode()
    out = plain(
        p.socket_path, f"GET http://allowed.test/ HTTP/1.1\r\nAuthorization: Basic {token}\r\n\r\n".encode()
    )
    assert f"{DENY_HEADER}: canary".encode() in out
    assert col.wait_for(2)[-1].detail == "canary"


def test_half_closed_tunnel_still_gets_its_answer(proxy: Proxy, servers: Servers) -> None:
    p, col = proxy
    head, s = connect_tunnel(p.socket_path, "allowed.test", 7)
    assert head.startswith(b"HTTP/1.1 200")
    s.sendall(b"z" * 100_000)
    s.shutdown(socket.SHUT_WR)
    assert read_all(s) == b"got 100000 bytes after EOF\n"
    s.close()
    ev = col.wait_for(1)[-1]
    assert ev.bytes_out == 100_000 and ev.bytes_in == len(b"got 100000 bytes after EOF\n")


def test_large_and_slow_transfers(proxy: Proxy, servers: Servers) -> None:
    p, col = proxy
    n = 24 * 1024 * 1024
    s = unix(p.socket_path, timeout=30)
    s.sendall(f"GET http://allowed.test/big/{n} HTTP/1.1\r\n\r\n".encode())
    head = read_head(s)
    got = 0
    while True:
        d = s.recv(1 << 20)
        if not d:
            break
        got += len(d)
    s.close()
    assert head.startswith(b"HTTP/1.1 200") and got == n
    up = b"u" * (8 * 1024 * 1024)
    out = plain(
        p.socket_path,
        b"POST http://allowed.test/upload HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(up) + up,
    )
    assert b"got 8388608 bytes" in out
    out = plain(p.socket_path, b"GET http://allowed.test/slow HTTP/1.1\r\n\r\n")
    assert out.endswith(b"ssssssssss")
    evs = col.wait_for(3)
    assert any(e.bytes_in and e.bytes_in > n for e in evs)


def test_concurrent_connections(proxy: Proxy, servers: Servers) -> None:
    p, col = proxy
    assert servers.cert is not None
    results: list[bool] = []

    def one(i: int) -> None:
        if i % 2:
            _head, body = https_get(p.socket_path, "allowed.test", f"/c{i}", servers.cert)  # type: ignore[arg-type]
            results.append(b"hello from" in body)
        else:
            out = plain(p.socket_path, f"GET http://allowed.test/c{i} HTTP/1.1\r\n\r\n".encode())
            results.append(b"hello from" in out)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(60)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results.count(True) == 60
    assert len(col.wait_for(60)) >= 60


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(64),  # a TLS hello to a plain proxy
        b"GET\r\n\r\n",
        b"GET http://allowed.test/ HTTP/1.1\r\n" + b"X-Long: " + b"a" * 100_000 + b"\r\n\r\n",
        b"CONNECT allowed.test:notaport HTTP/1.1\r\n\r\n",
        b"GET ftp://allowed.test/ HTTP/1.1\r\n\r\n",
        b"\x05\x01\x00\x04\x01\x00",  # SOCKS5 with an impossible address
        RELAY_MAGIC + b"\xff\xff",  # a relay header cut short
        b"\x00junk\x00\x00\x00",
        b"",
    ],
)
def test_garbage_input_never_takes_the_proxy_down(proxy: Proxy, servers: Servers, garbage: bytes) -> None:
    p, _col = proxy
    s = unix(p.socket_path, timeout=5)
    try:
        s.sendall(garbage)
        s.shutdown(socket.SHUT_WR)
        out = read_all(s)
    except OSError:
        out = b""
    s.close()
    assert not out.startswith(b"HTTP/1.1 200")
    good = plain(p.socket_path, b"GET http://allowed.test/after HTTP/1.1\r\n\r\n")
    assert good.startswith(b"HTTP/1.1 200")
    assert p.counts["errors"] == 0


def test_a_silent_client_is_dropped_after_the_head_timeout(proxy: Proxy) -> None:
    p, _col = proxy
    s = unix(p.socket_path, timeout=20)
    s.sendall(b"GET http://allowed.test/ HTTP/1.1\r\n")  # and never finishes the head
    assert s.recv(100) == b""  # closed by the proxy (a socket timeout would raise here)
    s.close()
    good = plain(p.socket_path, b"GET http://allowed.test/ HTTP/1.1\r\n\r\n")
    assert good.startswith(b"HTTP/1.1 200")


def test_socks5_with_domain_names(proxy: Proxy, servers: Servers) -> None:
    p, col = proxy

    def socks(host: bytes, port: int) -> tuple[bytes, socket.socket]:
        s = unix(p.socket_path)
        s.sendall(b"\x05\x01\x00")
        assert s.recv(2) == b"\x05\x00"
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(host)]) + host + struct.pack(">H", port))
        return s.recv(10), s

    reply, s = socks(b"allowed.test", 80)
    assert reply[:2] == b"\x05\x00"
    s.sendall(b"GET /socks HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
    assert b"hello from allowed.test" in read_all(s)
    s.close()
    reply, s = socks(b"denied.test", 80)
    s.close()
    assert reply[:2] == b"\x05\x02"
    evs = col.wait_for(2)
    assert [(e.method, e.decision) for e in evs[-2:]] == [("SOCKS5", "allow"), ("SOCKS5", "deny")]


def test_relay_header_is_consumed_and_events_survive_a_failing_sink(
    servers: Servers, short_dir: Path
) -> None:
    from spyglass.sandbox.egress import EgressPolicy
    from spyglass.sandbox.proxy import static_resolver

    def broken(ev: object, wait: bool) -> None:
        raise RuntimeError("sink down")

    with EgressProxy(
        str(short_dir / "r.sock"),
        EgressPolicy(["allowed.test", "127.0.0.0/8"], allow_host_loopback=True),
        sink=broken,
        resolver=static_resolver(servers.resolve_table()),
    ) as p:
        out = plain(
            p.socket_path,
            RELAY_MAGIC + struct.pack(">HH", 40000, 3128) + b"GET http://allowed.test/ HTTP/1.1\r\n\r\n",
        )
        assert out.startswith(b"HTTP/1.1 200")
        out = plain(p.socket_path, b"GET http://allowed.test/ HTTP/1.1\r\n\r\n")
        assert out.startswith(b"HTTP/1.1 200")


def test_a_block_rule_can_veto_an_allowed_request(servers: Servers, short_dir: Path) -> None:
    from spyglass.sandbox.egress import EgressPolicy
    from spyglass.sandbox.proxy import static_resolver

    asked = []

    def veto(ev: object) -> str | None:
        asked.append(ev)
        return "no-uploads" if getattr(ev, "method", None) == "POST" else None

    col = Collector()
    policy = EgressPolicy(["allowed.test", "127.0.0.0/8"], allow_host_loopback=True)
    with EgressProxy(
        str(short_dir / "v.sock"),
        policy,
        sink=col,
        veto=veto,
        resolver=static_resolver(servers.resolve_table()),
    ) as p:
        assert plain(p.socket_path, b"GET http://allowed.test/ HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 200")
        out = plain(p.socket_path, b"POST http://allowed.test/up HTTP/1.1\r\nContent-Length: 1\r\n\r\nx")
        assert f"{DENY_HEADER}: blocked-by-rule".encode() in out
    ev = col.wait_for(2)[-1]
    assert (ev.decision, ev.reason, ev.rule) == ("deny", "blocked-by-rule", "no-uploads")
    assert [getattr(e, "decision", None) for e in asked] == ["allow", "allow"]
