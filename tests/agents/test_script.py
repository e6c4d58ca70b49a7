"""Model scripts: loading, errors with file and line, rendering against declared tools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spyglass.agents.script import (
    ScriptError,
    chat_turns_done,
    declared_tools,
    load_script,
    parse_script,
    render_step,
    responses_turns_done,
    shell_call_arguments,
)
from spyglass.errors import SourceError


def tools(*names: str) -> list[tuple[str, dict[str, object]]]:
    return [(n, {}) for n in names]


def test_load_a_script_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    data = {
        "model": "m",
        "vars": {"X": 1},
        "steps": [
            {"say": "hi", "run": "ls"},
            {
                "run": ["a", "b"],
                "tool_calls": [{"name": "update_plan", "arguments": {"plan": []}, "id": "c9"}],
            },
            "plain text step",
        ],
    }
    path.write_text(json.dumps(data))
    script = load_script(path)
    assert len(script) == 3 and script.model == "m" and script.vars == {"X": "1"}
    assert script.steps[2].say == "plain text step"
    assert parse_script(script.to_json()).steps == script.steps


def test_a_bare_list_is_the_steps() -> None:
    assert len(parse_script([{"say": "a"}, {"say": "b"}])) == 2


def test_bad_json_names_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"steps": [\n  {"say": "x",}\n]}')
    with pytest.raises(SourceError) as err:
        load_script(path)
    assert str(err.value).startswith(f"{path}:2:")


def test_a_bad_step_names_the_step_and_its_line(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"steps": [\n  {"say": "ok"},\n  {"run": 5}\n]}')
    with pytest.raises(SourceError) as err:
        load_script(path)
    assert err.value.line == 3
    assert "steps[1].run" in str(err.value)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"steps": []}, "non-empty"),
        ({"steps": [{}]}, "empty step"),
        ({"steps": [{"sya": "x"}]}, "unknown key"),
        ({"stpes": [{"say": "x"}]}, "unknown key"),
        ({"steps": [{"tool_calls": [{"arguments": {}}]}]}, "name"),
        (42, "JSON object"),
    ],
)
def test_mistakes_are_reported(data: object, needle: str) -> None:
    with pytest.raises(SourceError, match=needle):
        parse_script(data, "s.json")


def test_missing_file_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="cannot read"):
        load_script(tmp_path / "none.json")


def test_run_uses_the_shell_tool_the_request_declares() -> None:
    assert shell_call_arguments(tools("write_stdin", "exec_command"), "ls") == ("exec_command", {"cmd": "ls"})
    assert shell_call_arguments(tools("bash"), "ls") == ("bash", {"command": "ls"})
    assert shell_call_arguments(tools("shell"), "ls") == ("shell", {"command": ["bash", "-lc", "ls"]})
    custom = [("run_terminal", {"required": ["line"], "properties": {"line": {"type": "string"}}})]
    assert shell_call_arguments(custom, "ls") == ("run_terminal", {"line": "ls"})
    with pytest.raises(ScriptError, match="no shell tool"):
        shell_call_arguments(tools("view_image"), "ls")


def test_declared_tools_reads_both_wire_shapes() -> None:
    chat = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    responses = [{"type": "function", "name": "exec_command", "parameters": {}}, {"type": "web_search"}]
    assert declared_tools(chat) == [("bash", {"type": "object"})]
    assert declared_tools(responses) == [("exec_command", {})]
    assert declared_tools(None) == []


def test_render_substitutes_known_variables_only() -> None:
    script = parse_script(
        {"vars": {"A": "default"}, "steps": [{"say": "${A} ${B}", "run": "echo ${A} $HOME ${B}"}]}
    )
    turn = render_step(script, 0, tools("bash"), {"B": "given"})
    assert turn.text == "default given"
    assert json.loads(turn.calls[0].arguments) == {"command": "echo default $HOME given"}
    assert turn.calls[0].call_id == "call_1_1"


def test_explicit_tool_calls_keep_their_arguments() -> None:
    script = parse_script(
        [{"tool_calls": [{"name": "f", "arguments": '{"raw": 1}'}, {"name": "g", "id": "x"}]}]
    )
    turn = render_step(script, 0, [], {})
    assert [(c.name, c.arguments, c.call_id) for c in turn.calls] == [
        ("f", '{"raw": 1}', "call_1_1"),
        ("g", "{}", "x"),
    ]


def test_turn_counting() -> None:
    assert (
        chat_turns_done([{"role": "user"}, {"role": "assistant"}, {"role": "tool"}, {"role": "assistant"}])
        == 2
    )
    items = [
        {"type": "message", "role": "user"},
        {"type": "reasoning"},
        {"type": "message", "role": "assistant"},
        {"type": "function_call"},
        {"type": "function_call_output"},
        {"role": "assistant", "content": "easy message without type"},
        {"type": "message", "role": "user"},
    ]
    assert responses_turns_done(items) == 2
    assert responses_turns_done("just a string") == 0
