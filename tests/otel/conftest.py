"""Real OTLP receivers on loopback: an HTTP/protobuf endpoint and a gRPC server.

Both decode what they get with the ``opentelemetry-proto`` messages and keep
the spans and log records, flattened, for the tests to look at.
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def any_value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


@dataclass
class Received:
    spans: list[dict[str, Any]] = field(default_factory=list)
    logs: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: called before each look (a receiver in another process hands over what it got)
    poll: Callable[[], None] | None = None

    def add(self, kind: str, body: bytes) -> bytes:
        """Decode one export request (``traces`` or ``logs``) and keep its records; the reply's bytes."""
        if kind == "traces":
            req_t = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
            self.add_traces(req_t)
            reply: bytes = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            return reply
        req_l = logs_service_pb2.ExportLogsServiceRequest.FromString(body)
        self.add_logs(req_l)
        reply = logs_service_pb2.ExportLogsServiceResponse().SerializeToString()
        return reply

    def add_traces(self, req: trace_service_pb2.ExportTraceServiceRequest) -> None:
        with self.lock:
            self.requests += 1
            for rs in req.resource_spans:
                res = {a.key: any_value(a.value) for a in rs.resource.attributes}
                self.resources.append(res)
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append(
                            {
                                "name": s.name,
                                "trace_id": s.trace_id.hex(),
                                "span_id": s.span_id.hex(),
                                "parent_id": s.parent_span_id.hex(),
                                "start": s.start_time_unix_nano,
                                "end": s.end_time_unix_nano,
                                "status": s.status.code,
                                "attrs": {a.key: any_value(a.value) for a in s.attributes},
                                "resource": res,
                            }
                        )

    def add_logs(self, req: logs_service_pb2.ExportLogsServiceRequest) -> None:
        with self.lock:
            self.requests += 1
            for rl in req.resource_logs:
                res = {a.key: any_value(a.value) for a in rl.resource.attributes}
                self.resources.append(res)
                for sl in rl.scope_logs:
                    for r in sl.log_records:
                        self.logs.append(
                            {
                                "event_name": r.event_name,
                                "severity": r.severity_number,
                                "severity_text": r.severity_text,
                                "body": any_value(r.body),
                                "trace_id": r.trace_id.hex(),
                                "span_id": r.span_id.hex(),
                                "ts": r.time_unix_nano,
                                "attrs": {a.key: any_value(a.value) for a in r.attributes},
                                "resource": res,
                            }
                        )

    def wait(self, cond: Callable[[Received], bool], timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.poll is not None:
                self.poll()
            with self.lock:
                if cond(self):
                    return True
            time.sleep(0.05)
        return False


@dataclass
class Receiver:
    url: str
    protocol: str  # the OTLP protocol it speaks: http/protobuf or grpc
    got: Received
    stop: Callable[[], None]


_PATHS = {"/v1/traces": "traces", "/v1/logs": "logs"}


def start_http(port: int = 0) -> Receiver:
    """An OTLP/HTTP (protobuf) receiver on loopback, on ``port`` or a free one."""
    got = Received()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            kind = _PATHS.get(self.path)
            if kind is None:
                self.send_error(404)
                return
            reply = got.add(kind, body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return Receiver(f"http://127.0.0.1:{server.server_address[1]}", "http/protobuf", got, stop)


_GRPC_SERVER = r"""
import base64, json, sys
from concurrent import futures

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

out = open(sys.argv[1], "a")


def keep(kind, request):
    out.write(json.dumps({"kind": kind, "data": base64.b64encode(request.SerializeToString()).decode()}) + "\n")
    out.flush()


class Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request, context):
        keep("traces", request)
        return trace_service_pb2.ExportTraceServiceResponse()


class Logs(logs_service_pb2_grpc.LogsServiceServicer):
    def Export(self, request, context):
        keep("logs", request)
        return logs_service_pb2.ExportLogsServiceResponse()


server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), server)
port = server.add_insecure_port("127.0.0.1:0")
server.start()
print(port, flush=True)
sys.stdin.read()  # until the test closes it
server.stop(0)
"""


def start_grpc(received_file: Path) -> Receiver:
    """An OTLP gRPC server on loopback, in a process of its own (gRPC's threads in the test
    process would be in the way of the runs that fork the agent there); it writes what it
    gets to ``received_file``, which the receiver reads at each look."""
    received_file.touch()
    proc = subprocess.Popen(
        [sys.executable, "-c", _GRPC_SERVER, str(received_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    port = int(proc.stdout.readline())
    got = Received()
    seen = [0]

    def poll() -> None:
        lines = received_file.read_text().splitlines()
        for line in lines[seen[0]:]:
            rec = json.loads(line)
            got.add(rec["kind"], base64.b64decode(rec["data"]))
        seen[0] = len(lines)

    got.poll = poll

    def stop() -> None:
        if proc.poll() is None:
            proc.stdin.close()  # type: ignore[union-attr]
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    return Receiver(f"http://127.0.0.1:{port}", "grpc", got, stop)


@pytest.fixture(params=["http/protobuf", "grpc"])
def otlp(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Receiver]:
    """A real OTLP receiver on loopback, once for each protocol."""
    receiver = start_http() if request.param == "http/protobuf" else start_grpc(tmp_path / "grpc-received.jsonl")
    yield receiver
    receiver.stop()


def free_port() -> int:
    """A loopback port nothing listens on (bound and released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(autouse=True)
def _no_ambient_otlp(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        monkeypatch.delenv(var, raising=False)
