"""Benchmark: end-to-end replay of a large synthetic run, and ``spyglass check`` of it.

Generates a synthetic run of N events (default 10,000,000; ``--events`` to
shrink) through the store's own writer: processes that start, exec, load
libraries, read and write workspace files, make temp files, resolve and
connect.  Then, each phase in a child process of its own (so its peak RSS is
its own), measures:

* write: the store writer alone (``RunWriter.event``), events/s and bytes per
  event on disk (``events.jsonl`` / events);
* replay: the stored run replayed end to end as a new run, through the same
  code as ``spyglass run`` (``session.record`` with the replay backend): the
  store writer, agent awareness and the rule engine with the built-in pack and
  default policy;
* check: ``spyglass check`` of the generated run (the real CLI, start-up
  included);
* verify: ``spyglass verify`` of it;
* rules: the rule engine alone on up to 200k of the events in memory (CPU
  time, best of three);
* floor: what compiled code alone costs per event on this machine: the
  stored lines decoded a run at a time (msgspec, C), encoded again (msgspec)
  and block-sealed (hashlib, zlib) with no Python per event beyond the loop:
  the ceiling a compiled decode-pipeline-writer path could approach, against
  which the Python pipeline's rate is a ratio.

With ``--live``, a live run under ``spyglass run --backend strace`` of a
shell loop (cat, ls, find: about 20k events) gives the bytes per event on disk
of real events.

Each line gives events/s, peak RSS and the issue's target (replay and check:
>= 500k events/s, <= 150 MB).  ``--profile`` writes a cProfile of the replay
phase.  ``--baseline DIR`` (a source tree of another version, e.g. an export of
main) replays and checks the same stored run with that tree's package too,
alternating with this one, and prints the ratios.  Usage:

    python benchmarks/bench_pipeline.py [--events 10000000 | --quick] [--store DIR] [--profile FILE] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
from synth import EventStamper

from spyglass.events import Event
from spyglass.store import RunMeta, RunWriter, Store, new_run_id

TARGET_RATE = 500_000
TARGET_RSS_MB = 150

LIBS = ["/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libz.so.1"]
STDLIB = [f"/usr/lib/python3.11/{m}.py" for m in ("os", "re", "json/__init__", "subprocess", "pathlib", "typing")]


def synthetic_events(n: int, ws: str, seed: int = 7) -> Iterator[Event]:
    """n events of one long agent run: a root process starting one short command after another."""
    rng = random.Random(seed)
    files = [f"{ws}/src/pkg{rng.randrange(40)}/m{rng.randrange(10_000)}.py" for _ in range(2000)]
    outputs = [f"{ws}/out/r{i}.json" for i in range(50)]
    commands = [
        ("/usr/bin/python3.11", ["python3", f"{ws}/tool.py", "--step", "1"]),
        ("/usr/bin/git", ["git", "status", "--porcelain"]),
        ("/usr/bin/grep", ["grep", "-rn", "TODO", f"{ws}/src"]),
        ("/usr/bin/ls", ["ls", "-la", ws]),
    ]
    hosts = [("pypi.org", "127.0.0.5", 443), ("github.com", "127.0.0.6", 443)]
    root = 4000

    ev = EventStamper(rng, 1_700_000_000_000_000_000, (1000, 50_000))

    yield ev(type="process.start", pid=root, cwd=ws)
    yield ev(type="process.exec", pid=root, exe="/usr/bin/bash", argv=["bash", f"{ws}/agent.sh"], cwd=ws)
    pid = root
    while ev.seq < n - 1:
        pid += 1
        exe, argv = commands[rng.randrange(len(commands))]
        yield ev(type="process.start", pid=pid, ppid=root)
        yield ev(type="process.exec", pid=pid, exe=exe, argv=argv, cwd=ws)
        yield ev(type="file.read", pid=pid, path="/etc/ld.so.cache", flags="O_RDONLY|O_CLOEXEC")
        for lib in LIBS:
            yield ev(type="file.read", pid=pid, path=lib, flags="O_RDONLY|O_CLOEXEC")
        for mod in STDLIB:
            yield ev(type="file.read", pid=pid, path=mod, flags="O_RDONLY|O_CLOEXEC")
        for _ in range(rng.randrange(20, 60)):
            r = rng.random()
            if r < 0.6:
                yield ev(type="file.read", pid=pid, path=files[rng.randrange(len(files))], flags="O_RDONLY")
            elif r < 0.7:
                yield ev(type="file.read", pid=pid, path=f"{ws}/missing{rng.randrange(50)}", ok=False,
                         errno="ENOENT", flags="O_RDONLY")
            elif r < 0.8:
                tmp = f"/tmp/tmp{rng.getrandbits(40):010x}"
                yield ev(type="file.create", pid=pid, path=f"{tmp}.json", flags="O_WRONLY|O_CREAT|O_EXCL")
                yield ev(type="file.delete", pid=pid, path=f"{tmp}.json")
            elif r < 0.95:
                yield ev(type="file.write", pid=pid, path=outputs[rng.randrange(len(outputs))],
                         flags="O_WRONLY|O_CREAT|O_TRUNC")
            else:
                name, addr, port = hosts[rng.randrange(len(hosts))]
                yield ev(type="net.connect", pid=pid, address=addr, port=port, domain=name, transport="tcp")
        yield ev(type="process.exit", pid=pid, exit_code=0)
    yield ev(type="process.exit", pid=root, exit_code=0)


# -- phases (each in a child process) --------------------------------------------------
def phase_write(store_dir: Path, n: int) -> dict[str, object]:
    store = Store(store_dir, create=True)
    ws = str(store_dir.parent / "ws")
    meta = RunMeta(id=new_run_id(), cwd=ws, workspace=[ws], backend="synthetic", started=time.time_ns())
    events = list(synthetic_events(min(n, 200_000), ws))  # the writer alone, on events in memory
    writer = RunWriter(store, meta, flush_interval=1.0)
    t0 = time.perf_counter()
    for ev in events:
        writer.event(ev)
    t_write = time.perf_counter() - t0
    del events
    for ev in synthetic_events(n, ws):
        if ev.seq > writer.events_chain.count:
            writer.event(ev)
    writer.finish()
    path = store.run_dir(meta.id) / "events.jsonl"
    return {"run": meta.id, "events": writer.events_chain.count, "bytes": path.stat().st_size,
            "write_rate": min(n, 200_000) / t_write}


def phase_replay(store_dir: Path, run_id: str, profile: str | None) -> dict[str, object]:
    from spyglass.agents.awareness import AgentAwareness
    from spyglass.capture.replay import ReplayBackend
    from spyglass.policy import load_policy
    from spyglass.rules.engine import RuleEngine
    from spyglass.rules.ruleset import load_ruleset
    from spyglass.session.record import RunOutcome, RunRequest, record

    store = Store(store_dir)
    src = store.run_dir(run_id)
    meta = store.read_meta(run_id)
    policy = load_policy(None, cwd=meta.cwd or "/")
    rs = load_ruleset(policy, ())

    def go() -> RunOutcome:
        req = RunRequest(argv=["replay"], cwd="/", workspace=list(meta.workspace), policy=policy, home="/root")
        return record(req, ReplayBackend(src), store, [AgentAwareness(auto_detect=False), RuleEngine(rs, policy)])

    t0 = time.perf_counter()
    if profile:
        import cProfile

        cProfile.runctx("go()", globals(), {"go": go}, profile)
        return {"seconds": time.perf_counter() - t0}
    outcome = go()
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, **alerts_digest(store, outcome.meta.id)}


def alerts_digest(store: Store, run_id: str) -> dict[str, object]:
    """The alerts of a run as a count and a digest of (rule, process, message, events), so that
    two builds of the package (``bench_compiled.py``) can be shown to alert alike."""
    import hashlib

    from spyglass.store import RunReader

    keys = sorted((a.rule_id, a.pid, a.message, tuple(a.event_seqs)) for a in RunReader(store, run_id).alerts())
    return {"alerts": len(keys), "alerts_digest": hashlib.sha256(repr(keys).encode()).hexdigest()[:16]}


def phase_rules(n: int) -> dict[str, object]:
    """The rule engine alone (built-in pack, default policy) on up to 200k synthetic events in
    memory: CPU seconds, best of three fresh engines."""
    from spyglass.pipeline import Pipeline, RunContext
    from spyglass.policy import load_policy
    from spyglass.rules.engine import RuleEngine
    from spyglass.rules.ruleset import load_ruleset

    ws = "/tmp/spyglass-bench-ws"
    events = list(synthetic_events(min(n, 200_000), ws))
    policy = load_policy(None, cwd=ws)
    rs = load_ruleset(policy, ())
    best = float("inf")
    for _ in range(3):
        batch = [msgspec.structs.replace(ev) for ev in events]
        pipe = Pipeline([RuleEngine(rs, policy, validated=True)], RunContext(root_cwd=ws, workspace=[ws], home="/root"))
        pipe.start()
        t0 = time.process_time()
        for ev in batch:
            pipe.feed(ev, renumber=False)
        best = min(best, time.process_time() - t0)
    return {"events": len(events), "cpu": best}


def phase_floor(store_dir: Path, run_id: str) -> dict[str, object]:
    from spyglass.events.codec import iter_event_stream
    from spyglass.store.chain import BlockChain

    path = Store(store_dir).run_dir(run_id) / "events.jsonl"
    chain = BlockChain(run_id, "floor")
    encode = msgspec.json.Encoder().encode
    t0 = time.perf_counter()
    n = 0
    with path.open("rb") as f:
        for ev in iter_event_stream(f, lambda n, w: None):
            if chain.add(encode(ev)):
                chain.seal()
            n += 1
    chain.seal()
    return {"events": n, "seconds": time.perf_counter() - t0}


def _child(args: list[str], tree: Path | None = None) -> tuple[dict[str, object], float, float]:
    """Run a phase in a child process (with ``tree``: that source tree's package): its JSON
    result, wall seconds, peak RSS in MB (its CPU seconds: ``_LAST_CPU[0]``)."""
    env = None
    if tree is not None:  # (and run there: ``-m`` puts the working directory first on the path)
        env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, env=env, cwd=tree)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    _LAST_CPU[0] = usage.ru_utime + usage.ru_stime
    if proc.returncode not in (0, 6):  # 6: check's alerts exceeded fail_on
        sys.exit(f"phase failed ({proc.returncode}): {' '.join(args)}")
    try:
        res = json.loads(out.decode().strip().splitlines()[-1]) if out.strip() else {}
    except (json.JSONDecodeError, IndexError):
        res = {}
    return res if isinstance(res, dict) else {"output": res}, wall, usage.ru_maxrss / 1024


#: CPU seconds of the last child (on a loaded machine its rate says more than the wall time's)
_LAST_CPU = [0.0]

LIVE_LOOP = ("for i in $(seq 150); do cat /etc/hostname > /dev/null; ls /usr/lib > /dev/null; "
             "find /usr/share/doc/python3* -maxdepth 1 > /dev/null; done")


def live_bytes(spyglass: list[str], store_dir: Path) -> None:
    """A live strace run of a shell loop: events on disk and bytes per event."""
    t0 = time.perf_counter()
    subprocess.run([*spyglass, "run", "-q", "--backend", "strace", "--store", str(store_dir), "--",
                    "sh", "-c", LIVE_LOOP], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    store = Store(store_dir)
    run = store.run_dir(store.resolve("latest"))
    n = store.read_meta(store.resolve("latest")).counts.get("events", 0)
    size = (run / "events.jsonl").stat().st_size
    print(f"  live strace run (shell loop): {n} events in {wall:.1f} s, on disk {size / max(n, 1):.1f} bytes/event")


def _line(label: str, n: int, seconds: float, rss: float, target: bool = True, cpu: float | None = None) -> None:
    rate = n / seconds
    goal = f"   target >= {TARGET_RATE / 1000:.0f}k/s, <= {TARGET_RSS_MB} MB" if target else ""
    cpu = _LAST_CPU[0] if cpu is None else cpu
    print(f"  {label:<42} {rate / 1000:8.1f}k events/s  {seconds:7.2f} s  peak RSS {rss:6.1f} MB"
          f"  (CPU {cpu:.2f} s: {n / max(cpu, 1e-9) / 1000:.1f}k/s){goal}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--quick", action="store_true", help="200,000 events (a shared machine)")
    ap.add_argument("--live", action="store_true", help="also a live strace run: bytes per real event")
    ap.add_argument("--store", type=Path, default=None, help="work here (default: a temp dir, removed)")
    ap.add_argument("--profile", default=None, help="write a cProfile of the replay phase here")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="a source tree of another version: replay and check with it too, alternating (ratios)")
    ap.add_argument("--phase", choices=["write", "replay", "floor", "rules"], help=argparse.SUPPRESS)
    ap.add_argument("--run", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.events = 200_000
    if args.phase == "write":
        print(json.dumps(phase_write(args.store, args.events)))
        return
    if args.phase == "replay":
        print(json.dumps(phase_replay(args.store, args.run, args.profile)))
        return
    if args.phase == "floor":
        print(json.dumps(phase_floor(args.store, args.run)))
        return
    if args.phase == "rules":
        print(json.dumps(phase_rules(args.events)))
        return

    tmp = Path(tempfile.mkdtemp(prefix="spyglass-bench-pipeline-")) if args.store is None else None
    store_dir = (tmp / "store") if tmp is not None else args.store.resolve()
    me = [sys.executable, __file__, "--store", str(store_dir)]
    spyglass = [sys.executable, "-m", "spyglass"]
    try:
        load = os.getloadavg()
        print(f"synthetic run of {args.events} events; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        w, wall, rss = _child([*me, "--phase", "write", "--events", str(args.events)])
        n = int(w["events"])  # type: ignore[call-overload]
        print(f"  generated and stored in {wall:.1f} s (peak RSS {rss:.1f} MB)")
        print(f"  store writer alone: {float(w['write_rate']) / 1000:.1f}k events/s; "  # type: ignore[arg-type]
              f"on disk {int(w['bytes']) / n:.1f} bytes/event")  # type: ignore[call-overload]
        run_id = str(w["run"])
        replay = [*me, "--phase", "replay", "--run", run_id, *(["--profile", args.profile] if args.profile else [])]
        check = [*spyglass, "check", "--store", str(store_dir), "--format", "json", run_id]
        base = args.baseline.resolve() if args.baseline is not None else None
        here = Path(__file__).resolve().parents[1]
        order = [(here, "")] if base is None else [(base, "baseline "), (here, ""), (base, "baseline "), (here, "")]
        best: dict[tuple[str, str], tuple[float, float, float]] = {}
        for tree, label in order:  # alternating, best of two each when comparing
            for what, cmd in (("replay (store, awareness, rules)", replay), ("spyglass check", check)):
                if label and what.startswith("replay") and args.profile:
                    cmd = cmd[:-2]
                _, wall, rss = _child(cmd, tree if base is not None else None)
                key = (label, what)
                if key not in best or _LAST_CPU[0] < best[key][2]:
                    best[key] = (wall, rss, _LAST_CPU[0])
        for (label, what), (wall, rss, cpu) in best.items():
            _line(f"{label}{what}", n, wall, rss, cpu=cpu)
        if base is not None:
            for what in ("replay (store, awareness, rules)", "spyglass check"):
                ratio = best[("baseline ", what)][0] / best[("", what)][0]
                cpu_ratio = best[("baseline ", what)][2] / best[("", what)][2]
                print(f"  {what}: {ratio:.2f}x the baseline's rate in wall time, {cpu_ratio:.2f}x in CPU time "
                      "(best CPU of 2 each, alternating)")
        rules: dict[str, float] = {}
        for tree, label in order:
            r, _, _ = _child([*me, "--phase", "rules", "--events", str(n)], tree if base is not None else None)
            per = float(r["cpu"]) / int(r["events"])  # type: ignore[arg-type, call-overload]
            rules[label] = min(rules.get(label, per), per)
        for label, per in rules.items():
            print(f"  {label}rules alone (in memory, CPU): {per * 1e6:.2f} us/event ({1 / per / 1000:.1f}k events/s)")
        if base is not None:
            print(f"  rules alone: {rules['baseline '] / rules['']:.2f}x the baseline's rate in CPU time")
        replay_rate = n / best[("", "replay (store, awareness, rules)")][0]
        _, wall, rss = _child([*spyglass, "verify", "--store", str(store_dir), "--format", "json", run_id])
        _line("spyglass verify", n, wall, rss, target=False)
        if args.live:
            live_bytes(spyglass, store_dir.parent / "live")
        fl, wall, rss = _child([*me, "--phase", "floor", "--run", run_id])
        floor_rate = n / float(fl["seconds"])  # type: ignore[arg-type]
        print(f"  {'floor: decode + encode + seal in C':<42} {floor_rate / 1000:8.1f}k events/s  "
              f"(the replay runs at {replay_rate / floor_rate:.2f}x of it; peak RSS {rss:.1f} MB)")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
