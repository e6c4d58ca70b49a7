"""TLS interception of the brokered hosts, with mitmproxy's core running in this process.

Only connections that the egress proxy has already allowed, to a host some
brokered secret may be sent to, come here: the proxy opens a ``CONNECT``
tunnel to the interceptor's loopback port instead of to the upstream.  Every
other host is tunnelled by the egress proxy untouched, so a per-run CA is
needed only for the brokered hosts.

* The per-run CA is generated here (RSA 2048, valid for two days), written to
  the interceptor's own directory (outside the sandbox), and trusted inside
  the sandbox only (see :meth:`Interceptor.trust_files`).
* Upstream addresses are pinned: mitmproxy connects to the address the
  egress proxy resolved and vetted, never resolving the name again.
* Requests are rewritten by :meth:`spyglass.sandbox.broker.Broker.substitute`;
  a request carrying a placeholder to a host its secret may not reach is
  answered 403 and reported.

Why mitmproxy: TLS termination, HTTP/1 and HTTP/2 and certificate minting are
what it is made for; writing them again would be the riskiest code here.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spyglass.logs import get_logger
from spyglass.sandbox.broker import MISUSE_RULE, Broker, BrokerError

log = get_logger("spyglass.sandbox.intercept")

CA_FILE = "mitmproxy-ca.pem"  # key + certificate: the name mitmproxy looks for in its confdir
CA_CERT = "ca-cert.pem"
SYSTEM_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")


def make_ca(directory: Path) -> Path:
    """A fresh CA for this run; returns the path of its certificate (PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "spyglass"),
        x509.NameAttribute(NameOID.COMMON_NAME, "spyglass per-run CA (secrets broker)"),
    ])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    pem_cert = cert.public_bytes(serialization.Encoding.PEM)
    pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())
    ca = directory / CA_FILE
    ca.touch(mode=0o600)
    ca.write_bytes(pem_key + pem_cert)
    (directory / CA_CERT).write_bytes(pem_cert)
    return directory / CA_CERT


class _Addon:
    """mitmproxy hooks: pin the upstream address, substitute the secrets, refuse misuse."""

    def __init__(self, owner: Interceptor) -> None:
        self.owner = owner

    def server_connect(self, data: Any) -> None:
        host, port = data.server.address
        pin = self.owner.pins.get((str(host).lower(), int(port)))
        if pin is not None:
            data.server.address = pin
            data.server.sni = str(host)

    def request(self, flow: Any) -> None:
        from mitmproxy import http

        # the host and port the egress proxy decided on (the tunnel's CONNECT), not the pinned address
        target = self.owner.targets.get(int(flow.client_conn.peername[1])) if flow.client_conn.peername else None
        host, port = target if target is not None else (flow.request.pretty_host, flow.request.port)
        if flow.request.scheme != "https" or not flow.client_conn.tls_established:
            # a value is only ever sent inside TLS to a verified upstream
            flow.response = http.Response.make(
                403, b"spyglass: a brokered host is reached over TLS only\n",
                {"X-Spyglass-Denied": "broker-needs-tls", "Content-Type": "text/plain"},
            )
            return
        _used, misused = self.owner.broker.substitute(host, port, flow.request.headers)
        if misused:
            flow.response = http.Response.make(
                403, b"spyglass: a brokered secret may not be sent to this host\n",
                {"X-Spyglass-Denied": MISUSE_RULE, "Content-Type": "text/plain"},
            )
            self.owner.misused(flow.client_conn.peername, host, port, misused)

    def response(self, flow: Any) -> None:
        """Whatever the upstream echoes, the agent never reads a value back."""
        broker = self.owner.broker
        for key in list(flow.response.headers.keys()):
            for val in flow.response.headers.get_all(key):
                masked = broker.mask(val.encode()).decode("utf-8", "replace")
                if masked != val:
                    flow.response.headers.set_all(key, [broker.mask(v.encode()).decode("utf-8", "replace")
                                                        for v in flow.response.headers.get_all(key)])
                    break
        content = flow.response.content
        if content:
            masked_body = broker.mask(content)
            if masked_body != content:
                flow.response.content = masked_body


class Interceptor:
    """mitmproxy in a thread of its own; :meth:`open_tunnel` is called from the egress proxy's loop."""

    def __init__(self, broker: Broker, directory: Path, *, upstream_ca: str | None = None) -> None:
        self.broker = broker
        self.dir = Path(directory)
        self.upstream_ca = upstream_ca
        self.pins: dict[tuple[str, int], tuple[str, int]] = {}
        #: tunnel's local port -> the (host, port) it was opened for
        self.targets: dict[int, tuple[str, int]] = {}
        self.address: tuple[str, int] | None = None
        self.ca_cert: Path | None = None
        self.on_misuse: Callable[[int, str, int, list[str]], None] | None = None
        self._master: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def start(self) -> Interceptor:
        try:
            import mitmproxy  # noqa: F401
        except ImportError:
            raise BrokerError(
                "secrets.broker needs mitmproxy for TLS interception, and it is not installed",
                hint="pip install 'spyglass[broker]' (scripts/setup.sh installs it)",
            ) from None
        self.ca_cert = make_ca(self.dir)
        self._thread = threading.Thread(target=self._run, name="spyglass-intercept", daemon=True)
        self._thread.start()
        if not self._ready.wait(30) or self.address is None:
            self.close()
            raise BrokerError(f"the TLS interceptor did not start: {self._error or 'timed out'}")
        return self

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported through start()
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        from mitmproxy import options
        from mitmproxy.addons import core, next_layer, proxyserver, tlsconfig
        from mitmproxy.master import Master

        opts: Any = options.Options(confdir=str(self.dir), listen_host="127.0.0.1", listen_port=0)
        if self.upstream_ca:
            opts.update(ssl_verify_upstream_trusted_ca=self.upstream_ca)
        master = Master(opts)
        server: Any = proxyserver.Proxyserver()  # type: ignore[no-untyped-call]
        addons: Any = master.addons
        addons.add(core.Core(), server, next_layer.NextLayer(), tlsconfig.TlsConfig(), _Addon(self))
        opts.update(mode=["regular@127.0.0.1:0"])
        self._master = master
        self._loop = asyncio.get_running_loop()
        run = asyncio.ensure_future(master.run())
        for _ in range(1000):
            await asyncio.sleep(0.01)
            addrs = server.listen_addrs()
            if addrs:
                self.address = (str(addrs[0][0]), int(addrs[0][1]))
                break
            if run.done():
                break
        self._ready.set()
        await run

    # ------------------------------------------------------------ for the egress proxy
    def wants(self, host: str, port: int) -> bool:
        return self.broker.intercepts(host, port)

    async def open_tunnel(self, host: str, port: int, upstream: tuple[str, int]) -> tuple[
            asyncio.StreamReader, asyncio.StreamWriter, int]:
        """A ``CONNECT host:port`` tunnel through the interceptor; the upstream address is pinned.
        Returns the reader, the writer and the tunnel's local port (how misuse reports find it)."""
        assert self.address is not None
        self.pins[(host.lower(), port)] = upstream
        r, w = await asyncio.open_connection(*self.address, limit=65536)
        w.write(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        await w.drain()
        status = await asyncio.wait_for(r.readline(), 30)
        while await asyncio.wait_for(r.readline(), 30) not in (b"\r\n", b"\n", b""):
            pass
        if b" 200" not in status:
            w.close()
            raise OSError(f"interceptor refused the tunnel: {status.decode(errors='replace').strip()}")
        local_port = int(w.get_extra_info("sockname")[1])
        self.targets[local_port] = (host, port)
        return r, w, local_port

    def misused(self, peer: Any, host: str, port: int, names: list[str]) -> None:
        if self.on_misuse is not None and peer:
            with contextlib.suppress(Exception):
                self.on_misuse(int(peer[1]), host, port, names)

    # ------------------------------------------------------------ for the sandbox
    def trust_files(self, work: Path) -> tuple[Path, Path]:
        """(bundle, ca): the system bundle plus the run's CA, and the CA alone, for binding into the sandbox."""
        assert self.ca_cert is not None
        ca_pem = self.ca_cert.read_bytes()
        system = b""
        for p in SYSTEM_BUNDLES:
            with contextlib.suppress(OSError):
                system = Path(p).read_bytes()
                break
        bundle = work / "ca-bundle.pem"
        bundle.write_bytes(system.rstrip(b"\n") + b"\n" + ca_pem if system else ca_pem)
        ca = work / "ca.pem"
        ca.write_bytes(ca_pem)
        return bundle, ca

    def close(self) -> None:
        if self._master is not None and self._loop is not None and self._loop.is_running():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._master.shutdown)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._master = None
