"""The local stand-in for the hosts a skill declares: one HTTP server on loopback.

The egress proxy sends requests for declared hosts here (names are pinned to it
by a static resolver); it answers every method and path with a small JSON
document and keeps what it received, so API-client skills run end to end
without the internet.  Plain HTTP only: an ``https://`` request is tunnelled
to it and fails the TLS handshake (no interception CA is set up).
"""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any

import msgspec

from spyglass.sandbox.resolve import Resolver, static_resolver

BODY = {"ok": True, "items": [{"id": 1, "name": "alpha", "value": 3.5}, {"id": 2, "name": "beta", "value": 7.25}]}


class Request(msgspec.Struct):
    method: str
    host: str
    path: str
    body_bytes: int


class StandIn(msgspec.Struct):
    server: http.server.ThreadingHTTPServer
    thread: threading.Thread
    received: list[Request] = msgspec.field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def resolver(self, hosts: list[str], extra: dict[str, str | tuple[str, int]] | None = None) -> Resolver:
        """Each of ``hosts`` (ports 80, 443, 8080, or the one given) pinned to the stand-in; ``extra``
        pins more names (``{"model.test:80": ("127.0.0.1", PORT)}``)."""
        table: dict[str, str | tuple[str, int]] = dict(extra or {})
        for h in hosts:
            name, _, port = h.partition(":")
            if name.startswith("*."):
                name = name[2:]
            if port:
                table[f"{name.lower()}:{port}"] = ("127.0.0.1", self.port)
            else:
                for p in (80, 443, 8080):
                    table[f"{name.lower()}:{p}"] = ("127.0.0.1", self.port)
        return static_resolver(table)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def start_standin() -> StandIn:
    received: list[Request] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                self.rfile.read(min(n, 10 * 1024 * 1024))
            received.append(Request(self.command, self.headers.get("Host", ""), self.path, n))
            data = json.dumps(BODY).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="skill-standin", daemon=True)
    thread.start()
    return StandIn(server, thread, received)
