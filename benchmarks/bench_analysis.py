"""Benchmark: profile and compare many large stored runs.

Generates a store of synthetic runs (default 100 runs × 50,000 events, 20
task labels × 5 runs) written through the store's own writer, with what real
runs carry: loader and interpreter noise, random temp names, pids, timestamps,
failed lookups, per-task files, commands and hosts.  Then measures:

* profile: every run profiled from its events.jsonl (serial, and with --jobs);
* compare: the similarity matrix of all runs and the per-task separation;
* memory: peak RSS of the process, and the peak traced Python allocation of
  profiling one run (tracemalloc), for 1× and 4× the events per run, which
  shows that a profile's memory does not grow with the number of events.

Usage: python benchmarks/bench_analysis.py [--runs 100] [--events 50000] [--store DIR] [--jobs 2]
(an existing --store with the right number of runs is reused).
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

from synth import EventStamper

from spyglass.analysis import compare, profile_runs, separation, similarity_matrix
from spyglass.analysis.profile import profile_run
from spyglass.events import Event
from spyglass.store import RunMeta, RunReader, RunWriter, Store, new_run_id

MODULES = ("os", "re", "json/__init__", "subprocess", "pathlib", "typing")
STDLIB = [f"/usr/lib/python3.11/{m}.py" for m in MODULES]
LIBS = [
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/lib/x86_64-linux-gnu/libm.so.6",
    "/usr/lib/x86_64-linux-gnu/libz.so.1",
]


def synthetic_events(task: int, n: int, rng: random.Random, ws: str) -> Iterator[Event]:
    """n events of one run of task ``task``."""
    trng = random.Random(task)  # what the task needs is fixed per task
    files = [f"{ws}/src/t{task}/m{trng.randrange(10_000)}.py" for _ in range(300)]
    outputs = [f"{ws}/out/t{task}-{i}.json" for i in range(20)]
    commands = [("/usr/bin/python3.11", ["python3", f"{ws}/tool{task}.py", "--step", str(i)]) for i in range(5)] + [
        ("/usr/bin/git", ["git", "status"]),
        ("/usr/bin/grep", ["grep", "-r", f"T{task}", f"{ws}/src"]),
    ]
    hosts = [(f"api{task}.example.com", f"10.{task}.0.{i}", 443) for i in range(3)]
    pid = rng.randrange(1000, 4_000_000)
    ev = EventStamper(rng, time.time_ns(), (1000, 100_000))

    while ev.seq < n:
        pid += 1
        exe, argv = commands[rng.randrange(len(commands))]
        yield ev(type="process.start", pid=pid, ppid=pid - 1)
        yield ev(type="process.exec", pid=pid, exe=exe, argv=argv, cwd=ws)
        yield ev(type="file.read", pid=pid, path="/etc/ld.so.cache", flags="O_RDONLY|O_CLOEXEC")
        for lib in LIBS:
            yield ev(type="file.read", pid=pid, path=lib, flags="O_RDONLY|O_CLOEXEC")
        for mod in STDLIB:
            yield ev(type="file.read", pid=pid, path=mod, flags="O_RDONLY|O_CLOEXEC")
            yield ev(
                type="file.read",
                pid=pid,
                path=mod.replace(".py", ".cpython-311.pyc").replace("/python3.11/", "/python3.11/__pycache__/"),
                flags="O_RDONLY|O_CLOEXEC",
            )
        yield ev(type="file.read", pid=pid, path=f"/proc/{pid}/status", flags="O_RDONLY")
        for _ in range(rng.randrange(20, 60)):
            r = rng.random()
            if r < 0.6:
                yield ev(
                    type="file.read",
                    pid=pid,
                    path=files[int(rng.triangular(0, len(files), 0))],
                    flags="O_RDONLY|O_CLOEXEC",
                )
            elif r < 0.7:
                yield ev(
                    type="file.read",
                    pid=pid,
                    path=f"{ws}/missing{rng.randrange(50)}",
                    ok=False,
                    errno="ENOENT",
                    flags="O_RDONLY",
                )
            elif r < 0.8:
                tmp = f"/tmp/tmp{''.join(rng.choices('abcdefghijklmnopqrstuvwxyz0123456789_', k=8))}"
                yield ev(type="file.create", pid=pid, path=f"{tmp}/part-{ev.ts}.json", flags="O_WRONLY|O_CREAT")
                yield ev(type="file.delete", pid=pid, path=f"{tmp}/part-{ev.ts}.json")
            elif r < 0.9:
                yield ev(
                    type="file.write",
                    pid=pid,
                    path=outputs[rng.randrange(len(outputs))],
                    flags="O_WRONLY|O_CREAT|O_TRUNC",
                )
            elif r < 0.95:
                name, addr, port = hosts[rng.randrange(len(hosts))]
                yield ev(type="net.dns", pid=pid, dns_name=name)
                yield ev(type="net.connect", pid=pid, address=addr, port=port, domain=name, transport="tcp")
            else:
                yield ev(type="file.read", pid=pid, path=ws, flags="O_RDONLY|O_DIRECTORY")
        yield ev(type="process.exit", pid=pid, exit_code=0)


def build_store(root: Path, runs: int, events: int, tasks: int) -> Store:
    store = Store(root, create=True)
    if len(store.list_ids()) == runs:
        print(f"reusing {runs} runs in {root}")
        return store
    t0 = time.perf_counter()
    for i in range(runs):
        rng = random.Random(1000 + i)
        task = i % tasks
        ws = f"/tmp/bench-ws-{rng.getrandbits(40):010x}"
        meta = RunMeta(
            id=new_run_id(),
            task=f"task-{task:02d}",
            cwd=ws,
            workspace=[ws],
            backend="synthetic",
            started=time.time_ns(),
        )
        writer = RunWriter(store, meta, flush_interval=1.0)
        for ev in synthetic_events(task, events, rng, ws):
            writer.event(ev)
        writer.finish()
        if (i + 1) % 10 == 0:
            print(f"  wrote {i + 1}/{runs} runs ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    print(f"generated {runs} runs × {events} events in {time.perf_counter() - t0:.1f} s")
    return store


def traced_peak(store: Store, run_id: str) -> int:
    tracemalloc.start()
    try:
        profile_run(RunReader(store, run_id), home="/root")
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--store", type=Path, default=None, help="keep the generated store here (reused if present)")
    args = ap.parse_args()

    tmp = None
    if args.store is None:
        tmp = Path(tempfile.mkdtemp(prefix="spyglass-bench-"))
        args.store = tmp / "store"
    try:
        store = build_store(args.store, args.runs, args.events, args.tasks)
        readers = [RunReader(store, i) for i in store.list_ids()]
        total_events = sum(r.meta.counts.get("events", 0) for r in readers)

        t0, c0 = time.perf_counter(), time.process_time()
        profiles = profile_runs(readers, home="/root")
        t_profile, c_profile = time.perf_counter() - t0, time.process_time() - c0
        t_profile_jobs = None
        if args.jobs > 1:
            t0 = time.perf_counter()
            profile_runs(readers, home="/root", jobs=args.jobs)
            t_profile_jobs = time.perf_counter() - t0

        t0, c0 = time.perf_counter(), time.process_time()
        matrix = similarity_matrix(profiles)
        sep = separation(matrix)
        t_compare, c_compare = time.perf_counter() - t0, time.process_time() - c0
        t0 = time.perf_counter()
        compare(profiles, by_task=True)
        t_compare_full = time.perf_counter() - t0

        peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        edges = sum(len(p.edges[k]) for p in profiles for k in p.edges) / len(profiles)

        # memory of one profile pass does not depend on the number of events
        small = traced_peak(store, readers[0].id)
        big_root = args.store.parent / "store-big"
        big_store = Store(big_root, create=True)
        if not big_store.list_ids():
            rng = random.Random(7)
            ws = "/tmp/bench-ws-big"
            meta = RunMeta(id=new_run_id(), task="task-00", cwd=ws, workspace=[ws])
            w = RunWriter(big_store, meta, flush_interval=1.0)
            for ev in synthetic_events(0, args.events * 4, rng, "/tmp/bench-ws-big"):
                w.event(ev)
            w.finish()
        big = traced_peak(big_store, big_store.list_ids()[0])

        print(
            f"\nruns: {len(readers)}, events: {total_events:,} ({total_events // len(readers):,} per run), "
            f"mean edges per profile: {edges:.0f}"
        )
        print(
            f"profile all runs (1 process):   {t_profile:6.2f} s  "
            f"({total_events / t_profile / 1e3:,.0f}k events/s; CPU {c_profile:.2f} s)"
        )
        if t_profile_jobs is not None:
            print(
                f"profile all runs ({args.jobs} processes):  {t_profile_jobs:6.2f} s  "
                f"({total_events / t_profile_jobs / 1e3:,.0f}k events/s)"
            )
        print(
            f"similarity matrix + separation: {t_compare:6.2f} s  ({len(matrix.pairs):,} pairs; CPU {c_compare:.2f} s)"
        )
        print(f"compare (JSON-ready report):    {t_compare_full:6.2f} s")
        print(f"peak RSS of this process:       {peak_rss_mb:6.0f} MB (all {len(profiles)} profiles held)")
        print(
            f"peak traced memory, one profile pass: {small / 1e6:.2f} MB at {args.events:,} events, "
            f"{big / 1e6:.2f} MB at {args.events * 4:,} events"
        )
        print(
            f"separation: fraction of tasks with a positive margin {sep.fraction_positive}, "
            f"mean margin {sep.mean_margin():.3f}"
        )
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
