"""What the egress proxy's connections carry: the request record, its event, the wire constants."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable

import msgspec

from spyglass.events import Event
from spyglass.sandbox import wire
from spyglass.sandbox.egress import ip_literal

#: hands an event to the run; with ``wait`` it returns a future set once the run processed it
EventSink = Callable[[Event, bool], "concurrent.futures.Future[None] | None"]
#: asked before an allowed request goes out, with the would-be event (decision "allow");
#: returns the id of a ``block`` rule that refuses it, or None.  Runs on the proxy's
#: thread: it must only read (the rule engine's ``would_block``, for example).
Veto = Callable[[Event], "str | None"]

RELAY_MAGIC = b"\x00SG1"  # + u16 client port + u16 relay port
RELAY_HEADER_LEN = 8
DENY_HEADER = "X-Spyglass-Denied"
PREFETCH_BODY = 1 << 20  # plain-HTTP bodies up to this size are scanned before the upstream is contacted
CANARY = "canary"
BLOCKED = "blocked-by-rule"
MISUSE = "secret-placeholder-misuse"  # a brokered secret's placeholder on its way to a host it may not reach


_Refused = wire.Refused


class _CanaryFound(Exception):
    pass


class _Request(msgspec.Struct):
    """What one client connection asked for and what became of it."""

    started: int = msgspec.field(default_factory=time.time_ns)
    pid: int = 0
    relay_pid: int | None = None
    client_port: int | None = None
    relay_port: int | None = None
    method: str | None = None
    host: str | None = None
    port: int | None = None
    decision: str | None = None
    rule: str | None = None
    reason: str | None = None
    detail: str | None = None
    bytes_out: int = 0
    bytes_in: int = 0
    reported: bool = False
    attribution: asyncio.Future[int | None] | None = None


def request_event(req: _Request, decision: str) -> Event:
    """The ``proxy.request`` event of a request, with ``decision``."""
    return Event(
        type="proxy.request",
        ts=req.started,
        pid=req.pid,
        ok=decision == "allow" and req.detail is None,
        address=req.host,
        port=req.port,
        domain=req.host if req.host and ip_literal(req.host) is None else None,
        transport="tcp",
        method=req.method,
        decision=decision,
        rule=req.rule,
        reason=req.reason,
        detail=req.detail,
        bytes_out=req.bytes_out,
        bytes_in=req.bytes_in,
    )
