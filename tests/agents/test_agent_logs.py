"""Reading tool calls from codex --json output, codex rollouts and mini-swe-agent trajectories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spyglass.agents.agent_logs import (
    command_of_string,
    log_from_argv,
    looks_like_agent_log,
    parse_agent_log,
    read_agent_log,
    unwrap_shell,
)
from spyglass.errors import SourceError


def jsonl(*objs: object) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


CODEX_EXEC = jsonl(
    {"type": "thread.started", "thread_id": "t1"},
    {"type": "turn.started"},
    {
        "type": "item.completed",
        "item": {"id": "item_0", "type": "agent_message", "text": "Reading the skill."},
    },
    {
        "type": "item.started",
        "item": {
            "id": "item_1",
            "type": "command_execution",
            "command": "/bin/bash -lc 'cat SKILL.md'",
            "status": "in_progress",
        },
    },
    {
        "type": "item.completed",
        "item": {
            "id": "item_1",
            "type": "command_execution",
            "command": "/bin/bash -lc 'cat SKILL.md'",
            "exit_code": 0,
        },
    },
    {
        "type": "item.completed",
        "item": {
            "id": "item_2",
            "type": "command_execution",
            "command": "/bin/bash -lc 'pytest -q'",
            "exit_code": 1,
        },
    },
    {"type": "item.completed", "item": {"id": "item_3", "type": "agent_message", "text": "Done."}},
    {"type": "turn.completed", "usage": {}},
)


def rollout_line(kind: str, payload: dict[str, object]) -> dict[str, object]:
    return {"timestamp": "2026-01-02T03:04:05.000Z", "type": kind, "payload": payload}


CODEX_ROLLOUT = jsonl(
    rollout_line("session_meta", {"id": "s", "cwd": "/w"}),
    rollout_line(
        "response_item",
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "task"}]},
    ),
    rollout_line(
        "response_item",
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Reading the skill."}],
        },
    ),
    rollout_line(
        "response_item",
        {
            "type": "function_call",
            "name": "exec_command",
            "call_id": "c1",
            "arguments": json.dumps({"cmd": "cat SKILL.md"}),
        },
    ),
    rollout_line(
        "event_msg",
        {
            "type": "item_completed",
            "item": {
                "type": "CommandExecution",
                "id": "c1",
                "command": ["/bin/bash", "-lc", "cat SKILL.md"],
                "exit_code": 0,
            },
        },
    ),
    rollout_line("response_item", {"type": "function_call_output", "call_id": "c1", "output": "..."}),
    rollout_line(
        "response_item",
        {
            "type": "function_call",
            "name": "update_plan",
            "call_id": "c2",
            "arguments": json.dumps({"plan": []}),
        },
    ),
    rollout_line(
        "response_item",
        {
            "type": "function_call",
            "name": "shell",
            "call_id": "c3",
            "arguments": json.dumps({"command": ["bash", "-lc", "pytest -q"]}),
        },
    ),
    rollout_line("response_item", {"type": "function_call_output", "call_id": "c2", "output": "ok"}),
    rollout_line("response_item", {"type": "function_call_output", "call_id": "c3", "output": "ok"}),
    rollout_line(
        "response_item",
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
    ),
)

MINI_TRAJ = json.dumps(
    {
        "trajectory_format": "mini-swe-agent-1.1",
        "info": {},
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "task"},
            {
                "role": "assistant",
                "content": "Reading.",
                "extra": {
                    "timestamp": 1.5,
                    "actions": [{"command": "cat SKILL.md", "tool_call_id": "call_1_1"}],
                },
            },
            {"role": "tool", "tool_call_id": "call_1_1", "content": "...", "extra": {"returncode": 0}},
            {
                "role": "assistant",
                "content": "Finishing.",
                "extra": {
                    "actions": [
                        {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "tool_call_id": "call_2_1"}
                    ]
                },
            },
            {"role": "exit", "content": ""},
        ],
    }
)


def test_codex_exec_json() -> None:
    log = parse_agent_log(CODEX_EXEC)
    assert (log.agent, log.format) == ("codex", "codex-exec-json")
    assert [(c.n, c.command, c.exit_code) for c in log.tool_calls] == [
        (1, "cat SKILL.md", 0),
        (2, "pytest -q", 1),
    ]
    assert log.tool_calls[0].argv == ["/bin/bash", "-lc", "cat SKILL.md"]
    assert [(t.text, [c.n for c in t.calls]) for t in log.turns] == [
        ("Reading the skill.", [1]),
        (None, [2]),
        ("Done.", []),
    ]
    assert log.tool_calls[0].label == "tool call 1: cat SKILL.md"


def test_codex_rollout() -> None:
    log = parse_agent_log(CODEX_ROLLOUT)
    assert (log.agent, log.format) == ("codex", "codex-rollout")
    calls = log.tool_calls
    assert [(c.n, c.command, c.call_id, c.tool) for c in calls] == [
        (1, "cat SKILL.md", "c1", "exec_command"),
        (2, "pytest -q", "c3", "shell"),
    ]
    assert calls[0].exit_code == 0 and calls[0].argv == ["/bin/bash", "-lc", "cat SKILL.md"]
    assert calls[0].ts is not None
    assert [(t.text, len(t.calls), [n for n, _ in t.other_calls]) for t in log.turns] == [
        ("Reading the skill.", 1, []),
        (None, 1, ["update_plan"]),
        ("Done.", 0, []),
    ]


def test_mini_trajectory(tmp_path: Path) -> None:
    path = tmp_path / "last_mini_run.traj.json"
    path.write_text(MINI_TRAJ)
    log = read_agent_log(path)
    assert (log.agent, log.format, log.source) == ("mini", "mini-trajectory", str(path))
    assert [(c.n, c.command, c.call_id, c.exit_code) for c in log.tool_calls] == [
        (1, "cat SKILL.md", "call_1_1", 0),
        (2, "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "call_2_1", None),
    ]
    assert log.tool_calls[0].ts == 1.5
    assert [t.text for t in log.turns] == ["Reading.", "Finishing."]


def test_a_last_line_cut_short_is_ignored() -> None:
    log = parse_agent_log(CODEX_ROLLOUT + '{"timestamp": "2026-01-02T03:0')
    assert len(log.tool_calls) == 2


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty"),
        ('{"type": "other"}\n', "unknown agent log format"),
        ("not json\n{}\n", "not JSON lines"),
    ],
)
def test_unknown_logs_are_source_errors(text: str, needle: str) -> None:
    with pytest.raises(SourceError, match=needle):
        parse_agent_log(text, "log.jsonl")


def test_shell_unwrapping() -> None:
    assert unwrap_shell(["/bin/bash", "-lc", "ls -la"]) == "ls -la"
    assert unwrap_shell(["sh", "-c", "x"]) == "x"
    assert unwrap_shell(["bash", "--norc", "-ec", "x"]) == "x"
    assert unwrap_shell(["python3", "-c", "x"]) is None
    assert unwrap_shell(["bash", "script.sh", "-c"]) is None
    assert command_of_string("/bin/bash -lc 'echo \"a b\"'") == (
        'echo "a b"',
        ["/bin/bash", "-lc", 'echo "a b"'],
    )
    assert command_of_string("unbalanced 'quote") == ("unbalanced 'quote", None)


def test_session_log_paths() -> None:
    assert (
        looks_like_agent_log("/h/.codex/sessions/2026/01/02/rollout-2026-01-02T03-04-05-abc.jsonl") == "codex"
    )
    assert looks_like_agent_log("/h/.config/mini-swe-agent/last_mini_run.traj.json") == "mini"
    assert looks_like_agent_log("/w/notes.jsonl") is None


def test_mini_output_option() -> None:
    assert log_from_argv(["mini", "--yolo", "-o", "out/t.json"], "/w") == "/w/out/t.json"
    assert log_from_argv(["mini", "--output=/abs/t.json"], "/w") == "/abs/t.json"
    assert log_from_argv(["mini", "--yolo"], "/w") is None
