"""How a run becomes OpenTelemetry: spans and log records, as plain data (docs/otel.md).

Nothing here imports the OpenTelemetry SDK: this module decides *what* is
sent; :mod:`spyglass.otel.emit` hands it to the SDK.  The same code maps a
live run (event by event) and a stored one (``spyglass export``), so both
give the same trace: ids are derived from the run id, the trace id from the
run alone, a process span's id from the run, the pid and the seq of the
first event of that process, a tool call's span from the run and the call's
number.  Re-sending a run therefore sends the same ids again.

One trace per run: an ``invoke_agent`` span for the whole run, an
``execute_tool`` span per tool call of the agent, and a span per process,
child of its tool call (the process the call started) or of its parent
process, or of the ``invoke_agent`` span.  Every event is a log record tied
to the span of the process that did it; an alert is a log record tied to
the span of the offending process, with a severity from its level.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from spyglass import __version__
from spyglass.events import Alert, Event

#: OpenTelemetry log severity numbers for alert levels
SEVERITY: Final[dict[str, tuple[int, str]]] = {
    "info": (9, "INFO"),
    "low": (13, "WARN"),
    "medium": (14, "WARN2"),
    "high": (17, "ERROR"),
    "critical": (21, "FATAL"),
}
EVENT_PREFIX: Final = "spyglass."
ALERT_EVENT: Final = "spyglass.alert"
#: event fields not sent as attributes (carried by the record itself, or not flat)
_SKIP: Final = frozenset({"seq", "ts", "type", "ok", "raw_bytes", "chain"})
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

Attrs = dict[str, Any]


class SpanRec(msgspec.Struct):
    name: str
    span_id: int
    parent_id: int | None
    start: int
    end: int
    attributes: Attrs = msgspec.field(default_factory=dict)
    error: str | None = None  # set: the span's status is ERROR with this description


class LogRec(msgspec.Struct):
    ts: int
    event_name: str
    severity: int
    severity_text: str
    body: str
    attributes: Attrs
    span_id: int | None


def _h(*parts: object) -> bytes:
    return hashlib.sha256("\0".join(str(p) for p in parts).encode()).digest()


def trace_id_for(run_id: str) -> int:
    return int.from_bytes(_h("spyglass-trace", run_id)[:16], "big") or 1


def span_id_for(run_id: str, *key: object) -> int:
    return int.from_bytes(_h("spyglass-span", run_id, *key)[:8], "big") or 1


def root_span_id(run_id: str) -> int:
    return span_id_for(run_id, "invoke_agent")


def resource_attributes(run: Any) -> Attrs:
    """Resource of a run's telemetry: the service, the host and the agent."""
    identity = (run.extra or {}).get("agent_identity") or {}
    attrs: Attrs = {
        "service.name": "spyglass",
        "service.version": run.spyglass_version or __version__,
        "service.instance.id": run.id,
        "host.name": run.host,
        "gen_ai.agent.id": run.agent_id or "",
        "gen_ai.agent.name": identity.get("name") or run.agent_id or "",
    }
    return {k: v for k, v in attrs.items() if v}


def conversation_id(run: Any) -> str | None:
    """The agent's own session id, where its log names one (a codex rollout file carries it)."""
    log = ((run.extra or {}).get("agent") or {}).get("log")
    if isinstance(log, str):
        m = _UUID.search(os.path.basename(log))
        if m:
            return m.group(0)
    return None


def _flat(value: Any) -> Any:
    if isinstance(value, list):
        return [str(v) if not isinstance(v, str | int | float | bool) else v for v in value]
    return value


_event_enc = msgspec.json.Encoder()


def event_attributes(ev: Event) -> Attrs:
    raw = msgspec.to_builtins(ev)
    attrs: Attrs = {
        k: v if type(v) is not list else _flat(v) for k, v in raw.items() if k not in _SKIP and v is not None
    }
    attrs["spyglass.event.seq"] = ev.seq
    if not ev.ok:
        attrs["error.type"] = ev.errno or "error"
    return attrs


def _event_body(ev: Event) -> str:
    if ev.argv:
        return " ".join(ev.argv)[:1000]
    if ev.path:
        return ev.path + (f" -> {ev.target}" if ev.target else "")
    if ev.address:
        return f"{ev.domain + ' ' if ev.domain else ''}{ev.address}:{ev.port}"
    return ev.detail or ev.dns_name or ev.type


def event_log(ev: Event, span_id: int | None) -> LogRec:
    sev, text = (13, "WARN") if ev.type in ("sandbox.denied", "agent.intervention") else (9, "INFO")
    return LogRec(ev.ts, EVENT_PREFIX + ev.type, sev, text, _event_body(ev), event_attributes(ev), span_id)


def alert_log(alert: Alert, run: Any, span_id: int | None) -> LogRec:
    sev, text = SEVERITY.get(alert.level, (9, "INFO"))
    attrs: Attrs = {
        "security_rule.name": alert.title,
        "security_rule.ruleset.name": "spyglass",
        "spyglass.alert.rule_id": alert.rule_id,
        "spyglass.alert.level": alert.level,
        "spyglass.alert.action": alert.action,
        "spyglass.alert.seq": alert.seq,
        "spyglass.alert.event_seqs": list(alert.event_seqs),
        "spyglass.policy.digest": alert.policy_digest or run.policy_digest or "",
        "spyglass.run.id": alert.run_id or run.id,
        "spyglass.task": alert.task or run.task or "",
        "gen_ai.agent.id": alert.agent_id or run.agent_id or "",
        "host.name": alert.host or run.host or "",
        "process.pid": alert.pid,
        "process.executable.path": alert.exe or "",
        "process.command_args": list(alert.argv or []),
        "process.working_directory": alert.cwd or "",
    }
    tool = next((e.tool_call for e in reversed(alert.lineage) if e.tool_call), None)
    if tool:
        attrs["spyglass.tool_call"] = tool
    if alert.tags:
        attrs["spyglass.alert.tags"] = list(alert.tags)
    attrs = {k: v for k, v in attrs.items() if v not in ("", [], None)}
    body = f"{alert.rule_id}: {alert.message or alert.title}"
    return LogRec(alert.ts, ALERT_EVENT, sev, text, body, attrs, span_id)


class _Proc(msgspec.Struct):
    pid: int
    span_id: int
    start: int
    end: int
    parent_pid: int | None = None
    exe: str | None = None
    argv: list[str] | None = None
    cwd: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    ended: bool = False


class SpanBuilder:
    """Keeps one span per process as events arrive; gives the span id of any event's process."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.root = root_span_id(run_id)
        self.live: dict[int, _Proc] = {}
        self.done: list[_Proc] = []
        self.last_ts = 0

    def feed(self, ev: Event) -> int:
        """The span id of the process behind ``ev`` (a new span for a new or reused pid)."""
        if ev.ts > self.last_ts:
            self.last_ts = ev.ts
        t = ev.type
        if t.startswith("agent."):  # an event spyglass made, not a process's: on the run's span
            return self.root
        p = self.live.get(ev.pid)
        if p is None or (t == "process.start" and p.ended):
            if p is not None:
                self.done.append(p)
            p = _Proc(ev.pid, span_id_for(self.run_id, "process", ev.pid, ev.seq), ev.ts, ev.ts)
            self.live[ev.pid] = p
            if t == "process.start":
                p.parent_pid = ev.ppid
        p.end = max(p.end, ev.ts)
        if t == "process.exec" and ev.ok:
            p.exe, p.argv = ev.exe, list(ev.argv or [])
            p.cwd = ev.cwd or p.cwd
            if p.parent_pid is None and ev.ppid is not None:
                p.parent_pid = ev.ppid
        elif t == "process.start":
            parent = self.live.get(ev.ppid) if ev.ppid is not None else None
            if parent is not None and p.exe is None:
                p.exe, p.argv, p.cwd = parent.exe, parent.argv, parent.cwd
        elif t in ("process.exit", "process.detach"):
            p.exit_code, p.signal = ev.exit_code, ev.signal
            p.ended = True
        return p.span_id

    def span_of(self, pid: int) -> int:
        p = self.live.get(pid)
        return p.span_id if p is not None else self.root

    def spans(self, run: Any, agent: Mapping[str, Any] | None, end: int) -> list[SpanRec]:
        """Every span of the run: ``invoke_agent``, the tool calls, the processes."""
        procs = [*self.done, *self.live.values()]
        by_pid = {p.pid: p for p in procs}  # the last process of each pid
        calls = list((agent or {}).get("tool_calls") or [])
        call_span: dict[int, int] = {}  # root pid -> execute_tool span id
        out: list[SpanRec] = []
        end = max(end, self.last_ts, run.started)
        name = ((run.extra or {}).get("agent_identity") or {}).get("name") or run.agent_id or "agent"
        root_attrs: Attrs = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": run.agent_id or "",
            "gen_ai.agent.name": name,
            "gen_ai.conversation.id": conversation_id(run) or "",
            "spyglass.task": run.task or "",
            "spyglass.run.id": run.id,
            "spyglass.run.mode": run.mode,
            "process.command_args": list(run.command),
            "process.working_directory": run.cwd,
        }
        status = run.status if run.status != "running" else ""
        out.append(
            SpanRec(
                f"invoke_agent {name}",
                self.root,
                None,
                run.started,
                end,
                {k: v for k, v in root_attrs.items() if v not in ("", [])},
                error=f"run {status}" if status in ("incomplete", "interrupted") else None,
            )
        )
        for c in calls:
            root_pid = c.get("root_pid")
            sid = span_id_for(self.run_id, "tool_call", c.get("n"))
            p = by_pid.get(root_pid) if isinstance(root_pid, int) else None
            start, stop = (p.start, p.end) if p is not None else (run.started, run.started)
            tool = c.get("tool") or "shell"
            attrs: Attrs = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.id": c.get("call_id") or "",
                "spyglass.tool_call.n": c.get("n"),
                "spyglass.tool_call.command": str(c.get("command") or "")[:1000],
                "spyglass.tool_call.source": c.get("source") or "",
            }
            err = None
            if c.get("exit_code") not in (None, 0) or c.get("signal"):
                err = f"exit {c.get('exit_code')}" if c.get("signal") is None else str(c.get("signal"))
            out.append(
                SpanRec(
                    f"execute_tool {tool}",
                    sid,
                    self.root,
                    start,
                    stop,
                    {k: v for k, v in attrs.items() if v not in ("", None)},
                    error=err,
                )
            )
            if isinstance(root_pid, int):
                call_span[root_pid] = sid
        span_by_pid = {p.pid: p.span_id for p in procs}
        for p in procs:
            if p.pid in call_span and by_pid.get(p.pid) is p:
                parent = call_span[p.pid]
            elif p.parent_pid is not None and p.parent_pid in span_by_pid:
                parent = span_by_pid[p.parent_pid]
            else:
                parent = self.root
            attrs = {
                "process.pid": p.pid,
                "process.parent_pid": p.parent_pid,
                "process.executable.path": p.exe,
                "process.executable.name": os.path.basename(p.exe) if p.exe else None,
                "process.command_args": p.argv,
                "process.working_directory": p.cwd,
                "process.exit.code": p.exit_code,
            }
            err = None
            if p.signal or (p.exit_code not in (None, 0)):
                err = str(p.signal) if p.signal else f"exit {p.exit_code}"
            base = os.path.basename(p.exe) if p.exe else f"pid {p.pid}"
            out.append(
                SpanRec(
                    f"process {base}",
                    p.span_id,
                    parent,
                    p.start,
                    p.end if p.ended else end,
                    {k: v for k, v in attrs.items() if v is not None},
                    error=err,
                )
            )
        return out
