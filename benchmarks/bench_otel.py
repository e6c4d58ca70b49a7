"""Benchmark: live OpenTelemetry export.

* run: wall time of `spyglass run` on a workload of about N events (real
  processes under strace), without export and with live export to an OTLP
  HTTP/protobuf receiver on loopback (in this process; spyglass runs as a
  child); prints both and the ratio.
* stalled: memory the export holds when the collector accepts connections and
  never answers: synthetic events fed to the export sink in this process; the
  recorder's buffer at its peak (bounded) and the worker process's peak RSS.

Usage: python benchmarks/bench_otel.py [--events 100000] [--buffer 16777216] [--skip-run]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
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


def _receiver() -> tuple[ThreadingHTTPServer, list[int]]:
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


def _workload(events: int) -> list[str]:
    # each loop: open+read of a file (file.read) and a stat; about 1 event per iteration
    n = events
    code = (
        "import os\n"
        f"for i in range({n}):\n"
        "    with open('/etc/hostname', 'rb') as f: f.read()\n"
    )
    return [sys.executable, "-c", code]


def _run(argv: list[str], store: Path, extra: list[str], env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "-q", *extra, "--", *argv],
        env={**env, "SPYGLASS_STORE": str(store)},
        check=True,
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - t0
    latest = sorted((store / "runs").iterdir())[-1]
    meta = json.loads((latest / "run.json").read_text())
    return wall, meta


def bench_run(events: int) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    server, counts = _receiver()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    argv = _workload(events)
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "s"
        _run([sys.executable, "-c", "pass"], store, [], env)  # warm caches
        base, meta0 = _run(argv, store, [], env)
        live, meta1 = _run(argv, store, ["--otlp", url], env)
    server.shutdown()
    otlp = meta1["extra"].get("otlp", {})
    rec0 = (meta0["ended"] - meta0["started"]) / 1e9
    rec1 = (meta1["ended"] - meta1["started"]) / 1e9
    print(f"run: {meta0['counts']['events']} events without export: wall {base:.2f} s (recording {rec0:.2f} s)")
    print(
        f"run: {meta1['counts']['events']} events with live OTLP/HTTP export: wall {live:.2f} s "
        f"(recording {rec1:.2f} s); wall ratio {live / base:.2f}, recording ratio {rec1 / rec0:.2f}; "
        f"sent {otlp.get('logs', {}).get('sent')} log records and {otlp.get('spans', {}).get('sent')} spans "
        f"in {counts[0]} requests ({counts[1] / 1e6:.1f} MB)"
    )


def _synthetic(i: int) -> Event:
    return Event(
        seq=i,
        ts=time.time_ns(),
        type="file.read",
        pid=1000 + i % 50,
        path=f"/home/user/project/src/module_{i % 500}.py",
        syscall="openat",
    )


def _vm(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def bench_stalled(events: int, bound: int) -> None:
    stalled = socket.socket()
    stalled.bind(("127.0.0.1", 0))
    stalled.listen(1024)  # accepts connections, never reads or answers
    url = f"http://127.0.0.1:{stalled.getsockname()[1]}"
    meta = RunMeta(id="bench-stalled", host="bench", started=time.time_ns())
    ctx = RunContext(run_id=meta.id, run=meta)
    sink = OtlpSink(OtlpTarget(url, timeout=2.0), max_buffer_bytes=bound, flush_timeout=2.0, quiet=True)
    sink.start(ctx)
    assert sink.proc is not None
    worker = sink.proc.pid
    peak_buf = 0
    t0 = time.perf_counter()
    for i in range(1, events + 1):
        sink.event(_synthetic(i))
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
        f"stalled collector, {events} events: recorder's buffer peak {peak_buf / 1e6:.1f} MB (bound "
        f"{bound / 1e6:.0f} MB) + pipe 1 MB; worker peak RSS {hwm / 1e6:.0f} MB; recorder-side cost "
        f"{t_feed / events * 1e6:.1f} us/event; end-of-run wait {t_done:.1f} s; "
        f"not sent {logs.get('unsent')} of {logs.get('emitted')} log records"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--buffer", type=int, default=16 << 20, help="the recorder's buffer bound in bytes")
    ap.add_argument("--skip-run", action="store_true", help="only the stalled-collector memory figure")
    args = ap.parse_args()
    if not args.skip_run:
        bench_run(args.events)
    bench_stalled(args.events, args.buffer)


if __name__ == "__main__":
    main()
