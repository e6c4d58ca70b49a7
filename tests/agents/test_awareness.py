"""Agent awareness over hand-written event streams shaped like real codex and mini-swe-agent runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from spyglass.agents.agent_logs import ToolCall, parse_agent_log
from spyglass.agents.awareness import (
    AGENT,
    INTERNAL,
    OTHER,
    TOOL,
    AgentAwareness,
    agent_signature,
    command_text,
    find_agent_log,
    link_tool_calls,
)
from spyglass.events import Event
from spyglass.pipeline import Pipeline, RunContext
from spyglass.store.meta import RunMeta

NODE_CODEX = "/w/.cache/agents/node_modules/.bin/codex"
NATIVE = "/w/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"


def test_agent_signatures() -> None:
    assert agent_signature(NODE_CODEX, [NODE_CODEX, "exec"]) == "codex"
    assert agent_signature("/usr/bin/node", ["node", NODE_CODEX, "exec"]) == "codex"
    assert agent_signature(NATIVE, [NATIVE, "exec"]) == "codex"
    assert agent_signature("/v/bin/mini", ["/v/bin/mini", "--yolo"]) == "mini"
    assert agent_signature("/usr/bin/python3", ["python3", "-m", "minisweagent.run.mini"]) == "mini"
    assert agent_signature("/usr/bin/bash", ["bash", "-lc", "codex-like"]) is None
    assert command_text(["/bin/sh", "-c", "ls -la"]) == "ls -la"
    assert command_text(["uname", "-p"]) == "uname -p"


def test_codex_tree_without_a_log(codex_events: Callable[[list[str]], list[Event]]) -> None:
    view = link_tool_calls(codex_events(["cat SKILL.md", "pytest -q || fail"]))
    assert view.agent == "codex"
    assert sorted(view.pids_with_role(AGENT)) == [100, 101]
    assert sorted(view.internal) == [
        102,
        104,
        105,
        107,
    ]  # lsb_release, getconf, environment snapshot and check
    assert view.roles[103] == INTERNAL and view.roles[106] == INTERNAL
    assert [(link.n, link.command, link.root_pid, link.source) for link in view.links] == [
        (1, "cat SKILL.md", 200, "process tree"),
        (2, "pytest -q || fail", 210, "process tree"),
    ]
    assert view.links[0].pids == [200, 201, 202]
    assert view.links[1].exit_code == 3 and view.links[0].exit_code == 0
    assert view.links[0].events > 0 and view.links[0].first_seq is not None
    labels = view.labels()
    assert labels[202] == "tool call 1: cat SKILL.md" and labels[211] == "tool call 2: pytest -q || fail"
    assert view.tool_call_of(212) is view.links[1]
    assert view.tool_call_of(101) is None


def test_codex_tree_with_its_log_numbers_calls_as_the_log_does(
    codex_events: Callable[[list[str]], list[Event]], make_rollout: Callable[[list[str]], str]
) -> None:
    cmds = ["cat SKILL.md", "python3 scripts/run.py", "pytest -q"]
    calls = parse_agent_log(make_rollout(cmds)).tool_calls
    events = codex_events([cmds[0], cmds[2]])  # the middle command never ran
    view = link_tool_calls(events, calls, "rollout.jsonl")
    assert [(link.n, link.root_pid, link.source) for link in view.links] == [(1, 200, "log"), (3, 210, "log")]
    assert view.links[0].call is not None and view.links[0].call.call_id == "c1"
    assert [c.n for c in view.unlinked] == [2]
    assert view.to_json()["log"] == "rollout.jsonl"


def test_with_a_complete_log_a_shell_not_in_it_is_internal(
    codex_events: Callable[[list[str]], list[Event]],
) -> None:
    calls = [ToolCall(n=1, command="cat SKILL.md")]
    view = link_tool_calls(codex_events(["cat SKILL.md", "git status"]), calls)
    assert [link.n for link in view.links] == [1]
    assert view.roles[210] == INTERNAL


def test_mini_tree(events: Any) -> None:
    e = events
    e.start(10, None)
    e.exec(10, "/bin/sh", "/bin/sh", "-c", "mini --yolo")  # a wrapper script around the agent
    e.start(11, 10)
    e.exec(11, "/v/bin/mini", "/v/bin/mini", "--yolo", "--exit-immediately")
    e.start(12, 11)
    e.exec(12, "/usr/bin/uname", "uname", "-p")
    e.exit(12)
    e.start(13, 11)
    e.exec(13, "/usr/bin/sh", "/bin/sh", "-c", "ls -la")
    e.start(14, 13)
    e.exec(14, "/usr/bin/ls", "ls", "-la")
    e.exit(14)
    e.exit(13)
    e.start(15, 11)
    e.exec(15, "/usr/bin/sh", "/bin/sh", "-c", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")
    e.exit(15)
    view = link_tool_calls(e.out)
    assert view.agent == "mini"
    assert view.roles[10] == OTHER and view.roles[11] == AGENT and view.roles[12] == INTERNAL
    assert [(link.n, link.command, link.pids) for link in view.links] == [
        (1, "ls -la", [13, 14]),
        (2, "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", [15]),
    ]
    assert view.roles[14] == TOOL


def test_find_agent_log_from_file_events(codex_events: Callable[[list[str]], list[Event]]) -> None:
    assert (
        find_agent_log(codex_events(["ls"]))
        == "/h/.codex/sessions/2026/01/02/rollout-2026-01-02T03-04-05-x.jsonl"
    )


def test_sink_labels_live_and_links_from_the_log_at_the_end(
    tmp_path: Path, codex_events: Callable[[list[str]], list[Event]], make_rollout: Callable[[list[str]], str]
) -> None:
    cmds = ["cat SKILL.md", "pytest -q"]
    log = tmp_path / "rollout.jsonl"
    log.write_text(make_rollout(cmds))
    meta = RunMeta(id="r1")
    ctx = RunContext(run=meta)
    sink = AgentAwareness(log)
    seen_labels: list[str | None] = []

    class Probe:
        """Stands for the rule engine: reads the label while the run goes on."""

        def file_read(self, ev: Event) -> None:
            seen_labels.append(ctx.tool_calls.get(ev.pid))

    pipe = Pipeline([sink, Probe()], ctx)
    pipe.start()
    for ev in codex_events(cmds):
        pipe.feed(ev, renumber=False)
    pipe.done()
    assert seen_labels == ["tool call 1: cat SKILL.md", "tool call 2: pytest -q"]
    stored = meta.extra["agent"]
    assert stored["agent"] == "codex" and stored["log"] == str(log)
    assert [(c["n"], c["source"], c["call_id"], c["root_pid"]) for c in stored["tool_calls"]] == [
        (1, "log", "c1", 200),
        (2, "log", "c2", 210),
    ]
    assert stored["tool_calls"][0]["events"] > 0
    assert ctx.tool_calls[201] == "tool call 1: cat SKILL.md"
    assert sorted(stored["agent_pids"]) == [100, 101]


def test_sink_without_any_log_still_labels_from_the_process_tree(
    codex_events: Callable[[list[str]], list[Event]],
) -> None:
    meta = RunMeta(id="r2")
    ctx = RunContext(run=meta)
    pipe = Pipeline([AgentAwareness()], ctx)
    pipe.start()
    for ev in codex_events(["ls"]):
        pipe.feed(ev, renumber=False)
    pipe.done()
    # the rollout path was seen being created but the file does not exist here
    assert [c["source"] for c in meta.extra["agent"]["tool_calls"]] == ["process tree"]
    assert ctx.tool_calls[200] == "tool call 1: ls"


def test_a_run_without_an_agent_stores_nothing(events: Any) -> None:
    e = events
    e.start(1, None)
    e.exec(1, "/usr/bin/true", "true")
    meta = RunMeta(id="r3")
    ctx = RunContext(run=meta)
    pipe = Pipeline([AgentAwareness()], ctx)
    pipe.start()
    for ev in e.out:
        pipe.feed(ev)
    pipe.done()
    assert "agent" not in meta.extra
    assert ctx.tool_calls == {}
