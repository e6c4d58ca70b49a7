"""Benchmark: live OpenTelemetry export.

* runs: wall time of `spyglass run` (spyglass as a child process, the default
  backend) on a workload of about N events, in four modes: without export;
  with live export to an OTLP/HTTP (protobuf) receiver on loopback; with live
  export to an OTLP gRPC receiver on loopback (a server process of its own);
  with a stalled collector (a loopback port that accepts connections and never
  answers). Each repetition runs the four in another order (rotated, and
  reversed every other time); the medians and their ratios to the run without
  export are printed, with what each export sent and the load average.
* queue: the memory the export holds with a stalled collector: synthetic
  events fed to the export sink in this process; the recorder's buffer at its
  peak (bounded) and the worker process's peak RSS.
* worker: the worker's CPU per record on this machine, stage by stage (decode,
  mapping, encoding with the SDK's encoder and with spyglass.otel.logwire).

Usage: python benchmarks/bench_otel.py [--events 100000] [--repeat 3] [--quick] [--skip-run] [--backend strace]
       [--compare-with SRC]  (before/after: the exports of another source tree in the same run)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from spyglass.events import Event
from spyglass.otel.config import OtlpTarget
from spyglass.otel.sink import OtlpSink
from spyglass.pipeline import RunContext
from spyglass.store.meta import RunMeta

_GRPC_RECEIVER = r"""
import sys
from concurrent import futures
import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

class Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request, context):
        return trace_service_pb2.ExportTraceServiceResponse()

class Logs(logs_service_pb2_grpc.LogsServiceServicer):
    def Export(self, request, context):
        return logs_service_pb2.ExportLogsServiceResponse()

server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=[("grpc.max_receive_message_length", 1 << 28)])
trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), server)
port = server.add_insecure_port("127.0.0.1:0")
server.start()
print(port, flush=True)
sys.stdin.read()
server.stop(0)
"""


def _http_receiver() -> tuple[ThreadingHTTPServer, list[int]]:
    counts = [0, 0]  # requests, bytes

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            counts[0] += 1
            counts[1] += len(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, counts


def _grpc_receiver() -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-c", _GRPC_RECEIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def _stalled() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1024)  # the kernel completes the connections; nothing ever reads or answers
    return s


def _workload(events: int) -> list[str]:
    # each iteration opens and reads a file: one file.read event
    code = f"for i in range({events}):\n    with open('/etc/hostname', 'rb') as f: f.read()\n"
    return [sys.executable, "-c", code]


def _run(
    argv: list[str], store: Path, extra: list[str], env: dict[str, str], backend: str = "auto"
) -> tuple[float, dict[str, Any]]:
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "-q", "--backend", backend, *extra, "--", *argv],
        env={**env, "SPYGLASS_STORE": str(store)},
        cwd=store.parent,  # not a checkout: the package comes from the environment (or --compare-with)
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    latest = sorted((store / "runs").iterdir())[-1]
    meta = json.loads((latest / "run.json").read_text())
    # the CPU of spyglass, the agent and the export worker (all waited for): what the run cost the
    # machine, whatever else runs on it
    meta["_cpu"] = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, meta


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def bench_runs(events: int, repeat: int, backend: str, compare: str | None = None) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    http, counts = _http_receiver()
    grpc_proc, grpc_port = _grpc_receiver()
    stalled = _stalled()
    modes: dict[str, list[str]] = {
        "none": [],
        "http": ["--otlp", f"http://127.0.0.1:{http.server_address[1]}"],
        "grpc": ["--otlp", f"http://127.0.0.1:{grpc_port}", "--otlp-protocol", "grpc"],
        "stalled": ["--otlp", f"http://127.0.0.1:{stalled.getsockname()[1]}"],
    }
    envs = {m: env for m in modes}
    labels = {"http": "live export, OTLP/HTTP protobuf", "grpc": "live export, OTLP gRPC",
              "stalled": "live export, stalled collector"}
    if compare:  # the same exports by another checkout's code (e.g. `git archive main`), in the same run
        for m in ("http", "stalled"):
            modes[f"{m}@other"] = modes[m]
            envs[f"{m}@other"] = {**env, "PYTHONPATH": compare}
            labels[f"{m}@other"] = f"{labels[m]} ({compare}'s code)"
    names = list(modes)
    walls: dict[str, list[float]] = {m: [] for m in names}
    recs: dict[str, list[float]] = {m: [] for m in names}
    cpus: dict[str, list[float]] = {m: [] for m in names}
    metas: dict[str, dict[str, Any]] = {}
    argv = _workload(events)
    print(f"runs: {events} file reads, backend {backend}, {repeat} repetitions, {_load()} at the start")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = Path(tmp) / "s"
            _run([sys.executable, "-c", "pass"], store, [], env)  # warm caches
            for i in range(repeat):
                order = names[i % len(names):] + names[: i % len(names)]
                if i % 2:
                    order.reverse()
                for m in order:
                    wall, meta = _run(argv, store, modes[m], envs[m], backend)
                    walls[m].append(wall)
                    recs[m].append((meta["ended"] - meta["started"]) / 1e9)
                    cpus[m].append(meta["_cpu"])
                    metas[m] = meta
                print(f"  repetition {i + 1} ({' '.join(order)}): "
                      + ", ".join(f"{m} {walls[m][-1]:.2f} s" for m in names) + f"; {_load()}")
    finally:
        http.shutdown()
        stalled.close()
        assert grpc_proc.stdin is not None
        grpc_proc.stdin.close()
        grpc_proc.wait(10)
    base = statistics.median(walls["none"])
    base_rec = statistics.median(recs["none"])
    base_cpu = statistics.median(cpus["none"])
    n_events = metas["none"]["counts"]["events"]
    print(
        f"without export ({metas['none'].get('backend')} backend): {n_events} events, wall {base:.2f} s "
        f"(recording {base_rec:.2f} s), CPU {base_cpu:.2f} s, median of {repeat}"
    )
    for m in names[1:]:
        w, r, c = statistics.median(walls[m]), statistics.median(recs[m]), statistics.median(cpus[m])
        pairs = [b / a for a, b in zip(walls["none"], walls[m], strict=True)]
        otlp = metas[m]["extra"].get("otlp", {})
        logs, spans = otlp.get("logs", {}), otlp.get("spans", {})
        print(
            f"{labels[m]}: wall {w:.2f} s (ratio {w / base:.3f}; per repetition "
            + " ".join(f"{p:.2f}" for p in pairs)
            + f"), recording {r:.2f} s (ratio {r / base_rec:.3f}), CPU {c:.2f} s (+{c - base_cpu:.2f} s); "
            f"log records sent {logs.get('sent')}, "
            f"not sent {logs.get('unsent')}; spans sent {spans.get('sent')}"
            + (f"; {otlp.get('error')}" if otlp.get("error") else "")
        )
    print(f"  (OTLP/HTTP receiver got {counts[0]} requests, {counts[1] / 1e6:.1f} MB in all)")


def _synthetic(i: int) -> Event:
    return Event(
        seq=i,
        ts=time.time_ns(),
        type="file.read",
        pid=1000 + i % 50,
        path=f"/home/user/project/src/module_{i % 500}.py",
        syscall="openat",
        flags="O_RDONLY|O_CLOEXEC",
    )


def _vm(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def bench_queue(events: int, bound: int) -> None:
    stalled = _stalled()
    url = f"http://127.0.0.1:{stalled.getsockname()[1]}"
    meta = RunMeta(id="bench-stalled", host="bench", started=time.time_ns())
    ctx = RunContext(run_id=meta.id, run=meta)
    sink = OtlpSink(OtlpTarget(url), max_buffer_bytes=bound, quiet=True)
    sink.start(ctx)
    assert sink.proc is not None
    worker = sink.proc.pid
    evs = [_synthetic(i) for i in range(1, events + 1)]
    peak_buf = 0
    t0 = time.perf_counter()
    for i, ev in enumerate(evs, 1):
        sink.event(ev)
        if i % 1000 == 0:
            peak_buf = max(peak_buf, len(sink.buf))
    t_feed = time.perf_counter() - t0
    hwm = _vm(worker, "VmHWM")
    t0 = time.perf_counter()
    sink.done(ctx)
    t_done = time.perf_counter() - t0
    stalled.close()
    res = sink.result or {}
    logs = res.get("logs", {})
    print(
        f"queue with a stalled collector, {events} events fed: the recorder's buffer peaked at "
        f"{peak_buf / 2**20:.1f} MiB (bound {bound / 2**20:.0f} MiB) + the 1 MiB pipe; the worker's peak RSS "
        f"{hwm / 2**20:.0f} MiB; recorder-side cost {t_feed / events * 1e6:.2f} us/event; end-of-run wait "
        f"{t_done:.2f} s; not sent {logs.get('unsent')} of {logs.get('emitted')} log records "
        f"({sink.dropped['logs']} dropped by the full buffer); {_load()}"
    )


def bench_worker(events: int) -> None:
    """The worker's CPU per record, stage by stage, on synthetic events like the workload's
    (process CPU time, so that other work on the machine does not count)."""
    import msgspec
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

    from spyglass.otel.emit import Emitter
    from spyglass.otel.logwire import LogWire
    from spyglass.otel.mapping import SpanBuilder, event_log, trace_id_for

    lines = [msgspec.json.encode(_synthetic(i)) for i in range(1, events + 1)]
    dec = msgspec.json.Decoder(Event)
    # the worker holds one batch at a time; here every stage's output is held, so the cyclic
    # collector (which would walk all of it again and again) is off while the stages are timed
    gc.collect()
    gc.disable()
    t = [time.process_time()]
    evs = [dec.decode(line) for line in lines]
    t.append(time.process_time())
    b = SpanBuilder("r1")
    recs = [event_log(ev, b.feed(ev)) for ev in evs]
    t.append(time.process_time())
    em = Emitter(OtlpTarget("http://127.0.0.1:9"), {"service.name": "spyglass"}, trace_id_for("r1"))
    wire = LogWire(em.resource, em._readable(recs[0]).instrumentation_scope, trace_id_for("r1"))
    for i in range(0, len(recs), 2048):
        wire.request(recs[i:i + 2048])
    t.append(time.process_time())
    readable = [em._readable(r) for r in recs]
    t.append(time.process_time())
    requests = [encode_logs(readable[i:i + 2048]) for i in range(0, len(readable), 2048)]
    for req in requests:
        req.SerializeToString()
    t.append(time.process_time())
    for req in requests:  # what --otlp-file writes: OTLP/JSON from the request
        json.dumps(MessageToDict(req, use_integers_for_enums=True), separators=(",", ":"))
    t.append(time.process_time())
    gc.enable()
    us = [(t[i + 1] - t[i]) / events * 1e6 for i in range(len(t) - 1)]
    print(
        f"worker CPU per record ({events} records): decode {us[0]:.1f} us, mapping {us[1]:.1f} us, "
        f"protobuf encoding {us[2]:.1f} us (spyglass.otel.logwire) against {us[3] + us[4]:.1f} us with the "
        f"SDK's records and encoder ({us[3]:.1f} + {us[4]:.1f}); OTLP/JSON from the SDK's message "
        f"{us[5]:.1f} us more; {_load()}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="20k events, one repetition (a smoke run)")
    ap.add_argument("--buffer", type=int, default=16 << 20, help="the recorder's buffer bound in bytes")
    ap.add_argument("--skip-run", action="store_true", help="only the queue and worker figures")
    ap.add_argument("--backend", default="auto", help="the capture backend of the runs (auto, ebpf, strace)")
    ap.add_argument("--compare-with", metavar="SRC", help="also run the HTTP and stalled exports with the spyglass "
                    "package from SRC (a source tree, e.g. `git archive main | tar -x -C SRC`)")
    args = ap.parse_args()
    events, repeat = (20_000, 1) if args.quick else (args.events, args.repeat)
    bench_worker(min(events, 50_000))
    if not args.skip_run:
        bench_runs(events, repeat, args.backend, args.compare_with)
    bench_queue(events, args.buffer)


if __name__ == "__main__":
    main()
