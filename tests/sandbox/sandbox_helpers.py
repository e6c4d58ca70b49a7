"""Helpers for the sandbox tests: loopback test servers (HTTP, HTTPS, half-close echo),
a self-signed certificate, raw proxy clients over the unix socket, and sandboxed runs."""

from __future__ import annotations

import datetime
import http.server
import shutil
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from spyglass.events import Alert, Event

NAMES = ("allowed.test", "denied.test")
CANARY = "Zq7CanaryTestValue0123XY"
needs_strace = pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def make_cert(directory: Path, names: Sequence[str] = NAMES) -> tuple[Path, Path]:
    """A self-signed certificate for ``names`` (and 127.0.0.1): (cert.pem, key.pem)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    now = datetime.datetime.now(datetime.UTC)
    san = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Servers:
    http_port: int = 0
    https_port: int = 0
    eof_port: int = 0
    cert: Path | None = None
    received: list[Received] = field(default_factory=list)
    _stops: list[Any] = field(default_factory=list)

    def resolve_table(self) -> dict[str, str | tuple[str, int]]:
        """allowed.test / denied.test on ports 80 and 443 -> the loopback servers."""
        table: dict[str, str | tuple[str, int]] = {}
        for n in NAMES:
            table[f"{n}:80"] = ("127.0.0.1", self.http_port)
            table[f"{n}:443"] = ("127.0.0.1", self.https_port)
            table[f"{n}:7"] = ("127.0.0.1", self.eof_port)
        return table

    def close(self) -> None:
        for stop in self._stops:
            stop()


def _handler(servers: Servers) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _reply(self, body: bytes, status: int = 200) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            servers.received.append(Received("GET", self.path, dict(self.headers), b""))
            if self.path.startswith("/big/"):
                n = int(self.path.split("/")[2])
                self.send_response(200)
                self.send_header("Content-Length", str(n))
                self.end_headers()
                chunk = b"x" * 65536
                left = n
                while left > 0:
                    self.wfile.write(chunk[: min(left, len(chunk))])
                    left -= len(chunk)
                return
            if self.path == "/slow":
                self.send_response(200)
                self.send_header("Content-Length", "10")
                self.end_headers()
                for _ in range(10):
                    self.wfile.write(b"s")
                    self.wfile.flush()
                    time.sleep(0.05)
                return
            self._reply(f"hello from {self.headers.get('Host')}\n".encode())

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n)
            servers.received.append(Received("POST", self.path, dict(self.headers), body))
            self._reply(f"got {len(body)} bytes\n".encode())

    return Handler


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that the proxy cut off (canary, garbage) are expected here


def start_servers(directory: Path) -> Servers:
    servers = Servers()
    handler = _handler(servers)
    httpd = _QuietServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    servers.http_port = httpd.server_address[1]
    cert, key = make_cert(directory)
    servers.cert = cert
    httpsd = _QuietServer(("127.0.0.1", 0), handler)
    httpsd.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    httpsd.socket = ctx.wrap_socket(httpsd.socket, server_side=True)
    servers.https_port = httpsd.server_address[1]
    for srv in (httpd, httpsd):
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers._stops.append(srv.shutdown)
        servers._stops.append(srv.server_close)
    # half-close server: reads until EOF, then answers with the count and closes
    eof = socket.socket()
    eof.bind(("127.0.0.1", 0))
    eof.listen(16)
    servers.eof_port = eof.getsockname()[1]

    def one(c: socket.socket) -> None:
        n = 0
        while True:
            d = c.recv(65536)
            if not d:
                break
            n += len(d)
        time.sleep(0.05)
        c.sendall(f"got {n} bytes after EOF\n".encode())
        c.close()

    serve_each(eof, one)
    servers._stops.append(eof.close)
    return servers


def serve_each(srv: socket.socket, one: Callable[[socket.socket], None]) -> None:
    """Accepts connections on the listening ``srv`` until it is closed, each handled by ``one`` in a
    thread of its own."""

    def serve() -> None:
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=one, args=(c,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


# ------------------------------------------------------------------ proxy clients
def unix(sock_path: str, timeout: float = 10.0) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(sock_path)
    return s


def read_all(s: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            d = s.recv(65536)
        except (TimeoutError, ConnectionResetError):
            break
        if not d:
            break
        out += d
    return out


def read_head(s: socket.socket) -> bytes:
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(1)
        if not d:
            break
        buf += d
    return buf


def connect_tunnel(sock_path: str, host: str, port: int) -> tuple[bytes, socket.socket]:
    s = unix(sock_path)
    s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    return read_head(s), s


def https_get(sock_path: str, host: str, path: str, cafile: Path) -> tuple[bytes, bytes]:
    """(CONNECT answer head, HTTPS response) through the proxy."""
    head, s = connect_tunnel(sock_path, host, 443)
    if b" 200 " not in head.split(b"\r\n")[0]:
        s.close()
        return head, b""
    ctx = ssl.create_default_context(cafile=str(cafile))
    t = ctx.wrap_socket(s, server_hostname=host)
    t.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while True:
        try:
            d = t.recv(65536)
        except (ssl.SSLError, OSError):
            break
        if not d:
            break
        data += d
    t.close()
    return head, data


# ------------------------------------------------------------------ event collection
class Collector:
    """An EventSink for the proxy that keeps events (no run behind it)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.cond = threading.Condition()

    def __call__(self, ev: Event, wait: bool) -> None:
        with self.cond:
            self.events.append(ev)
            self.cond.notify_all()

    def wait_for(self, n: int, timeout: float = 10.0) -> list[Event]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.events) < n and time.monotonic() < deadline:
                self.cond.wait(0.1)
            return list(self.events)


class KillOn:
    """A stand-in kill rule for tests: alert (and stop the agent in enforce mode) on a match."""

    name = "test-kill-rule"

    def __init__(self, rule_id: str, match: Any, enforce: bool = True) -> None:
        self.rule_id, self.match, self.enforce = rule_id, match, enforce
        self.ctx: Any = None
        self.fired: list[Event] = []

    def start(self, ctx: Any) -> None:
        self.ctx = ctx

    def event(self, ev: Event) -> None:
        if self.fired or not self.match(ev):
            return
        self.fired.append(ev)
        self.ctx.raise_alert(
            Alert(
                rule_id=self.rule_id,
                title=self.rule_id,
                level="critical",
                action="kill",
                pid=ev.pid,
                event_seqs=[ev.seq],
            )
        )
        if self.enforce and self.ctx.stop_agent is not None:
            self.ctx.stop_agent(self.rule_id)


# ------------------------------------------------------------------ sandboxed runs
CANARY_RULE = """\
id: test-canary-egress
title: Honeytoken canary in outbound traffic
level: critical
action: kill
tags: [attack.exfiltration]
detection:
  c:
    type: proxy.request
    detail: canary
  condition: c
"""


@dataclass
class SandboxRun:
    outcome: Any
    reader: Any
    sandbox: Any
    engine: Any
    ws: Path

    def events(self, etype: str | None = None) -> list[Event]:
        return [e for e in self.reader.events() if etype is None or e.type == etype]

    def alerts(self) -> list[Alert]:
        return list(self.reader.alerts())


def run_sandboxed(
    tmp_path: Path,
    script: str,
    *,
    mode: str = "contain",
    servers: Servers | None = None,
    sinks: Sequence[object] = (),
    rules: bool = True,
    backend_options: dict[str, object] | None = None,
    files: dict[str, str] | None = None,
    resolve_extra: dict[str, str | tuple[str, int]] | None = None,
    **prep: Any,
) -> SandboxRun:
    """Run ``sh -c script`` in a sandbox under the strace backend, with the rule engine."""
    from spyglass.capture import get_backend
    from spyglass.rules.engine import RuleEngine
    from spyglass.rules.ruleset import load_ruleset
    from spyglass.sandbox import prepare
    from spyglass.sandbox.proxy import static_resolver
    from spyglass.session.record import RunRequest, record
    from spyglass.store import RunReader, Store

    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    for name, text in (files or {}).items():
        (ws / name).write_text(text)
    if servers is not None and servers.cert is not None:
        shutil.copy(servers.cert, ws / "cert.pem")
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    store = Store(tmp_path / "store", create=True)
    options: dict[str, Any] = dict(
        cwd=str(ws),
        real_home=str(home),
        allow=["allowed.test", "127.0.0.0/8"],
        deny=["denied.test"],
        allow_host_loopback=True,
        resolver=static_resolver({**(servers.resolve_table() if servers else {}), **(resolve_extra or {})}),
        mode=mode,
        store_root=str(tmp_path / "store"),
    )
    options.update(prep)
    sb = prepare(tmp_path / "work", [str(ws)], **options)
    engine = None
    all_sinks: list[object] = [*sb.sinks]
    if rules:
        rule_file = tmp_path / "canary-rule.yaml"
        rule_file.write_text(CANARY_RULE)
        engine = RuleEngine(load_ruleset(extra_paths=[rule_file]), mode=mode, home=str(home))
        all_sinks.append(engine)
    all_sinks += list(sinks)
    request = RunRequest(
        argv=["/bin/sh", "-c", script],
        cwd=str(ws),
        workspace=[str(ws)],
        mode=mode,
        sandbox=True,
        extra=sb.run_extra(),
        backend_options=dict(backend_options or {}),
    )
    try:
        outcome = record(request, sb.backend(get_backend("strace")), store, all_sinks)
    finally:
        sb.close()
    return SandboxRun(outcome, RunReader(store, outcome.meta.id), sb, engine, ws)
