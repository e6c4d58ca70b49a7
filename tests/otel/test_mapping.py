"""The mapping as plain data: ids, parent links, attributes, severities."""

from __future__ import annotations

from spyglass.events import Alert, Event
from spyglass.otel.mapping import (
    SpanBuilder,
    alert_log,
    conversation_id,
    event_log,
    root_span_id,
    span_id_for,
    trace_id_for,
)
from spyglass.store.meta import RunMeta


def _meta(**kw: object) -> RunMeta:
    return RunMeta(id="r1", host="h", agent_id="codex-abc", task="t", started=1_000, **kw)  # type: ignore[arg-type]


def test_ids_are_derived_from_the_run() -> None:
    assert trace_id_for("r1") == trace_id_for("r1") != trace_id_for("r2")
    assert span_id_for("r1", "process", 5, 1) != span_id_for("r1", "process", 5, 9)
    assert 0 < trace_id_for("r1") < 2**128 and 0 < root_span_id("r1") < 2**64


def test_process_spans_hang_under_their_tool_call_parent_or_the_run() -> None:
    b = SpanBuilder("r1")
    evs = [
        Event(seq=1, ts=10, type="process.start", pid=100),
        Event(seq=2, ts=11, type="process.exec", pid=100, exe="/usr/bin/codex", argv=["codex"]),
        Event(seq=3, ts=12, type="process.start", pid=101, ppid=100),
        Event(seq=4, ts=13, type="process.exec", pid=101, exe="/bin/sh", argv=["sh", "-c", "ls"]),
        Event(seq=5, ts=14, type="process.start", pid=102, ppid=101),
        Event(seq=6, ts=15, type="process.exec", pid=102, exe="/bin/ls", argv=["ls"]),
        Event(seq=7, ts=16, type="process.exit", pid=102, exit_code=2),
        Event(seq=8, ts=17, type="process.exit", pid=101, exit_code=2),
        Event(seq=9, ts=18, type="process.start", pid=102, ppid=100),  # the pid comes back: a new span
        Event(seq=10, ts=19, type="process.exit", pid=102, exit_code=0),
        Event(seq=11, ts=20, type="agent.intervention", pid=1, actor="operator", action="interrupt"),
    ]
    sids = [b.feed(e) for e in evs]
    assert sids[4] != sids[8] and sids[10] == root_span_id("r1")
    agent = {"tool_calls": [{"n": 1, "command": "ls", "call_id": "c1", "tool": "exec_command", "root_pid": 101,
                             "exit_code": 2}], "log": "/h/.codex/sessions/rollout-2026-12-01T10-00-00-"
                                                      "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl"}
    run = _meta(extra={"agent": agent, "agent_identity": {"name": "codex"}})
    spans = {s.span_id: s for s in b.spans(run, agent, 30)}
    root = spans[root_span_id("r1")]
    assert root.parent_id is None and root.name == "invoke_agent codex"
    assert root.attributes["gen_ai.conversation.id"] == "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b" == conversation_id(run)
    tool = spans[span_id_for("r1", "tool_call", 1)]
    assert tool.parent_id == root.span_id and tool.error == "exit 2"
    assert tool.attributes["gen_ai.tool.name"] == "exec_command" and tool.attributes["gen_ai.tool.call.id"] == "c1"
    sh, ls, second = spans[sids[2]], spans[sids[4]], spans[sids[8]]
    assert sh.parent_id == tool.span_id and ls.parent_id == sh.span_id
    assert second.parent_id == spans[sids[0]].span_id and second.attributes["process.pid"] == 102
    assert spans[sids[0]].parent_id == root.span_id
    assert ls.attributes["process.command_args"] == ["ls"] and ls.error == "exit 2"
    assert (ls.start, ls.end) == (14, 16)


def test_event_and_alert_records() -> None:
    ev = Event(seq=7, ts=5, type="file.read", pid=3, path="/etc/passwd", ok=False, errno="EACCES")
    rec = event_log(ev, 99)
    assert rec.event_name == "spyglass.file.read" and rec.severity == 9 and rec.span_id == 99
    assert rec.attributes == {"process.pid": 3, "file.path": "/etc/passwd", "errno": "EACCES",
                              "spyglass.event.seq": 7, "error.type": "EACCES"}
    inter = event_log(Event(type="agent.intervention", pid=1, actor="operator", verdict="deny", action="deny",
                            detail="egress to x.test:443 (ask #1, answered by ann)"), None)
    assert inter.severity_text == "WARN" and inter.attributes["agent.intervention.decision"] == "deny"
    assert inter.attributes["agent.intervention.by"] == "operator" and inter.body.startswith("egress to x.test")
    change = event_log(Event(type="agent.permission_change", path="/w/.mcp.json", config_kind="mcp",
                             changes=["+mcpServers.x.command: npx"], widened=["MCP server added: x"]), None)
    assert change.attributes["agent.permission.widened"] == ["MCP server added: x"]
    a = Alert(rule_id="cred-secret-read", title="Secret read", level="critical", action="kill", pid=3,
              event_seqs=[7], run_id="r1", agent_id="codex-abc", host="h", task="t", policy_digest="d")
    rec = alert_log(a, _meta(), 42)
    assert (rec.severity, rec.severity_text, rec.event_name) == (21, "FATAL", "spyglass.alert")
    assert rec.attributes["spyglass.alert.action"] == "kill" and rec.attributes["spyglass.policy.digest"] == "d"
    assert rec.attributes["security_rule.name"] == "Secret read" and rec.span_id == 42
