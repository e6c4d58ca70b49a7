"""The egress proxy: the sandbox's only way out, outside the sandbox, on a unix socket.

It speaks what clients configured through ``HTTP(S)_PROXY``/``ALL_PROXY`` use:
``CONNECT host:port`` tunnels (HTTPS and anything else), plain HTTP requests
in absolute form (``GET http://host/path``), and SOCKS5 with domain names
(``socks5h://``).  Each request is decided by host name against the policy
(:mod:`spyglass.sandbox.egress`), the name is resolved here (never inside the
sandbox) and every resolved address is checked again; a refusal is answered
``403`` with an ``X-Spyglass-Denied`` header naming the reason.  Outbound
bytes (request heads, plain-HTTP bodies, tunnel payloads) are scanned for the
run's canaries; a hit blocks the request and is reported with
``detail="canary"``.  The judgement of a request (policy, canaries, veto,
resolution, upstream) is :class:`spyglass.sandbox.proxy_judge.RequestJudge`;
this module reads requests, answers, tunnels and reports.

Every decision becomes one ``proxy.request`` event handed to ``sink``: denials
at once, allowed requests when they end (with byte counts).  The proxy runs
an asyncio loop in its own thread; no connection's failure, garbage input,
slow peer or half-closed socket can take it, or the run, down.

Why not a library, and how it holds up under load and abuse: docs/sandbox.md.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import struct
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

from spyglass.logs import get_logger
from spyglass.sandbox import attribution, wire
from spyglass.sandbox.decoy import CanaryScanner
from spyglass.sandbox.egress import EgressPolicy
from spyglass.sandbox.proxy_judge import RequestJudge
from spyglass.sandbox.proxy_request import (
    BLOCKED,
    CANARY,
    DENY_HEADER,
    PREFETCH_BODY,
    RELAY_HEADER_LEN,
    RELAY_MAGIC,
    EventSink,
    Veto,
    _CanaryFound,
    _Refused,
    _Request,
    request_event,
)
from spyglass.sandbox.resolve import Resolver, default_resolver, static_resolver

__all__ = [
    "BLOCKED", "CANARY", "DENY_HEADER", "RELAY_MAGIC", "EgressProxy", "Resolver", "Veto",
    "default_resolver", "static_resolver",
]

log = get_logger("spyglass.sandbox.proxy")

class EgressProxy(RequestJudge):
    """``start()`` it, point the relay at ``socket_path``, ``close()`` it at the end of the run."""

    def __init__(
        self,
        socket_path: str,
        policy: EgressPolicy,
        *,
        canary_patterns: Sequence[bytes] = (),
        sink: EventSink | None = None,
        resolver: Resolver | None = None,
        block_canary: bool = True,
        max_connections: int = 512,
        head_timeout: float = 30.0,
        connect_timeout: float = 20.0,
        ack_timeout: float = 5.0,
        attribute: bool = True,
        veto: Veto | None = None,
        interceptor: Any = None,
        ask: Any = None,
    ) -> None:
        self.socket_path = socket_path
        self.ask = ask  # spyglass.sandbox.ask.EgressAsk: put a refused host to the operator
        #: spyglass.sandbox.intercept.Interceptor: tunnels to the brokered hosts go through it
        self.interceptor = interceptor
        self._tunnels: dict[int, _Request] = {}
        if interceptor is not None:
            interceptor.on_misuse = self._on_misuse
        self.veto = veto
        self.policy = policy
        self.patterns = list(canary_patterns)
        self.sink = sink
        self.resolver = resolver or default_resolver
        self.block_canary = block_canary
        self.max_connections = max_connections
        self.head_timeout = head_timeout
        self.connect_timeout = connect_timeout
        self.ack_timeout = ack_timeout
        self.attribute = attribute
        self.counts: dict[str, int] = {"requests": 0, "allowed": 0, "denied": 0, "errors": 0}
        #: every upstream connection attempted (address, port), newest last (bounded)
        self.upstream_attempts: deque[tuple[str, int]] = deque(maxlen=10000)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._tasks: dict[asyncio.Task[None], _Request] = {}
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="spyglass-egress-proxy", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error
        if not self._ready.is_set():
            raise RuntimeError("egress proxy did not start")

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket_path)
            self._server = loop.run_until_complete(
                asyncio.start_unix_server(self._handle, path=self.socket_path, limit=65536, backlog=512)
            )
            os.chmod(self.socket_path, 0o600)
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    def flush(self, timeout: float = 2.0) -> None:
        """End every open connection now and report it (the agent is gone)."""
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running():
            return
        fut = asyncio.run_coroutine_threadsafe(self._cancel_all(), loop)
        with contextlib.suppress(Exception):
            fut.result(timeout)

    async def _cancel_all(self) -> None:
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.5)

    def close(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed() and loop.is_running():

            async def _shutdown() -> None:
                if self._server is not None:
                    self._server.close()
                await self._cancel_all()

            fut = asyncio.run_coroutine_threadsafe(_shutdown(), loop)
            with contextlib.suppress(Exception):
                fut.result(3)
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        with contextlib.suppress(OSError):
            os.unlink(self.socket_path)

    def __enter__(self) -> EgressProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ events
    def _report(self, req: _Request, *, wait: bool = False) -> concurrent.futures.Future[None] | None:
        if req.reported:
            return None
        req.reported = True
        allowed = req.decision == "allow"
        self.counts["allowed" if allowed else "denied"] += 1
        ev = request_event(req, req.decision or "deny")
        if self.sink is None:
            return None
        try:
            return self.sink(ev, wait)
        except Exception:
            self.counts["errors"] += 1
            if self.counts["errors"] <= 3:
                log.exception("event sink failed (the proxy goes on)")
            return None

    async def _report_and_wait(self, req: _Request) -> None:
        """Report a denial and hold the client until the run has processed it, so
        that an enforcement kill lands before the agent sees the answer."""
        await self._settle_pid(req)
        fut = self._report(req, wait=True)
        if fut is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.wrap_future(fut), self.ack_timeout)

    # ------------------------------------------------------------ connection
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        req = _Request()
        task = asyncio.current_task()
        assert task is not None
        self._tasks[task] = req
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            if len(self._tasks) > self.max_connections:
                raise _Refused(503, "too-many-connections")
            sock = writer.get_extra_info("socket")
            req.relay_pid = attribution.peer_pid(sock) if sock is not None else None
            req.pid = req.relay_pid or 0
            first = await asyncio.wait_for(reader.readexactly(1), self.head_timeout)
            if first == RELAY_MAGIC[:1]:
                rest = await asyncio.wait_for(reader.readexactly(RELAY_HEADER_LEN - 1), self.head_timeout)
                if first + rest[:3] != RELAY_MAGIC:
                    raise _Refused(400, "bad-request")
                req.client_port, req.relay_port = struct.unpack(">HH", rest[3:])
                first = await asyncio.wait_for(reader.readexactly(1), self.head_timeout)
            if self.attribute and req.relay_pid and req.client_port and req.relay_port:
                # who asked: looked up while the request is read and decided
                req.attribution = asyncio.get_running_loop().run_in_executor(
                    None, attribution.client_pid, req.relay_pid, req.client_port, req.relay_port
                )
            if first == b"\x05":
                upstream = await self._socks5(req, reader, writer)
            else:
                upstream = await self._http(req, first, reader, writer)
            if upstream is not None:
                await self._pipe(req, reader, writer, *upstream)
        except _Refused as r:
            # a policy refusal is a deny; an allowed request whose upstream failed stays "allow"
            req.decision = req.decision or "deny"
            req.reason = req.reason if req.decision == "allow" else (r.reason or req.reason)
            req.detail = req.detail or r.detail
            await self._refuse(req, writer, r.status)
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            if req.decision is None:
                req.decision, req.reason = "deny", "bad-request"
        except asyncio.CancelledError:
            pass
        except Exception:
            self.counts["errors"] += 1
            log.exception("proxy connection failed")
            if req.decision is None:
                req.decision, req.reason = "deny", "proxy-error"
        finally:
            if upstream is not None:
                with contextlib.suppress(Exception):
                    self._tunnels.pop(int(upstream[1].get_extra_info("sockname")[1]), None)
            for w in (writer, upstream[1] if upstream else None):
                if w is not None:
                    with contextlib.suppress(Exception):
                        w.close()
            if req.decision is not None or req.host is not None:
                self.counts["requests"] += 1
                await self._settle_pid(req)
                self._report(req)
            self._tasks.pop(task, None)

    async def _refuse(self, req: _Request, writer: asyncio.StreamWriter, status: int) -> None:
        await self._report_and_wait(req)
        if req.method == "SOCKS5":
            writer.write(wire.socks5_refusal(status))
        else:
            where = f"{req.host}:{req.port}" if req.host else None
            writer.write(wire.refusal_response(status, req.reason or "refused", DENY_HEADER, where))
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.drain(), 5)

    # ------------------------------------------------------------ HTTP
    async def _readline(self, reader: asyncio.StreamReader) -> bytes:
        try:
            return await asyncio.wait_for(reader.readline(), self.head_timeout)
        except (ValueError, asyncio.LimitOverrunError):  # a line longer than the stream's limit
            raise _Refused(400, "bad-request") from None

    async def _http(
        self, req: _Request, first: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        lines: list[bytes] = []
        size = 0
        line = first + await self._readline(reader)
        while True:
            if not line.endswith(b"\n"):
                raise _Refused(400, "bad-request")
            size += len(line)
            if size > wire.MAX_HEAD_BYTES or len(lines) > wire.MAX_HEAD_LINES:
                raise _Refused(400, "bad-request")
            if line in (b"\r\n", b"\n"):
                break
            lines.append(line.rstrip(b"\r\n"))
            line = await self._readline(reader)
        raw_head = b"\n".join(lines)
        head = wire.parse_head(lines)
        req.method = head.method
        if head.method == "CONNECT":
            req.host, req.port = wire.split_authority(head.target, None)
            ur, uw = await self._decide_and_connect(req, raw_head)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            return ur, uw
        req.host, req.port, path = wire.http_target(head)
        # a body of known, modest size is read and scanned before anything is sent upstream
        body = b""
        length = wire.content_length(head)
        if length is not None and length <= PREFETCH_BODY:
            try:
                body = await asyncio.wait_for(reader.readexactly(length), self.head_timeout)
            except asyncio.IncompleteReadError as exc:
                body = exc.partial
        ur, uw = await self._decide_and_connect(req, raw_head + b"\n" + body if body else raw_head)
        data = wire.origin_request(head, req.host, req.port, path) + body
        req.bytes_out += len(data)
        uw.write(data)
        await uw.drain()
        return ur, uw

    # ------------------------------------------------------------ SOCKS5
    async def _socks5(
        self, req: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        req.method = "SOCKS5"
        req.host, req.port = await wire.socks5_request(reader, writer, self.head_timeout)
        ur, uw = await self._decide_and_connect(req, req.host.encode())
        writer.write(wire.SOCKS5_OK)
        await writer.drain()
        return ur, uw

    # ------------------------------------------------------------ tunnel
    async def _pipe(
        self,
        req: _Request,
        client_r: asyncio.StreamReader,
        client_w: asyncio.StreamWriter,
        up_r: asyncio.StreamReader,
        up_w: asyncio.StreamWriter,
    ) -> None:
        scanner = CanaryScanner(self._patterns_for(req))

        async def outbound() -> None:
            while True:
                data = await client_r.read(65536)
                if not data:
                    break
                if scanner.feed(data):
                    req.detail = CANARY
                    if self.block_canary:
                        raise _CanaryFound()
                req.bytes_out += len(data)
                up_w.write(data)
                await up_w.drain()
            if up_w.can_write_eof():
                with contextlib.suppress(OSError):
                    up_w.write_eof()

        async def inbound() -> None:
            while True:
                data = await up_r.read(65536)
                if not data:
                    break
                req.bytes_in += len(data)
                client_w.write(data)
                await client_w.drain()
            if client_w.can_write_eof():
                with contextlib.suppress(OSError):
                    client_w.write_eof()

        tasks = [asyncio.ensure_future(outbound()), asyncio.ensure_future(inbound())]
        try:
            pending: set[asyncio.Future[None]] = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for t in done:
                    exc = t.exception()
                    if isinstance(exc, _CanaryFound):
                        req.decision, req.reason = "deny", CANARY
                        up_w.close()
                        await self._report_and_wait(req)
                        raise exc
                    if exc is not None:
                        raise exc
        except _CanaryFound:
            pass
        except (ConnectionError, OSError):
            pass
        finally:
            for t in tasks:
                t.cancel()
            with contextlib.suppress(Exception):
                await asyncio.gather(*tasks, return_exceptions=True)
