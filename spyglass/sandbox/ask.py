"""Egress ask mode: a host the policy does not allow is put to the operator.

With ``run --sandbox --ask-egress SECONDS`` the egress proxy, instead of
refusing a request the policy refuses (a host not on the allow list, or on
the deny list), holds it and asks: the question is written to
``<store>/sandbox/run-*/asks/N.json`` and shown on spyglass's stderr, and the
operator answers from another terminal with ``spyglass sandbox answer N
allow`` (this request only: "allow once") or ``deny``.  No answer within the
time is a denial.  Each answer becomes an ``agent.intervention`` event
(``agent.intervention.by`` operator, or policy when no answer came;
``agent.intervention.decision`` allow or deny; ``agent.intervention.action``
allow-once or deny), beside the request's own ``proxy.request`` event (reason
``operator-allowed`` or the policy's).

IP literals and canary hits are never asked about: those refusals stand.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import sys
import time
from pathlib import Path
from typing import IO, Any

from spyglass.events import Event
from spyglass.sandbox.proxy_request import EventSink

#: refusals the operator may overrule
ASKABLE = ("not-allowed", "denied-by-rule")
ANSWERS = ("allow", "deny")
OPERATOR_ALLOWED = "operator-allowed"


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return str(os.getuid())


class EgressAsk:
    """The proxy's ``ask`` hook: ``await ask(req, decision)`` is True when the operator allowed it."""

    def __init__(
        self,
        directory: str | Path,
        timeout: float,
        *,
        sink: EventSink | None = None,
        stream: IO[str] | None = None,
        poll: float = 0.1,
    ) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self.sink = sink
        self.stream = stream
        self.poll = poll
        self.n = 0

    async def __call__(self, req: Any, decision: Any) -> bool:
        if decision.reason not in ASKABLE or not req.host:
            return False
        self.n += 1
        n = self.n
        question = {"n": n, "host": req.host, "port": req.port, "pid": req.pid, "method": req.method,
                    "reason": decision.reason, "asked": time.time_ns(), "timeout": self.timeout}
        qfile, afile = self.dir / f"{n}.json", self.dir / f"{n}.answer"
        qfile.write_text(json.dumps(question))
        out = self.stream or sys.stderr
        out.write(
            f"spyglass: ASK #{n}: pid {req.pid or '?'} wants {req.host}:{req.port} ({decision.reason}); "
            f"answer `spyglass sandbox answer {n} allow` (this request only) or `... {n} deny` "
            f"within {self.timeout:g} s (then: deny)\n"
        )
        out.flush()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        answer: str | None = None
        while loop.time() < deadline:
            try:
                text = afile.read_text().strip()
            except FileNotFoundError:
                await asyncio.sleep(self.poll)
                continue
            answer = text if text in ANSWERS else "deny"
            break
        allowed = answer == "allow"
        if allowed:
            req.reason, req.rule = OPERATOR_ALLOWED, f"ask #{n}"
        question["answer"] = answer or "timeout"
        qfile.write_text(json.dumps(question))
        if self.sink is not None:
            ev = Event(
                type="agent.intervention",
                ts=time.time_ns(),
                pid=req.pid or 0,
                actor="operator" if answer else "policy",  # no answer in time: the policy's refusal stands
                verdict="allow" if allowed else "deny",
                action="allow-once" if allowed else "deny",
                detail=f"egress to {req.host}:{req.port} (ask #{n}, "
                f"{'answered by ' + _user() if answer else 'no answer in time'})",
                reason=decision.reason,
                address=req.host,
                port=req.port,
            )
            try:
                self.sink(ev, False)
            except Exception:
                pass
        return allowed


def answer(sandbox_root: Path, n: int, decision: str) -> Path:
    """Answer question ``n`` of the newest run that asked one still open; returns its question file."""
    from spyglass.errors import UsageError

    if decision not in ANSWERS:
        raise UsageError(f"answer {decision!r}", hint="allow or deny")
    pending = []
    for q in sandbox_root.glob(f"run-*/asks/{n}.json"):
        if not q.with_suffix(".answer").exists():
            pending.append((q.stat().st_mtime, q))
    if not pending:
        raise UsageError(f"no open question #{n}", hint="the run asks on its stderr; unanswered questions time out")
    q = max(pending)[1]
    tmp = q.with_suffix(".answer.tmp")
    tmp.write_text(decision + "\n")
    os.replace(tmp, q.with_suffix(".answer"))
    return q
