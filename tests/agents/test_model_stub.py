"""The scripted model server, hit over loopback with plain HTTP."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spyglass.agents.model_stub import StubServer, start_stub
from spyglass.agents.script import parse_script

BASH_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}
EXEC_TOOL = {
    "type": "function",
    "name": "exec_command",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
}

SCRIPT = {
    "model": "stub-model",
    "vars": {"PORT": "1"},
    "steps": [
        {"say": "Looking around.", "run": "ls -la"},
        {"run": ["cat a.txt", "curl http://127.0.0.1:${PORT}/x"]},
        {"say": "Done."},
    ],
}


@pytest.fixture
def stub(tmp_path: Path) -> Iterator[StubServer]:
    server = start_stub(parse_script(SCRIPT), variables={"PORT": "9999"}, log_path=tmp_path / "requests.jsonl")
    yield server
    server.close()


def request(stub: StubServer, method: str, path: str, body: Any = None) -> tuple[int, str, str]:
    conn = http.client.HTTPConnection("127.0.0.1", stub.port, timeout=10)
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data is not None else {}
    conn.request(method, path, body=data, headers=headers)
    resp = conn.getresponse()
    text = resp.read().decode()
    ctype = resp.getheader("Content-Type") or ""
    conn.close()
    return resp.status, ctype, text


def sse_data(text: str) -> list[tuple[str | None, str]]:
    """(event name, data) pairs of a server-sent-events body."""
    out = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        name = None
        data = []
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data.append(line[len("data: ") :])
        out.append((name, "\n".join(data)))
    return out


def chat(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "openai/x", "messages": messages, "tools": [BASH_TOOL], **extra}


SYSTEM = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]


def test_chat_completion_answers_the_first_step_with_a_tool_call(stub: StubServer) -> None:
    status, ctype, text = request(stub, "POST", "/v1/chat/completions", chat(SYSTEM))
    assert status == 200 and ctype.startswith("application/json")
    body = json.loads(text)
    msg = body["choices"][0]["message"]
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert msg["role"] == "assistant" and msg["content"] == "Looking around."
    (call,) = msg["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "bash"
    assert json.loads(call["function"]["arguments"]) == {"command": "ls -la"}


def test_chat_step_is_the_number_of_assistant_turns_so_far(stub: StubServer) -> None:
    history = [
        *SYSTEM,
        {
            "role": "assistant",
            "content": "x",
            "tool_calls": [{"id": "call_1_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "call_1_1", "content": "out"},
    ]
    _, _, text = request(stub, "POST", "/v1/chat/completions", chat(history))
    calls = json.loads(text)["choices"][0]["message"]["tool_calls"]
    # two parallel calls; ${PORT} from the server's variables, not the script default
    assert [json.loads(c["function"]["arguments"])["command"] for c in calls] == [
        "cat a.txt",
        "curl http://127.0.0.1:9999/x",
    ]
    assert [c["id"] for c in calls] == ["call_2_1", "call_2_2"]
    history += [{"role": "assistant", "content": "y"}, {"role": "user", "content": "go on"}]
    _, _, text = request(stub, "POST", "/chat/completions", chat(history))  # without /v1 too
    final = json.loads(text)["choices"][0]
    assert final["message"]["content"] == "Done." and "tool_calls" not in final["message"]
    assert final["finish_reason"] == "stop"


def test_a_retried_request_gets_the_same_answer(stub: StubServer) -> None:
    a = json.loads(request(stub, "POST", "/v1/chat/completions", chat(SYSTEM))[2])
    b = json.loads(request(stub, "POST", "/v1/chat/completions", chat(SYSTEM))[2])
    assert a["choices"] == b["choices"]
    assert stub.steps_served == [0, 0]


def test_streamed_chat_completion(stub: StubServer) -> None:
    body = chat(SYSTEM, stream=True, stream_options={"include_usage": True})
    status, ctype, text = request(stub, "POST", "/v1/chat/completions", body)
    assert status == 200 and ctype.startswith("text/event-stream")
    events = sse_data(text)
    assert events[-1] == (None, "[DONE]")
    chunks = [json.loads(d) for _, d in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert content == "Looking around."
    calls = [tc for c in chunks if c["choices"] for tc in c["choices"][0]["delta"].get("tool_calls") or []]
    assert [(tc["index"], tc["function"]["name"]) for tc in calls] == [(0, "bash")]
    assert json.loads(calls[0]["function"]["arguments"]) == {"command": "ls -la"}
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "tool_calls"
    assert "usage" in chunks[-1]


def responses_body(items: list[dict[str, Any]], stream: bool = True) -> dict[str, Any]:
    return {"model": "stub-model", "input": items, "tools": [EXEC_TOOL], "stream": stream}


USER_INPUT = [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "task"}]},
]


def test_responses_stream_sends_the_documented_events(stub: StubServer) -> None:
    status, ctype, text = request(stub, "POST", "/v1/responses", responses_body(USER_INPUT))
    assert status == 200 and ctype.startswith("text/event-stream")
    events = sse_data(text)
    names = [n for n, _ in events]
    for needed in (
        "response.created",
        "response.output_item.added",
        "response.output_text.delta",
        "response.output_item.done",
        "response.completed",
    ):
        assert needed in names
    assert names[0] == "response.created" and names[-1] == "response.completed"
    datas = [json.loads(d) for _, d in events]
    assert all(d["type"] == n for d, (n, _) in zip(datas, events, strict=True))
    assert [d["sequence_number"] for d in datas] == list(range(len(datas)))
    done_items = [d["item"] for d in datas if d["type"] == "response.output_item.done"]
    assert [i["type"] for i in done_items] == ["message", "function_call"]
    assert done_items[0]["content"][0]["text"] == "Looking around."
    fc = done_items[1]
    assert fc["name"] == "exec_command" and json.loads(fc["arguments"]) == {"cmd": "ls -la"}
    assert fc["call_id"] == "call_1_1"
    deltas = "".join(d["delta"] for d in datas if d["type"] == "response.output_text.delta")
    assert deltas == "Looking around."
    completed = datas[-1]["response"]
    assert completed["status"] == "completed" and completed["output"] == done_items


def test_responses_counts_a_turn_of_several_items_once(stub: StubServer) -> None:
    turn1 = [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Looking around."}],
        },
        {"type": "function_call", "call_id": "call_1_1", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1_1", "output": "a.txt"},
    ]
    _, _, text = request(stub, "POST", "/v1/responses", responses_body(USER_INPUT + turn1, stream=False))
    body = json.loads(text)
    assert body["object"] == "response" and body["status"] == "completed"
    assert [(i["type"], json.loads(i["arguments"])["cmd"]) for i in body["output"]] == [
        ("function_call", "cat a.txt"),
        ("function_call", "curl http://127.0.0.1:9999/x"),
    ]
    turn2 = [
        {"type": "function_call", "call_id": "call_2_1", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call", "call_id": "call_2_2", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_2_1", "output": ""},
        {"type": "function_call_output", "call_id": "call_2_2", "output": ""},
    ]
    _, _, text = request(stub, "POST", "/v1/responses", responses_body(USER_INPUT + turn1 + turn2, stream=False))
    (msg,) = json.loads(text)["output"]
    assert msg["type"] == "message" and msg["content"][0]["text"] == "Done."


def test_past_the_last_step_is_a_clear_error(stub: StubServer) -> None:
    history = [*SYSTEM] + [{"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}] * 3
    status, _, text = request(stub, "POST", "/v1/chat/completions", chat(history))
    assert status == 400
    err = json.loads(text)["error"]
    assert err["code"] == "script_exhausted"
    assert "3 step(s)" in err["message"] and "3 assistant turn(s)" in err["message"]


def test_a_command_step_without_a_shell_tool_is_refused(stub: StubServer) -> None:
    status, _, text = request(stub, "POST", "/v1/chat/completions", {"messages": SYSTEM, "tools": []})
    assert status == 400
    assert "declares no shell tool" in json.loads(text)["error"]["message"]


def test_models_and_unknown_paths(stub: StubServer) -> None:
    status, _, text = request(stub, "GET", "/v1/models")
    assert status == 200
    assert [m["id"] for m in json.loads(text)["data"]] == ["stub-model"]
    status, _, text = request(stub, "GET", "/models")
    assert status == 200
    assert request(stub, "GET", "/v1/nothing")[0] == 404
    assert request(stub, "POST", "/v1/embeddings", {"input": "x"})[0] == 404


def test_every_request_is_logged(stub: StubServer, tmp_path: Path) -> None:
    request(stub, "GET", "/v1/models")
    request(stub, "POST", "/v1/chat/completions", chat(SYSTEM))
    assert [(r.method, r.api, r.status, r.step) for r in stub.requests] == [
        ("GET", "models", 200, None),
        ("POST", "chat", 200, 0),
    ]
    lines = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert [(x["path"], x["status"], x["step"]) for x in lines] == [
        ("/v1/models", 200, None),
        ("/v1/chat/completions", 200, 0),
    ]
    assert lines[1]["body"]["messages"] == SYSTEM


def test_urls_and_loopback(stub: StubServer) -> None:
    assert stub.url == f"http://127.0.0.1:{stub.port}/v1"
    assert stub.base_url.startswith("http://127.0.0.1:")


# --------------------------------------------------------------------------- Anthropic Messages API

CLAUDE_BASH = {
    "name": "Bash",
    "description": "Run a command",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}, "timeout": {"type": "number"}},
        "required": ["command"],
    },
}


def _messages(n_assistant: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "the task"}]
    for i in range(n_assistant):
        msgs.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {}}]}
        )
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"}]})
    return msgs


def test_messages_plain(stub: StubServer) -> None:
    body = {"model": "claude-x", "max_tokens": 100, "messages": _messages(0), "tools": [CLAUDE_BASH]}
    status, _ctype, text = request(stub, "POST", "/v1/messages?beta=true", body)
    assert status == 200
    msg = json.loads(text)
    assert msg["type"] == "message" and msg["role"] == "assistant" and msg["model"] == "claude-x"
    assert msg["stop_reason"] == "tool_use"
    assert msg["content"] == [
        {"type": "text", "text": "Looking around."},
        {"type": "tool_use", "id": "call_1_1", "name": "Bash", "input": {"command": "ls -la"}},
    ]


def test_messages_streamed_events_in_order(stub: StubServer) -> None:
    body = {"model": "m", "stream": True, "messages": _messages(1), "tools": [CLAUDE_BASH]}
    status, ctype, text = request(stub, "POST", "/v1/messages?beta=true", body)
    assert status == 200 and ctype.startswith("text/event-stream")
    events = [
        (block.split("\n")[0].removeprefix("event: "), json.loads(block.split("\n")[1].removeprefix("data: ")))
        for block in text.strip().split("\n\n")
    ]
    names = [n for n, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == 2  # two parallel calls
    assert all(n == d["type"] for n, d in events)
    deltas = [d["delta"] for n, d in events if n == "content_block_delta"]
    assert [d["type"] for d in deltas] == ["input_json_delta", "input_json_delta"]
    assert json.loads(deltas[1]["partial_json"]) == {"command": "curl http://127.0.0.1:9999/x"}
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_messages_last_step_ends_the_turn_and_past_it_is_an_error(stub: StubServer) -> None:
    body = {"model": "m", "messages": _messages(2), "tools": [CLAUDE_BASH]}
    _s, _c, text = request(stub, "POST", "/v1/messages", body)
    msg = json.loads(text)
    assert msg["stop_reason"] == "end_turn" and msg["content"] == [{"type": "text", "text": "Done."}]
    status, _c, text = request(stub, "POST", "/v1/messages", {**body, "messages": _messages(3)})
    assert status == 400
    err = json.loads(text)
    assert err["type"] == "error" and "3 assistant turn" in err["error"]["message"]


def test_count_tokens(stub: StubServer) -> None:
    body = {"model": "m", "messages": _messages(0)}
    status, _c, text = request(stub, "POST", "/v1/messages/count_tokens?beta=true", body)
    assert status == 200 and json.loads(text)["input_tokens"] > 0
    assert stub.steps_served == []  # counting is not a turn
