"""Containment guards: floods that a rule on single events cannot see.

A fork bomb or a connection flood is a rate, not an event.  This pipeline
sink counts live processes of the run and connection attempts (direct
``net.connect``, ``proxy.request``) in a sliding window; past a threshold it
raises an alert once (``sandbox-process-flood`` / ``sandbox-connection-flood``,
level high) and, in enforce mode, stops the agent: the alert's action is then
``kill`` and the run records the rule that stopped it.
"""

from __future__ import annotations

import time
from collections import deque

from spyglass.events import Alert, Event, LineageEntry
from spyglass.pipeline import RunContext, Sink

PROCESS_FLOOD = "sandbox-process-flood"
CONNECTION_FLOOD = "sandbox-connection-flood"


class ContainmentGuard(Sink):
    name = "containment-guard"

    def __init__(
        self,
        *,
        enforce: bool = False,
        max_live_processes: int = 400,
        max_connections: int = 300,
        window_s: float = 1.0,
    ) -> None:
        self.enforce = enforce
        self.max_live = max_live_processes
        self.max_conns = max_connections
        self.window_ns = int(window_s * 1e9)
        self.ctx: RunContext | None = None
        self.live: set[int] = set()
        self.conns: deque[int] = deque()
        self.fired: set[str] = set()

    def start(self, ctx: RunContext) -> None:
        self.ctx = ctx

    # ------------------------------------------------------------ processes
    def process_start(self, ev: Event) -> None:
        self.live.add(ev.pid)
        if len(self.live) > self.max_live:
            self._fire(
                PROCESS_FLOOD,
                "Process flood in the sandbox",
                f"{len(self.live)} processes alive at once (limit {self.max_live})",
                ev,
            )

    def process_exit(self, ev: Event) -> None:
        self.live.discard(ev.pid)

    # ------------------------------------------------------------ connections
    def _conn(self, ev: Event) -> None:
        now = ev.ts or time.time_ns()
        self.conns.append(now)
        while self.conns and self.conns[0] < now - self.window_ns:
            self.conns.popleft()
        if len(self.conns) > self.max_conns:
            self._fire(
                CONNECTION_FLOOD,
                "Connection flood from the sandbox",
                f"{len(self.conns)} connection attempts within {self.window_ns / 1e9:g}s"
                f" (limit {self.max_conns})",
                ev,
            )

    def net_connect(self, ev: Event) -> None:
        if ev.address and ev.address not in ("127.0.0.1", "::1") and not ev.address.startswith("/"):
            self._conn(ev)  # the relay's loopback and unix connections count as proxy.request

    def proxy_request(self, ev: Event) -> None:
        self._conn(ev)

    # ------------------------------------------------------------ firing
    def _fire(self, rule_id: str, title: str, message: str, ev: Event) -> None:
        if rule_id in self.fired or self.ctx is None:
            return
        self.fired.add(rule_id)
        ctx = self.ctx
        chain = ctx.procs.lineage(ev.pid)
        me = chain[0] if chain else None
        alert = Alert(
            ts=ev.ts or time.time_ns(),
            rule_id=rule_id,
            title=title,
            level="high",
            action="kill" if self.enforce else "alert",
            message=message,
            event_seqs=[ev.seq] if ev.seq else [],
            pid=ev.pid,
            exe=me.exe if me else None,
            argv=me.argv if me else None,
            cwd=me.cwd if me else None,
            lineage=[LineageEntry(pid=p.pid, exe=p.exe, argv=p.argv, cwd=p.cwd) for p in reversed(chain)],
            tags=["sandbox", "containment"],
        )
        ctx.raise_alert(alert)
        if self.enforce and ctx.stop_agent is not None:
            ctx.stop_agent(rule_id)
