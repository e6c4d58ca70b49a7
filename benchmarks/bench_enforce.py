"""Benchmark: enforcement latency, from the offending act to the sandboxed tree being dead.

Each trial is a real sandboxed run under the strace backend (bubblewrap, PID
namespace, egress proxy).  The agent starts two background ``sleep`` children,
notes the time (CLOCK_REALTIME, in a file) and immediately does the offending
thing; a kill rule in the pipeline stops the agent:

* ``syscall``: ``open("/etc/...", O_WRONLY|O_CREAT)`` fails with EROFS, the
  sandbox.denied event it implies fires the rule;
* ``proxy``: an HTTP POST carrying the run's canary through the egress proxy
  (to a loopback server); the proxy.request event fires the rule.

Measured per trial (ms):

* ``detect``: the offending act -> the rule sees the event (capture, parsing,
  the pipeline's thread hand-off);
* ``kill``: the rule's stop_agent -> the PID namespace's init has exited
  (the kernel has killed and reaped every process of the namespace first,
  so this is the whole tree being dead; watched with a pidfd);
* ``total``: the offending act -> the tree is dead.

Usage: python benchmarks/bench_enforce.py [--trials 50] [--scenario syscall|proxy|both]
Needs bwrap and strace.  Prints p50/p90/p99/max per scenario.
"""

from __future__ import annotations

import argparse
import http.server
import os
import select
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from spyglass.capture import get_backend
from spyglass.events import Alert, Event
from spyglass.sandbox import prepare
from spyglass.sandbox.proxy import static_resolver
from spyglass.session.record import RunRequest, record
from spyglass.store import Store

AGENT = r"""
import os, sys, time, urllib.request
scenario, canary_file = sys.argv[1], sys.argv[2]
body = None
if scenario == "proxy":
    body = open(canary_file).read().encode()
with open("t0", "w") as f:
    f.write(str(time.time_ns()))
if scenario == "syscall":
    try:
        os.open("/etc/spyglass-bench-probe", os.O_WRONLY | os.O_CREAT)
    except OSError:
        pass
else:
    try:
        urllib.request.urlopen(urllib.request.Request("http://sink.test/", data=body), timeout=30)
    except Exception:
        pass
time.sleep(30)
"""


class _Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


class KillRule:
    """Stops the agent on the first matching event and times the tree's death."""

    name = "bench-kill"

    def __init__(self, scenario: str, sandbox: Any) -> None:
        self.scenario = scenario
        self.sandbox = sandbox
        self.ctx: Any = None
        self.seen_ns: int | None = None
        self.kill_ns: int | None = None
        self.dead_ns: int | None = None
        self._watch: threading.Thread | None = None

    def start(self, ctx: Any) -> None:
        self.ctx = ctx

    def event(self, ev: Event) -> None:
        if self.seen_ns is not None:
            return
        hit = (self.scenario == "syscall" and ev.type == "sandbox.denied" and ev.reason == "read-only") or (
            self.scenario == "proxy" and ev.type == "proxy.request" and ev.detail == "canary"
        )
        if not hit:
            return
        self.seen_ns = time.time_ns()
        pid = self.sandbox.ns_init_pid()
        fd = os.pidfd_open(pid) if pid else None
        self.ctx.raise_alert(Alert(rule_id="bench-kill", title="bench", level="critical", action="kill", pid=ev.pid))
        self.kill_ns = time.time_ns()
        self.ctx.stop_agent("bench-kill")
        if fd is not None:
            self._watch = threading.Thread(target=self._wait_dead, args=(fd,), daemon=True)
            self._watch.start()

    def _wait_dead(self, fd: int) -> None:
        select.select([fd], [], [], 30)
        self.dead_ns = time.time_ns()
        os.close(fd)

    def join(self) -> None:
        if self._watch is not None:
            self._watch.join(30)


def trial(root: Path, scenario: str, sink_port: int) -> dict[str, float] | None:
    ws, home = root / "ws", root / "home"
    ws.mkdir(parents=True)
    home.mkdir()
    (ws / "agent.py").write_text(AGENT)
    sb = prepare(
        root / "work",
        [str(ws)],
        cwd=str(ws),
        real_home=str(home),
        allow=["sink.test", "127.0.0.0/8"],
        allow_host_loopback=True,
        resolver=static_resolver({"sink.test:80": ("127.0.0.1", sink_port)}),
        mode="enforce",
        guards=False,
        check=False,
    )
    rule = KillRule(scenario, sb)
    canary_file = ws / "payload.txt"
    canary_file.write_text("k=" + sb.canary)
    request = RunRequest(
        argv=["/bin/sh", "-c", f"sleep 60 & sleep 60 & exec python3 agent.py {scenario} payload.txt"],
        cwd=str(ws),
        workspace=[str(ws)],
        mode="enforce",
        sandbox=True,
        extra=sb.run_extra(),
    )
    try:
        record(request, sb.backend(get_backend("strace")), Store(root / "store", create=True), [rule])
    finally:
        sb.close()
    rule.join()
    if not (ws / "t0").exists() or rule.seen_ns is None or rule.dead_ns is None or rule.kill_ns is None:
        return None
    t0 = int((ws / "t0").read_text())
    return {
        "detect": (rule.seen_ns - t0) / 1e6,
        "kill": (rule.dead_ns - rule.kill_ns) / 1e6,
        "total": (rule.dead_ns - t0) / 1e6,
    }


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--scenario", choices=["syscall", "proxy", "both"], default="both")
    args = ap.parse_args()
    if shutil.which("bwrap") is None or shutil.which("strace") is None:
        sys.exit("bench_enforce: needs bwrap and strace")
    from spyglass.sandbox.doctor import preflight

    preflight()
    sink = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    scenarios = ["syscall", "proxy"] if args.scenario == "both" else [args.scenario]
    print(f"enforcement latency, {args.trials} trials per scenario, {os.cpu_count()} CPUs (ms)")
    print(f"{'scenario':10} {'measure':8} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8} {'mean':>8}")
    for scenario in scenarios:
        results: list[dict[str, float]] = []
        failed = 0
        for _ in range(args.trials):
            root = Path(tempfile.mkdtemp(prefix="sg-bench-"))
            try:
                r = trial(root, scenario, sink.server_address[1])
            finally:
                shutil.rmtree(root, ignore_errors=True)
            if r is None:
                failed += 1
            else:
                results.append(r)
        for measure in ("detect", "kill", "total"):
            vals = [r[measure] for r in results]
            if not vals:
                continue
            print(
                f"{scenario:10} {measure:8} {pct(vals, 50):8.2f} {pct(vals, 90):8.2f} {pct(vals, 99):8.2f} "
                f"{max(vals):8.2f} {statistics.fmean(vals):8.2f}"
            )
        if failed:
            print(f"{scenario:10} ({failed} trials without a measurement)")
    sink.shutdown()


if __name__ == "__main__":
    main()
