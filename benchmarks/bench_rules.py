"""Rule-evaluation throughput: replay a large synthetic run through the full pack.

Prints events/s for (a) JSON decode + pipeline + rule engine (replay + evaluation)
and (b) the rule engine alone on decoded events.  Usage:
    .venv/bin/python benchmarks/bench_rules.py [N_EVENTS]
"""

from __future__ import annotations

import random
import sys
import time

from spyglass.events import Event
from spyglass.events.codec import decode_event, encode
from spyglass.pipeline import Pipeline, RunContext
from spyglass.rules.engine import RuleEngine
from spyglass.rules.ruleset import load_ruleset

HOME, WS = "/home/dev", "/home/dev/project"


def synthetic(n: int, seed: int = 7) -> list[Event]:
    """A realistic mix: mostly library/file reads, some writes, execs, connects."""
    rnd = random.Random(seed)
    out: list[Event] = [Event(type="process.start", pid=100, ts=1),
                        Event(type="process.exec", pid=100, ts=2, exe="/usr/bin/python3",
                              argv=["python3", "agent.py"], cwd=WS)]
    pids = [100]
    libs = [f"/usr/lib/python3.11/{m}.py" for m in ("os", "re", "json", "typing", "ast", "enum", "socket")]
    ts = 3
    while len(out) < n:
        ts += rnd.randint(1000, 50000)
        pid = rnd.choice(pids)
        k = rnd.random()
        if k < 0.55:
            out.append(Event(type="file.read", pid=pid, ts=ts, path=rnd.choice(libs), flags="O_RDONLY|O_CLOEXEC"))
        elif k < 0.70:
            out.append(Event(type="file.read", pid=pid, ts=ts, path=f"{WS}/src/m{rnd.randint(0, 300)}.py",
                             flags="O_RDONLY"))
        elif k < 0.82:
            out.append(Event(type="file.create", pid=pid, ts=ts, path=f"{WS}/build/o{rnd.randint(0, 900)}.o",
                             flags="O_WRONLY|O_CREAT|O_TRUNC", mode="0666"))
        elif k < 0.86:
            out.append(Event(type="file.write", pid=pid, ts=ts, path=f"/tmp/t{rnd.randint(0, 99)}",
                             flags="O_WRONLY"))
        elif k < 0.89:
            out.append(Event(type="file.delete", pid=pid, ts=ts, path=f"{WS}/build/o{rnd.randint(0, 900)}.o"))
        elif k < 0.92:
            child = max(pids) + 1
            pids.append(child)
            if len(pids) > 200:
                pids.pop(1)
            out.append(Event(type="process.start", pid=child, ppid=pid, ts=ts))
            cmd = rnd.choice([["git", "status"], ["python3", "-m", "pytest", "-q"], ["ls", "-la"], ["gcc", "-c", "x.c"]])
            out.append(Event(type="process.exec", pid=child, ts=ts + 1, exe="/usr/bin/" + cmd[0], argv=cmd, cwd=WS))
        elif k < 0.95:
            out.append(Event(type="net.connect", pid=pid, ts=ts, address="140.82.112.3", port=443, domain="github.com",
                             transport="tcp", net_type="ipv4"))
        elif k < 0.97:
            out.append(Event(type="file.mkdir", pid=pid, ts=ts, path=f"{WS}/build/d{rnd.randint(0, 50)}", mode="0777"))
        else:
            out.append(Event(type="file.rename", pid=pid, ts=ts, path=f"{WS}/a.tmp", target=f"{WS}/a.txt"))
    for i, e in enumerate(out, 1):
        e.seq = i
    return out[:n]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500_000
    events = synthetic(n)
    lines = [encode(e) for e in events]
    rs = load_ruleset()
    print(f"{len(rs.enabled)} rules, {n} events")

    def run(decode: bool) -> float:
        ctx = RunContext(root_cwd=WS, workspace=[WS])
        engine = RuleEngine(rs, home=HOME)
        pipe = Pipeline([engine], ctx)
        pipe.start()
        t0 = time.perf_counter()
        if decode:
            for line in lines:
                pipe.feed(decode_event(line), renumber=False)
        else:
            for e in events:
                pipe.feed(e, renumber=False)
        dt = time.perf_counter() - t0
        print(f"  alerts: {len(engine.alerts)}")
        return dt

    dt = run(True)
    print(f"replay (decode + pipeline + rules): {n / dt:,.0f} events/s")
    dt = run(False)
    print(f"pipeline + rules on decoded events: {n / dt:,.0f} events/s")
    ctx = RunContext(root_cwd=WS, workspace=[WS])
    pipe = Pipeline([], ctx)
    t0 = time.perf_counter()
    for line in lines:
        pipe.feed(decode_event(line), renumber=False)
    dt = time.perf_counter() - t0
    print(f"decode + pipeline, no rules (floor): {n / dt:,.0f} events/s")


if __name__ == "__main__":
    main()
