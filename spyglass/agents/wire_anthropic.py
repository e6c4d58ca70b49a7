"""The Anthropic Messages API wire format the model stub answers in.

Pure functions from a rendered :class:`~spyglass.agents.script.Turn` to a
``message`` object (``POST /v1/messages``) or to the server-sent events of a
streamed one: ``message_start``, per content block ``content_block_start`` /
``content_block_delta`` (``text_delta`` or ``input_json_delta``) /
``content_block_stop``, then ``message_delta`` (with the ``stop_reason``) and
``message_stop``.  A turn's text is a ``text`` block, each call a
``tool_use`` block whose ``input`` is the call's arguments.  The server is
:mod:`spyglass.agents.model_stub`.
"""

from __future__ import annotations

import json
from typing import Any

from spyglass.agents.script import Turn


def messages_turns_done(messages: Any) -> int:
    """Assistant turns already in a Messages API ``messages`` list."""
    if not isinstance(messages, list):
        return 0
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


def _input(arguments: str) -> Any:
    try:
        value = json.loads(arguments) if arguments else {}
    except ValueError:
        return {"input": arguments}
    return value if isinstance(value, dict) else {"input": value}


def content_blocks(turn: Turn) -> list[dict[str, Any]]:
    """The ``content`` of the assistant message: a text block (if it says something), then tool_use blocks."""
    blocks: list[dict[str, Any]] = []
    if turn.text is not None:
        blocks.append({"type": "text", "text": turn.text})
    for c in turn.calls:
        blocks.append({"type": "tool_use", "id": c.call_id, "name": c.name, "input": _input(c.arguments)})
    return blocks


def _usage() -> dict[str, Any]:
    return {
        "input_tokens": 1,
        "output_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def stop_reason(turn: Turn) -> str:
    return "tool_use" if turn.calls else "end_turn"


def message_object(turn: Turn, model: str, *, done: bool = True) -> dict[str, Any]:
    """A ``message`` object; ``done=False`` gives the empty one ``message_start`` carries."""
    return {
        "id": f"msg_stub_{turn.index + 1}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content_blocks(turn) if done else [],
        "stop_reason": stop_reason(turn) if done else None,
        "stop_sequence": None,
        "usage": _usage(),
    }


def message_events(turn: Turn, model: str) -> list[dict[str, Any]]:
    """The server-sent events of a streamed ``/v1/messages`` answer, in order."""
    events: list[dict[str, Any]] = [{"type": "message_start", "message": message_object(turn, model, done=False)}]
    for i, block in enumerate(content_blocks(turn)):
        if block["type"] == "text":
            events.append({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
            delta: dict[str, Any] = {"type": "text_delta", "text": block["text"]}
        else:
            events.append({"type": "content_block_start", "index": i, "content_block": {**block, "input": {}}})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append({"type": "content_block_delta", "index": i, "delta": delta})
        events.append({"type": "content_block_stop", "index": i})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(turn), "stop_sequence": None},
            "usage": {"output_tokens": 1},
        }
    )
    events.append({"type": "message_stop"})
    return events


def count_tokens(body: Any) -> dict[str, int]:
    """``POST /v1/messages/count_tokens``: a rough count (a token per four bytes of the request)."""
    size = len(json.dumps(body, separators=(",", ":"))) if body is not None else 0
    return {"input_tokens": max(1, size // 4)}


def error_body(message: str, typ: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": typ, "message": message}}
