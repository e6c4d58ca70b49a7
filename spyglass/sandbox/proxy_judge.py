"""The egress proxy's judgement of one request: policy, canaries, the veto and the operator, then upstream.

:class:`RequestJudge` is the part of :class:`spyglass.sandbox.proxy.EgressProxy`
that decides a request once its host and port are known (the proxy reads
them from the client: HTTP, CONNECT or SOCKS5): the canaries in what it
would send, the policy on the host name (or the operator, when asked),
the veto hook, then the name resolved here and every address checked
again, and the upstream connection (through the interceptor for brokered
hosts).  A refusal raises ``_Refused``, which the proxy answers.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from spyglass.logs import get_logger
from spyglass.sandbox.egress import Decision, EgressPolicy, ip_literal, normalize_host
from spyglass.sandbox.proxy_request import BLOCKED, CANARY, MISUSE, Veto, _Refused, _Request, request_event
from spyglass.sandbox.resolve import Resolver

log = get_logger("spyglass.sandbox.proxy")


class RequestJudge:
    """Decides requests and connects the allowed ones; its state is set by ``EgressProxy.__init__``."""

    policy: EgressPolicy
    patterns: list[bytes]
    resolver: Resolver
    block_canary: bool
    connect_timeout: float
    veto: Veto | None
    ask: Any  # spyglass.sandbox.ask.EgressAsk
    interceptor: Any  # spyglass.sandbox.intercept.Interceptor
    upstream_attempts: deque[tuple[str, int]]
    _tunnels: dict[int, _Request]

    async def _settle_pid(self, req: _Request) -> None:
        fut, req.attribution = req.attribution, None
        if fut is None or req.reported:
            return
        try:
            pid = await asyncio.wait_for(fut, 2.0)
        except Exception:
            return
        if pid:
            req.pid = pid

    def _patterns_for(self, req: _Request) -> list[bytes]:
        """The canaries to look for in what goes to ``req``'s host: a brokered secret's placeholder is
        expected (and replaced) on the way to the hosts that secret may reach."""
        if self.interceptor is None or req.host is None or req.port is None:
            return self.patterns
        ok = self.interceptor.broker.allowed_placeholders(normalize_host(req.host), req.port)
        return [p for p in self.patterns if p not in ok] if ok else self.patterns

    def _canary_in(self, data: bytes, req: _Request) -> bool:
        return bool(self.patterns) and any(p in data for p in self._patterns_for(req))

    def _on_misuse(self, local_port: int, host: str, port: int, names: list[str]) -> None:
        """Called from the interceptor's thread: a request in this tunnel carried a placeholder to the wrong host."""
        req = self._tunnels.get(local_port)
        if req is not None:
            req.decision, req.reason, req.detail = "deny", MISUSE, MISUSE

    async def _decide_and_connect(
        self, req: _Request, head: bytes
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        assert req.host is not None and req.port is not None
        if self._canary_in(head, req):
            req.detail = CANARY
            if self.block_canary:
                raise _Refused(403, CANARY, CANARY)
        d: Decision = self.policy.decide(req.host, req.port)
        req.rule, req.reason = d.rule, d.reason
        if not d.allow and not (self.ask is not None and await self.ask(req, d)):  # ask: spyglass/sandbox/ask.py
            raise _Refused(403, d.reason)
        if self.veto is not None:
            await self._settle_pid(req)
            try:
                blocked = self.veto(request_event(req, "allow"))
            except Exception:
                log.exception("veto hook failed (the request goes on)")
                blocked = None
            if blocked:
                req.rule, req.reason = blocked, BLOCKED
                raise _Refused(403, BLOCKED)
        host = normalize_host(req.host)
        literal = ip_literal(host)
        loop = asyncio.get_running_loop()
        if literal is not None:
            addrs = [(str(literal), req.port)]
        else:
            try:
                addrs = list(await loop.run_in_executor(None, self.resolver, host, req.port))
            except Exception as exc:
                req.decision, req.reason, req.detail = "allow", "resolve-failed", str(exc)[:200]
                raise _Refused(502, "resolve-failed", req.detail) from None
        checks = [(a, p, self.policy.check_address(a, p)) for a, p in addrs]
        usable = [(a, p) for a, p, c in checks if c.allow]
        if not usable:
            refusal = next((c for _a, _p, c in checks), None)
            if refusal is None:  # the name resolved to nothing
                req.decision, req.reason = "allow", "resolve-failed"
                raise _Refused(502, "resolve-failed")
            req.rule, req.reason = refusal.rule, refusal.reason
            raise _Refused(403, refusal.reason)
        if self.interceptor is not None and self.interceptor.wants(host, req.port):
            self.upstream_attempts.append(usable[0])
            try:
                r, w, local_port = await self.interceptor.open_tunnel(host, req.port, usable[0])
            except (OSError, TimeoutError) as exc:
                req.decision, req.reason, req.detail = "allow", "upstream-error", f"interceptor: {exc}"[:200]
                raise _Refused(502, "upstream-error", req.detail) from None
            self._tunnels[local_port] = req
            req.decision = "allow"
            await self._settle_pid(req)
            return r, w
        last_err = "no address"
        for addr, port in usable:
            self.upstream_attempts.append((addr, port))
            try:
                r, w = await asyncio.wait_for(
                    asyncio.open_connection(addr, port, limit=65536), self.connect_timeout
                )
            except (OSError, TimeoutError) as exc:
                last_err = f"{addr}:{port}: {exc.strerror if isinstance(exc, OSError) else 'timeout'}"
                continue
            req.decision = "allow"
            await self._settle_pid(req)  # before the answer: the client waits, alive, till then
            return r, w
        req.decision, req.reason, req.detail = "allow", "upstream-error", last_err[:200]
        raise _Refused(502, "upstream-error", req.detail)
