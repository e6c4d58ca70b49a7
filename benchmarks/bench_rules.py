"""Rule-evaluation throughput: replay a large synthetic run through the full pack.

Prints events/s for
  (a) JSON decode + pipeline + rule engine (what `spyglass check` does per event),
  (b) pipeline + rule engine on already decoded events,
  (c) the same with the per-path memo off (every event runs its type's function),
  (d) the floors: decode + pipeline with no rules, and decode alone,
and the cost of one exec event whose command line is 40 KB of a repeated word
that the pack's patterns look for (a long command line must cost one pass over
it, not one per occurrence).  Usage:

    .venv/bin/python benchmarks/bench_rules.py [N_EVENTS] [--no-long]
"""

from __future__ import annotations

import random
import sys
import time
from typing import Any

from spyglass.events import Event
from spyglass.events.codec import decode_event, encode
from spyglass.pipeline import Pipeline, RunContext
from spyglass.rules.engine import RuleEngine
from spyglass.rules.ruleset import load_ruleset

HOME, WS = "/home/dev", "/home/dev/project"
WORDS = (
    "socket ",
    "connect ",
    "curl a ",
    "nc x ",
    "pty.spawn( ",
    "perl socket ",
    "base64 ",
    "pip ",
    "mkfifo ",
    "socat ",
    "sh <&3 /dev/tcp/ ",
    "git config ",
)


def synthetic(n: int, seed: int = 7) -> list[Event]:
    """A realistic mix: mostly library/file reads, some writes, execs, connects."""
    rnd = random.Random(seed)
    out: list[Event] = [
        Event(type="process.start", pid=100, ts=1),
        Event(type="process.exec", pid=100, ts=2, exe="/usr/bin/python3", argv=["python3", "agent.py"], cwd=WS),
    ]
    pids = [100]
    libs = [f"/usr/lib/python3.11/{m}.py" for m in ("os", "re", "json", "typing", "ast", "enum", "socket")]
    cmds = [["git", "status"], ["python3", "-m", "pytest", "-q"], ["ls", "-la"], ["gcc", "-c", "x.c"]]
    ts = 3
    while len(out) < n:
        ts += rnd.randint(1000, 50000)
        pid = rnd.choice(pids)
        k = rnd.random()
        if k < 0.55:
            out.append(Event(type="file.read", pid=pid, ts=ts, path=rnd.choice(libs), flags="O_RDONLY|O_CLOEXEC"))
        elif k < 0.70:
            out.append(
                Event(type="file.read", pid=pid, ts=ts, path=f"{WS}/src/m{rnd.randint(0, 300)}.py", flags="O_RDONLY")
            )
        elif k < 0.82:
            out.append(
                Event(
                    type="file.create",
                    pid=pid,
                    ts=ts,
                    path=f"{WS}/build/o{rnd.randint(0, 900)}.o",
                    flags="O_WRONLY|O_CREAT|O_TRUNC",
                    mode="0666",
                )
            )
        elif k < 0.86:
            out.append(Event(type="file.write", pid=pid, ts=ts, path=f"/tmp/t{rnd.randint(0, 99)}", flags="O_WRONLY"))
        elif k < 0.89:
            out.append(Event(type="file.delete", pid=pid, ts=ts, path=f"{WS}/build/o{rnd.randint(0, 900)}.o"))
        elif k < 0.92:
            child = max(pids) + 1
            pids.append(child)
            if len(pids) > 200:
                pids.pop(1)
            out.append(Event(type="process.start", pid=child, ppid=pid, ts=ts))
            cmd = rnd.choice(cmds)
            out.append(Event(type="process.exec", pid=child, ts=ts + 1, exe="/usr/bin/" + cmd[0], argv=cmd, cwd=WS))
        elif k < 0.95:
            out.append(
                Event(
                    type="net.connect",
                    pid=pid,
                    ts=ts,
                    address="140.82.112.3",
                    port=443,
                    domain="github.com",
                    transport="tcp",
                    net_type="ipv4",
                )
            )
        elif k < 0.97:
            out.append(Event(type="file.mkdir", pid=pid, ts=ts, path=f"{WS}/build/d{rnd.randint(0, 50)}", mode="0777"))
        else:
            out.append(Event(type="file.rename", pid=pid, ts=ts, path=f"{WS}/a.tmp", target=f"{WS}/a.txt"))
    for i, e in enumerate(out, 1):
        e.seq = i
    return out[:n]


def _engine(rs: Any, **kw: Any) -> RuleEngine:
    try:
        return RuleEngine(rs, home=HOME, **kw)
    except TypeError:  # an engine without that option
        return RuleEngine(rs, home=HOME)


def _rate(label: str, n: int, dt: float) -> None:
    print(f"{label:<48} {n / dt:>12,.0f} events/s  ({dt / n * 1e6:.2f} us/event)")


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 500_000
    events = synthetic(n)
    lines = [encode(e) for e in events]
    rs = load_ruleset()
    print(f"{len(rs.enabled)} rules, {n} events")

    def run(decode: bool, **kw: Any) -> float:
        ctx = RunContext(root_cwd=WS, workspace=[WS])
        engine = _engine(rs, **kw)
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
        print(f"  ({len(engine.alerts)} alerts)")
        return dt

    _rate("replay (decode + pipeline + rules)", n, run(True))
    _rate("pipeline + rules on decoded events", n, run(False))
    _rate("pipeline + rules, per-path memo off", n, run(False, per_path=False))
    pipe = Pipeline([], RunContext(root_cwd=WS, workspace=[WS]))
    t0 = time.perf_counter()
    for line in lines:
        pipe.feed(decode_event(line), renumber=False)
    _rate("decode + pipeline, no rules (floor)", n, time.perf_counter() - t0)
    t0 = time.perf_counter()
    for line in lines:
        decode_event(line)
    _rate("decode alone", n, time.perf_counter() - t0)

    if "--no-long" in sys.argv:
        return
    worst = (0.0, "")
    for word in WORDS:
        text = word * (40_000 // len(word))
        ctx = RunContext(root_cwd=WS, workspace=[WS])
        pipe = Pipeline([_engine(rs)], ctx)
        pipe.start()
        pipe.feed(Event(type="process.start", pid=1, ts=1))
        t0 = time.perf_counter()
        pipe.feed(Event(type="process.exec", pid=1, ts=2, exe="/usr/bin/git", argv=["git", "config", text]))
        dt = time.perf_counter() - t0
        worst = max(worst, (dt, word.strip()))
    print(f"{'exec with a 40 KB command line (worst word)':<48} {worst[0] * 1000:>12.1f} ms  ({worst[1]!r})")


if __name__ == "__main__":
    main()
