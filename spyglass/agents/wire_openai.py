"""The OpenAI wire formats the model stub answers in: chat completions and the responses API.

Pure functions from a rendered :class:`~spyglass.agents.script.Turn` to the
JSON objects (and server-sent events) an OpenAI client expects.  The server
is :mod:`spyglass.agents.model_stub`.
"""

from __future__ import annotations

import json
from typing import Any

from spyglass.agents.script import Turn


def _usage_chat() -> dict[str, int]:
    return {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


def chat_completion(turn: Turn, model: str, created: int) -> dict[str, Any]:
    """A non-streamed ``chat.completion`` object for ``turn``."""
    msg: dict[str, Any] = {"role": "assistant", "content": turn.text}
    if turn.calls:
        msg["tool_calls"] = [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in turn.calls
        ]
    return {
        "id": f"chatcmpl-stub-{turn.index + 1}",
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": msg,
                "finish_reason": "tool_calls" if turn.calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": _usage_chat(),
    }


def chat_chunks(turn: Turn, model: str, created: int, include_usage: bool) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a streamed answer (``[DONE]`` not included)."""
    base = {
        "id": f"chatcmpl-stub-{turn.index + 1}",
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    out = [chunk({"role": "assistant", "content": ""})]
    if turn.text:
        out.append(chunk({"content": turn.text}))
    for i, c in enumerate(turn.calls):
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": c.call_id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        }
                    ]
                }
            )
        )
    out.append(chunk({}, "tool_calls" if turn.calls else "stop"))
    if include_usage:
        out.append({**base, "choices": [], "usage": _usage_chat()})
    return out


def _usage_responses() -> dict[str, Any]:
    return {
        "input_tokens": 1,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 1,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 2,
    }


def response_items(turn: Turn) -> list[dict[str, Any]]:
    """The output items of ``turn``: a ``message`` (if it says something), then ``function_call`` items."""
    n = turn.index + 1
    items: list[dict[str, Any]] = []
    if turn.text is not None:
        items.append(
            {
                "type": "message",
                "id": f"msg_stub_{n}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
        )
    for i, c in enumerate(turn.calls):
        items.append(
            {
                "type": "function_call",
                "id": f"fc_stub_{n}_{i + 1}",
                "call_id": c.call_id,
                "name": c.name,
                "arguments": c.arguments,
                "status": "completed",
            }
        )
    return items


def response_object(turn: Turn, model: str, created: int, status: str = "completed") -> dict[str, Any]:
    done = status == "completed"
    return {
        "id": f"resp_stub_{turn.index + 1}",
        "object": "response",
        "created_at": created,
        "status": status,
        "model": model,
        "output": response_items(turn) if done else [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": _usage_responses() if done else None,
        "error": None,
        "incomplete_details": None,
    }


def response_events(turn: Turn, model: str, created: int) -> list[dict[str, Any]]:
    """The server-sent events of a streamed ``/v1/responses`` answer, in order."""
    events: list[dict[str, Any]] = []

    def emit(typ: str, **fields: Any) -> None:
        events.append({"type": typ, "sequence_number": len(events), **fields})

    emit("response.created", response=response_object(turn, model, created, "in_progress"))
    emit("response.in_progress", response=response_object(turn, model, created, "in_progress"))
    for idx, item in enumerate(response_items(turn)):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            emit(
                "response.output_item.added",
                output_index=idx,
                item={**item, "status": "in_progress", "content": []},
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            emit(
                "response.content_part.added",
                item_id=item["id"],
                output_index=idx,
                content_index=0,
                part=part,
            )
            emit(
                "response.output_text.delta",
                item_id=item["id"],
                output_index=idx,
                content_index=0,
                delta=text,
            )
            emit("response.output_text.done", item_id=item["id"], output_index=idx, content_index=0, text=text)
            emit(
                "response.content_part.done",
                item_id=item["id"],
                output_index=idx,
                content_index=0,
                part={**part, "text": text},
            )
        else:
            emit(
                "response.output_item.added",
                output_index=idx,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            emit(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=idx,
                delta=item["arguments"],
            )
            emit(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=idx,
                arguments=item["arguments"],
            )
        emit("response.output_item.done", output_index=idx, item=item)
    emit("response.completed", response=response_object(turn, model, created))
    return events


def sse(events: list[dict[str, Any]], *, named: bool) -> bytes:
    """Server-sent-events body: ``event:`` lines when ``named`` (responses API)."""
    parts = []
    for ev in events:
        head = f"event: {ev['type']}\n" if named else ""
        parts.append(f"{head}data: {json.dumps(ev, separators=(',', ':'))}\n\n")
    return "".join(parts).encode()


def error_body(message: str, code: str, typ: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": typ, "code": code, "param": None}}
