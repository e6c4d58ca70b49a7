"""A scripted model server on loopback, speaking the OpenAI and Anthropic APIs.

It answers ``POST /v1/chat/completions`` (plain and streamed),
``POST /v1/responses`` (plain and server-sent events), the Anthropic
``POST /v1/messages`` (plain and server-sent events, ``?beta=true`` too) and
``POST /v1/messages/count_tokens``, and ``GET /v1/models``
from a :class:`~spyglass.agents.script.Script` instead of a model.  The wire
formats are :mod:`spyglass.agents.wire_openai` and
:mod:`spyglass.agents.wire_anthropic`.  The step
to answer is the number of assistant turns already in the request, so the
server keeps no conversation state and a retried request gets the same
answer.  Every request is kept (``server.requests``) and, if asked, appended
to a JSONL log.

Paths are accepted with and without the ``/v1`` prefix, so a base URL of
``http://127.0.0.1:PORT`` or ``http://127.0.0.1:PORT/v1`` both work.

    with start_stub(load_script("task.json")) as stub:
        env["OPENAI_BASE_URL"] = stub.url      # http://127.0.0.1:PORT/v1
        env["ANTHROPIC_BASE_URL"] = stub.base_url  # http://127.0.0.1:PORT
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

import msgspec

from spyglass.agents import wire_anthropic
from spyglass.agents.script import (
    Script,
    ScriptError,
    Turn,
    chat_turns_done,
    declared_tools,
    render_step,
    responses_turns_done,
)
from spyglass.agents.wire_openai import (
    chat_chunks,
    chat_completion,
    error_body,
    response_events,
    response_object,
    sse,
)

__all__ = ["StubRequest", "StubServer", "start_stub"]


class StubRequest(msgspec.Struct):
    """One request the stub received, as logged."""

    ts: float
    method: str
    path: str
    status: int
    step: int | None = None  # 0-based step answered, None if none
    api: str | None = None  # "chat" | "responses" | "messages" | "count_tokens" | "models"
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
        elif api == "messages":
            done = wire_anthropic.messages_turns_done(body.get("messages"))
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
            self._json(200, {"id": route[len("/models/") :], "object": "model", "created": 0, "owned_by": "spyglass"})
        else:
            self.stub.record(StubRequest(time.time(), "GET", self.path, 404, error="unknown path"))
            self._json(404, error_body(f"spyglass model-stub: no such path {self.path}", "not_found"))

    def do_POST(self) -> None:
        route = self._route()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        now = time.time()
        api = {
            "/chat/completions": "chat",
            "/responses": "responses",
            "/messages": "messages",
            "/messages/count_tokens": "count_tokens",
        }.get(route)
        try:
            body = json.loads(raw or b"{}")
        except (ValueError, UnicodeDecodeError):
            body = None
        if api is None or not isinstance(body, dict):
            status, why = (404, "unknown path") if api is None else (400, "the body is not a JSON object")
            self.stub.record(
                StubRequest(now, "POST", self.path, status, api=api, body=raw.decode(errors="replace"), error=why)
            )
            self._json(
                status,
                error_body(f"spyglass model-stub: {why}", "not_found" if status == 404 else "bad_json"),
            )
            return
        if api == "count_tokens":
            self.stub.record(StubRequest(now, "POST", self.path, 200, api=api, body=body))
            self._json(200, wire_anthropic.count_tokens(body))
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
            if api == "messages":
                self._json(status, wire_anthropic.error_body(error or "no answer"))
            else:
                self._json(status, error_body(error or "no answer", "script_exhausted"))
            return
        model = str(body.get("model") or self.stub.script.model)
        created = int(now)
        if api == "messages":
            if stream:
                self._send(200, sse(wire_anthropic.message_events(turn, model), named=True), "text/event-stream")
            else:
                self._json(200, wire_anthropic.message_object(turn, model))
        elif api == "chat":
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
