"""OpenTelemetry export against real OTLP receivers on loopback, from real runs under strace."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spyglass.otel.mapping import trace_id_for
from spyglass.store import RunReader, Store

from .conftest import Receiver, free_port, start_http

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")

Spy = Callable[..., Any]


def _agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    """A tiny CLI agent named `mini` that runs two shell tool calls, one reading a (decoy) private key."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\ndecoy\n")
    monkeypatch.setenv("HOME", str(home))
    ws = tmp_path / "ws"
    ws.mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    agent = bindir / "mini"
    agent.write_text(
        "#!/bin/sh\n"
        'sh -c "cat $HOME/.ssh/id_rsa > /dev/null"\n'
        'sh -c "echo done > out.txt; ls > /dev/null"\n'
    )
    agent.chmod(agent.stat().st_mode | stat.S_IXUSR)
    monkeypatch.chdir(ws)
    return ws, [str(agent)]


def _run_id(store_dir: Path) -> str:
    st = Store(store_dir)
    return st.resolve("latest")


def _check_trace(got: Any, run_id: str) -> None:
    trace = f"{trace_id_for(run_id):032x}"
    spans = {s["span_id"]: s for s in got.spans}
    assert {s["trace_id"] for s in got.spans} == {trace}
    roots = [s for s in got.spans if s["name"].startswith("invoke_agent")]
    assert len(roots) == 1 and roots[0]["parent_id"] == ""
    root = roots[0]
    assert root["attrs"]["gen_ai.operation.name"] == "invoke_agent"
    assert root["attrs"]["gen_ai.agent.name"] == "mini"
    assert root["attrs"]["gen_ai.agent.id"].startswith("mini-")
    assert root["attrs"]["spyglass.task"] == "otel-test"
    assert root["resource"]["service.name"] == "spyglass"
    assert root["resource"]["host.name"]
    assert root["resource"]["gen_ai.agent.id"] == root["attrs"]["gen_ai.agent.id"]
    tools = [s for s in got.spans if s["name"].startswith("execute_tool")]
    assert len(tools) == 2
    for t in tools:
        assert t["parent_id"] == root["span_id"]
        assert t["attrs"]["gen_ai.operation.name"] == "execute_tool"
        assert t["attrs"]["gen_ai.tool.name"] == "shell"
    # the processes of a tool call hang under it: the `cat` under the first call's shell
    cats = [s for s in got.spans if s["attrs"].get("process.executable.name") == "cat"]
    assert len(cats) == 1
    cat_parent = spans[cats[0]["parent_id"]]
    assert cat_parent["attrs"]["process.command_args"][:2] == ["sh", "-c"]
    assert spans[cat_parent["parent_id"]]["name"].startswith("execute_tool")
    assert "id_rsa" in spans[cat_parent["parent_id"]]["attrs"]["spyglass.tool_call.command"]
    # every event is a log record on its process's span, with the event's attributes
    reader = RunReader(Store(os.environ["SPYGLASS_STORE"]), run_id)
    events = list(reader.events())
    ev_logs = [r for r in got.logs if r["event_name"] != "spyglass.alert"]
    assert len(ev_logs) == len(events)
    assert {r["trace_id"] for r in got.logs} == {trace}
    assert all(r["span_id"] in spans for r in got.logs)
    key_reads = [r for r in ev_logs if r["event_name"] == "spyglass.file.read" and
                 r["attrs"].get("file.path", "").endswith("/.ssh/id_rsa")]
    assert key_reads and spans[key_reads[0]["span_id"]]["attrs"]["process.executable.name"] == "cat"
    assert key_reads[0]["attrs"]["process.pid"] == cats[0]["attrs"]["process.pid"]
    execs = [r for r in ev_logs if r["event_name"] == "spyglass.process.exec"]
    assert all("process.command_args" in r["attrs"] for r in execs)
    # the alert: a log record with severity from its level and the rule's attributes
    alerts = [r for r in got.logs if r["event_name"] == "spyglass.alert"]
    secret = [a for a in alerts if a["attrs"]["spyglass.alert.rule_id"] == "cred-secret-read"]
    assert secret, [a["attrs"]["spyglass.alert.rule_id"] for a in alerts]
    a = secret[0]
    assert a["severity"] == 17 and a["severity_text"] == "ERROR"
    assert a["attrs"]["spyglass.alert.level"] == "high"
    assert a["attrs"]["spyglass.alert.action"] == "alert"
    assert a["attrs"]["spyglass.policy.digest"] == reader.meta.policy_digest
    assert a["attrs"]["spyglass.run.id"] == run_id
    assert a["attrs"]["security_rule.name"]
    assert spans[a["span_id"]]["attrs"]["process.executable.name"] == "cat"


def test_live_run_exports_spans_and_logs(
    spy: Spy, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, otlp: Receiver
) -> None:
    _, argv = _agent(tmp_path, monkeypatch)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", otlp.protocol)  # the standard variable sets the protocol
    res = spy("run", "--task", "otel-test", "--otlp", otlp.url, "--", *argv)
    assert res.exit_code == 0, res.output
    run_id = _run_id(store_dir)
    meta = RunReader(Store(store_dir), run_id).meta
    sent = meta.extra["otlp"]
    assert sent["complete"] is True and sent["protocol"] == otlp.protocol, sent
    assert f"otlp: sent {sent['spans']['sent']} spans" in res.stderr
    got = otlp.got
    assert got.wait(lambda g: len(g.spans) == sent["spans"]["emitted"] and len(g.logs) == sent["logs"]["emitted"])
    _check_trace(got, run_id)
    # the alert as stored carries where it came from
    alerts = json.loads(spy("alerts", "latest", "--format", "json").stdout)
    first = alerts[0] if isinstance(alerts, list) else alerts["alerts"][0]
    assert first["run_id"] == run_id and first["agent_id"] == meta.agent_id
    assert first["host"] == meta.host and first["task"] == "otel-test"


def test_export_of_a_stored_run_gives_the_same_trace(
    spy: Spy, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, otlp: Receiver
) -> None:
    _, argv = _agent(tmp_path, monkeypatch)
    assert spy("run", "-q", "--task", "otel-test", "--", *argv).exit_code == 0
    # in a process of its own: gRPC's client threads would stay in this one, in the way of later forks
    res = subprocess.run(
        [sys.executable, "-m", "spyglass", "export", "latest", "--otlp", otlp.url, "--protocol", otlp.protocol,
         "--format", "json"],
        env={**os.environ, "SPYGLASS_STORE": str(store_dir)}, capture_output=True, text=True, timeout=120,
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["complete"] is True and out["protocol"] == otlp.protocol
    got = otlp.got
    assert got.wait(lambda g: len(g.spans) == out["spans"]["emitted"] and len(g.logs) == out["logs"]["emitted"])
    _check_trace(got, _run_id(store_dir))


def test_collector_down_leaves_the_run_alone_says_so_and_export_resends(
    spy: Spy, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, argv = _agent(tmp_path, monkeypatch)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)  # the standard variable turns live export on
    res = spy("run", "--task", "otel-test", "--", *argv)
    assert res.exit_code == 0
    run_id = _run_id(store_dir)
    meta = RunReader(Store(store_dir), run_id).meta
    assert meta.status == "complete" and meta.counts["events"] > 10
    assert meta.extra["otlp"]["complete"] is False and meta.extra["otlp"]["source"] == "environment"
    assert "not sent" in res.stderr and f"spyglass export {run_id} --otlp {url}" in res.stderr
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    back = start_http(port)  # the collector is back
    try:
        res = spy("export", run_id, "--otlp", url, "--format", "json")
        assert res.exit_code == 0, res.output
        out = json.loads(res.stdout)
        assert out["logs"]["sent"] == meta.extra["otlp"]["logs"]["emitted"]
        assert back.got.wait(lambda g: len(g.logs) == out["logs"]["sent"])
        _check_trace(back.got, run_id)
    finally:
        back.stop()


def test_stalled_collector_costs_the_run_no_wait_and_the_loss_is_said(
    spy: Spy, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collector that accepts connections and never answers: the run ends without waiting out
    the request timeout, and what was not sent is said, with the command that re-sends it."""
    _, argv = _agent(tmp_path, monkeypatch)
    stalled = socket.socket()
    stalled.bind(("127.0.0.1", 0))
    stalled.listen(16)  # the kernel completes the connections; nothing reads or answers
    url = f"http://127.0.0.1:{stalled.getsockname()[1]}"
    try:
        res = spy("run", "--task", "otel-test", "--otlp", url, "--", *argv)
    finally:
        stalled.close()
    assert res.exit_code == 0, res.output
    run_id = _run_id(store_dir)
    meta = RunReader(Store(store_dir), run_id).meta
    otlp = meta.extra["otlp"]
    assert meta.status == "complete" and otlp["complete"] is False, otlp
    assert otlp["logs"]["sent"] == 0 and otlp["logs"]["unsent"] == otlp["logs"]["emitted"] > 10
    assert "unanswered" in otlp["error"]
    assert "not sent" in res.stderr and f"spyglass export {run_id} --otlp {url}" in res.stderr


def test_otlp_json_file(spy: Spy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, argv = _agent(tmp_path, monkeypatch)
    assert spy("run", "-q", "--", *argv).exit_code == 0
    out = tmp_path / "run.otlp.jsonl"
    res = spy("export", "latest", "--otlp-file", str(out))
    assert res.exit_code == 0, res.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    spans = [s for line in lines for rs in line.get("resourceSpans", []) for ss in rs["scopeSpans"]
             for s in ss["spans"]]
    logs = [r for line in lines for rl in line.get("resourceLogs", []) for sl in rl["scopeLogs"]
            for r in sl["logRecords"]]
    assert spans and logs
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)
    assert {s["kind"] for s in spans} == {1}  # OTLP/JSON: enums as integers (SPAN_KIND_INTERNAL)
    assert all(isinstance(r["severityNumber"], int) for r in logs)
    assert {r["traceId"] for r in logs} == {spans[0]["traceId"]}


def test_bad_endpoint_is_a_one_line_usage_error(spy: Spy) -> None:
    res = spy("run", "--otlp", "collector:4318", "--", "true")
    assert res.exit_code == 2
    assert "not an http(s) URL" in res.stderr and "Traceback" not in res.output
    res = spy("export", "latest")
    assert res.exit_code == 2 and "nowhere to export to" in res.stderr


def test_live_alerts_as_json_lines_carry_where_they_came_from(
    spy: Spy, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, argv = _agent(tmp_path, monkeypatch)
    res = spy("run", "--alerts-format", "json", "--task", "otel-test", "--", *argv)
    assert res.exit_code == 0, res.output
    meta = RunReader(Store(store_dir), _run_id(store_dir)).meta
    lines = [json.loads(line) for line in res.stderr.splitlines() if line.startswith("{")]
    assert lines and all(line["run_id"] == meta.id for line in lines)
    assert {(a["host"], a["agent_id"], a["task"]) for a in lines} == {(meta.host, meta.agent_id, "otel-test")}
    assert "cred-secret-read" in {a["rule_id"] for a in lines}
