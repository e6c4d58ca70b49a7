"""Benchmark: the model stub and agent awareness.

* stub: requests per second over loopback, for chat completions and streamed
  responses, with request bodies the size real agents send (codex resends
  its instructions and the whole history every turn: tens of KB);
* awareness: events per second through the Linker (the live sink's core) on a
  synthetic codex-shaped stream with many tool calls, with and without a log;
* agent logs: parse time of a large codex rollout.

Usage: python benchmarks/bench_agents.py [--requests 300] [--events 200000] [--calls 200]
"""

from __future__ import annotations

import argparse
import http.client
import json
import time
from typing import Any

from spyglass.agents.agent_logs import parse_agent_log
from spyglass.agents.awareness import Linker
from spyglass.agents.model_stub import start_stub
from spyglass.agents.script import parse_script
from spyglass.events import Event

NATIVE = "/x/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"


def bench_stub(n: int) -> None:
    steps = [{"say": f"step {i}", "run": f"echo {i}"} for i in range(50)]
    stub = start_stub(parse_script({"steps": steps}))
    filler = "x" * 20_000  # instructions resent with every request
    history: list[dict[str, Any]] = [
        {"role": "system", "content": filler},
        {"role": "user", "content": "task"},
    ]
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": filler}]}
    ]
    for i in range(20):
        history += [{"role": "assistant", "content": f"a{i}"}, {"role": "tool", "content": "out" * 100}]
        items += [
            {"type": "function_call", "call_id": f"c{i}", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{i}", "output": "out" * 100},
        ]
    bodies = {
        "chat": json.dumps({"messages": history, "tools": [{"type": "function", "function": {"name": "bash"}}]}),
        "responses (SSE)": json.dumps(
            {"input": items, "stream": True, "tools": [{"type": "function", "name": "exec_command"}]}
        ),
    }
    paths = {"chat": "/v1/chat/completions", "responses (SSE)": "/v1/responses"}
    try:
        for name, body in bodies.items():
            conn = http.client.HTTPConnection("127.0.0.1", stub.port, timeout=10)
            t0 = time.perf_counter()
            for _ in range(n):
                conn.request("POST", paths[name], body=body, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                resp.read()
                assert resp.status == 200
            dt = time.perf_counter() - t0
            conn.close()
            print(f"stub {name:16} {n / dt:8.0f} requests/s  ({len(body) / 1024:.0f} KiB bodies, keep-alive)")
    finally:
        stub.close()


def codex_stream(calls: int, events: int) -> tuple[list[Event], str]:
    out: list[Event] = []

    def add(**kw: Any) -> None:
        out.append(Event(seq=len(out) + 1, **kw))

    add(type="process.start", pid=100)
    add(type="process.exec", pid=100, exe="/usr/bin/node", argv=["node", "/x/bin/codex", "exec"])
    add(type="process.start", pid=101, ppid=100)
    add(type="process.exec", pid=101, exe=NATIVE, argv=[NATIVE, "exec"])
    per_call = max(1, events // calls)
    log = []
    for i in range(calls):
        root = 1000 + 10 * i
        cmd = f"python3 step_{i}.py --flag {i}"
        log.append(
            {
                "type": "response_item",
                "payload": {
                    "type": "function_call",
                    "name": "exec_command",
                    "call_id": f"c{i}",
                    "arguments": json.dumps({"cmd": cmd}),
                },
            }
        )
        log.append({"type": "response_item", "payload": {"type": "function_call_output", "call_id": f"c{i}"}})
        add(type="process.start", pid=root, ppid=101)
        add(
            type="process.exec",
            pid=root,
            exe="/proc/1/exe",
            argv=["/proc/self/exe", "--codex-run-as-process-setup"],
        )
        add(type="process.exec", pid=root, exe="/usr/bin/bash", argv=["/bin/bash", "-lc", cmd])
        add(type="process.start", pid=root + 1, ppid=root)
        add(type="process.exec", pid=root + 1, exe="/usr/bin/python3", argv=["python3", f"step_{i}.py"])
        for j in range(per_call):
            add(type="file.read", pid=root + 1, path=f"/usr/lib/python3/m{j % 500}.py")
        add(type="process.exit", pid=root + 1, exit_code=0)
        add(type="process.exit", pid=root, exit_code=0)
    return out, "".join(json.dumps(x) + "\n" for x in log)


def bench_awareness(events: int, calls: int) -> None:
    stream, log_text = codex_stream(calls, events)
    t0 = time.perf_counter()
    log = parse_agent_log(log_text)
    dt_log = time.perf_counter() - t0
    kib = len(log_text) / 1024
    print(f"agent log parse   {kib:8.0f} KiB rollout, {len(log.tool_calls)} calls in {dt_log * 1000:.1f} ms")
    for label, calls_arg in (("without log", []), ("with log", log.tool_calls)):
        linker = Linker(calls_arg, log_complete=bool(calls_arg))
        t0 = time.perf_counter()
        for ev in stream:
            linker.feed(ev)
        view = linker.view()
        dt = time.perf_counter() - t0
        assert len(view.links) == calls
        rate = len(stream) / dt
        print(f"awareness {label:12} {rate:10.0f} events/s  ({len(stream)} events, {calls} tool calls)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    bench_stub(args.requests)
    bench_awareness(args.events, args.calls)


if __name__ == "__main__":
    main()
