"""A replay script made from a recorded session."""

from __future__ import annotations

import json

from spyglass.agents.agent_logs import parse_agent_log
from spyglass.agents.recording import script_from_log
from spyglass.agents.script import parse_script


def test_rollout_to_script() -> None:
    lines = [
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Looking."}],
            },
        },
        {
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "exec_command",
                "call_id": "a",
                "arguments": json.dumps({"cmd": "ls"}),
            },
        },
        {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "a"}},
        {
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "update_plan",
                "call_id": "b",
                "arguments": json.dumps({"plan": [{"step": "x"}]}),
            },
        },
        {
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "exec_command",
                "call_id": "c",
                "arguments": json.dumps({"cmd": "pytest -q"}),
            },
        },
        {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "b"}},
        {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c"}},
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Done."}],
            },
        },
    ]
    log = parse_agent_log("".join(json.dumps(x) + "\n" for x in lines), "rollout.jsonl")
    script = script_from_log(log, model="m")
    data = script.to_json()
    assert data == {
        "model": "m",
        "steps": [
            {"say": "Looking.", "run": "ls"},
            {
                "run": "pytest -q",
                "tool_calls": [{"name": "update_plan", "arguments": {"plan": [{"step": "x"}]}}],
            },
            {"say": "Done."},
        ],
    }
    assert parse_script(data).steps == script.steps


def test_mini_trajectory_to_script() -> None:
    traj = {
        "messages": [
            {"role": "user", "content": "task"},
            {
                "role": "assistant",
                "content": "Two at once.",
                "extra": {"actions": [{"command": "a"}, {"command": "b"}]},
            },
            {
                "role": "assistant",
                "content": "",
                "extra": {"actions": [{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}]},
            },
        ]
    }
    script = script_from_log(parse_agent_log(json.dumps(traj)))
    assert script.to_json()["steps"] == [
        {"say": "Two at once.", "run": ["a", "b"]},
        {"run": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"},
    ]
