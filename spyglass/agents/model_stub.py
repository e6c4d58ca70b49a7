"""A scripted OpenAI-compatible model server on loopback.

It answers ``POST /v1/chat/completions`` (plain and streamed),
``POST /v1/responses`` (plain and server-sent events) and ``GET /v1/models``
from a :class:`~spyglass.agents.script.Script` instead of a model.  The step
to answer is the number of assistant turns already in the request, so the
server keeps no conversation state and a retried request gets the same
answer.  Every request is kept (``server.requests``) and, if asked, appended
to a JSONL log.

Paths are accepted with and without the ``/v1`` prefix, so a base URL of
``http://127.0.0.1:PORT`` or ``http://127.0.0.1:PORT/v1`` both work.

    with start_stub(load_script("task.json")) as stub:
        env["OPENAI_BASE_URL"] = stub.url      # http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

from spyglass.agents.script import (
    Script,
    ScriptError,
    Turn,
    chat_turns_done,
    declared_tools,
    render_step,
    responses_turns_done,
)


@dataclass(slots=True)
class StubRequest:
    """One request the stub received, as logged."""

    ts: float
    method: str
    path: str
    status: int
    step: int | None = None  # 0-based step answered, None if none
    api: str | None = None  # "chat" | "responses" | "models"
    stream: bool = False
    body: Any = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "ts": self.ts,
            "method": self.method,
            "path": self.path,
            "status": self.status,
            "api": self.api,
            "step": self.step,
            "stream": self.stream,
            "error": self.error,
            "body": self.body,
        }


# --------------------------------------------------------------------------- wire formats


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
            emit(
                "response.output_text.done", item_id=item["id"], output_index=idx, content_index=0, text=text
            )
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


# --------------------------------------------------------------------------- server


class StubServer:
    """A running stub: ``url`` (ends in ``/v1``), ``port``, ``requests``; ``close()`` stops it."""

    def __init__(
        self,
        script: Script,
        host: str = "127.0.0.1",
        port: int = 0,
        variables: dict[str, str] | None = None,
        log_path: str | Path | None = None,
    ) -> None:
        self.script = script
        self.variables = dict(variables or {})
        self.requests: list[StubRequest] = []
        self._lock = threading.Lock()
        self._log: IO[str] | None = open(log_path, "a", encoding="utf-8") if log_path else None  # noqa: SIM115
        handler = type("StubHandler", (_Handler,), {"stub": self})
        self._httpd = ThreadingHTTPServer((host, port), handler)
        self._httpd.daemon_threads = True
        self.host = host
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="spyglass-model-stub", daemon=True
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` (no ``/v1``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The OpenAI base URL: ``http://HOST:PORT/v1``."""
        return f"{self.base_url}/v1"

    @property
    def steps_served(self) -> list[int]:
        """The steps answered so far, in request order (retries repeat a step)."""
        return [r.step for r in self.requests if r.step is not None]

    def record(self, req: StubRequest) -> None:
        with self._lock:
            self.requests.append(req)
            if self._log is not None:
                self._log.write(json.dumps(req.to_json(), default=str) + "\n")
                self._log.flush()

    def answer(self, api: str, body: dict[str, Any]) -> tuple[int, Turn | None, str | None]:
        """(status, turn, error) for a chat/responses request body."""
        if api == "chat":
            done = chat_turns_done(body.get("messages"))
        else:
            done = responses_turns_done(body.get("input"))
        if done >= len(self.script):
            return (
                400,
                None,
                (
                    f"spyglass model-stub: the script {self.script.source} has {len(self.script)} step(s) "
                    f"and the request already holds {done} assistant turn(s)"
                ),
            )
        try:
            turn = render_step(self.script, done, declared_tools(body.get("tools")), self.variables)
        except ScriptError as exc:
            return 400, None, f"spyglass model-stub: step {done + 1}: {exc}"
        return 200, turn, None

    def serve_forever_in_foreground(self) -> None:
        """Block until interrupted (the CLI's ``model-stub`` command)."""
        try:
            while self._thread.is_alive():
                self._thread.join(0.5)
        finally:
            self.close()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    def __enter__(self) -> StubServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Handler(BaseHTTPRequestHandler):
    stub: StubServer
    protocol_version = "HTTP/1.1"
    server_version = "spyglass-model-stub"
    disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms delayed-ACK stalls

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are kept in stub.requests / the JSONL log instead

    def _route(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path[3:] if path.startswith("/v1/") or path == "/v1" else path

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if ctype.startswith("text/event-stream"):
            self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json")

    def do_GET(self) -> None:
        route = self._route()
        if route == "/models":
            m = self.stub.script.model
            data = {
                "object": "list",
                "data": [{"id": m, "object": "model", "created": 0, "owned_by": "spyglass"}],
            }
            self.stub.record(StubRequest(time.time(), "GET", self.path, 200, api="models"))
            self._json(200, data)
        elif route.startswith("/models/"):
            self.stub.record(StubRequest(time.time(), "GET", self.path, 200, api="models"))
            self._json(
                200, {"id": route[len("/models/") :], "object": "model", "created": 0, "owned_by": "spyglass"}
            )
        else:
            self.stub.record(StubRequest(time.time(), "GET", self.path, 404, error="unknown path"))
            self._json(404, error_body(f"spyglass model-stub: no such path {self.path}", "not_found"))

    def do_POST(self) -> None:
        route = self._route()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        now = time.time()
        api = {"/chat/completions": "chat", "/responses": "responses"}.get(route)
        try:
            body = json.loads(raw or b"{}")
        except (ValueError, UnicodeDecodeError):
            body = None
        if api is None or not isinstance(body, dict):
            status, why = (404, "unknown path") if api is None else (400, "the body is not a JSON object")
            self.stub.record(
                StubRequest(
                    now, "POST", self.path, status, api=api, body=raw.decode(errors="replace"), error=why
                )
            )
            self._json(
                status,
                error_body(f"spyglass model-stub: {why}", "not_found" if status == 404 else "bad_json"),
            )
            return
        stream = bool(body.get("stream"))
        status, turn, error = self.stub.answer(api, body)
        self.stub.record(
            StubRequest(
                now,
                "POST",
                self.path,
                status,
                step=turn.index if turn else None,
                api=api,
                stream=stream,
                body=body,
                error=error,
            )
        )
        if turn is None:
            self._json(status, error_body(error or "no answer", "script_exhausted"))
            return
        model = str(body.get("model") or self.stub.script.model)
        created = int(now)
        if api == "chat":
            if stream:
                opts = body.get("stream_options") or {}
                chunks = chat_chunks(turn, model, created, bool(opts.get("include_usage")))
                self._send(200, sse(chunks, named=False) + b"data: [DONE]\n\n", "text/event-stream")
            else:
                self._json(200, chat_completion(turn, model, created))
        elif stream:
            self._send(200, sse(response_events(turn, model, created), named=True), "text/event-stream")
        else:
            self._json(200, response_object(turn, model, created))


def start_stub(
    script: Script,
    port: int = 0,
    *,
    host: str = "127.0.0.1",
    variables: dict[str, str] | None = None,
    log_path: str | Path | None = None,
) -> StubServer:
    """Start serving ``script`` on ``host:port`` (0: any free port) in a background thread."""
    return StubServer(script, host=host, port=port, variables=variables, log_path=log_path)
