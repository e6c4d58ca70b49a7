#!/usr/bin/env python3
"""Cost of the witness guard per event, against the rule engine on the same events.

Feeds the same synthetic stream (file writes and reads in a workspace, a few
hundred directories deep in total) through a pipeline holding only the rule
engine, and through one holding the rule engine and the witness guard.  Prints
median wall times of ``--repeat`` passes and the ratio (same run, same events).

With ``--watchdog N`` (needs a loadable eBPF program: root, BTF) it also
records ``true`` N times with the eBPF backend's watchdog and N times without
(alternating, the program preloaded each time) and prints both medians and
their ratio: what the watchdog process costs a short run.

With ``--new-files N`` it times the guard alone (no engine) on the events of an untar of N new
files in ``--dirs`` new directories, as the eBPF backend records them (per file: the ``mkdirat``
of its directory refused with EEXIST, the ``openat`` with ``O_CREAT|O_EXCL``, ``fchown`` and
``fchmod``; per directory a ``mkdirat``), on a real directory tree made as the stream goes; CPU
time per event, best of ``--repeat`` per child process, three children per checkout, alternating
with ``--baseline DIR``'s; medians and their ratio.

With ``--imports N`` it times the end-of-run check of what spyglass runs besides its
own package (spyglass.witness.imports: nothing changed, nothing removed) N times in a
child process that has imported what a run imports, for this checkout and, with
``--baseline DIR`` (an export of ``main``), for that one's package, alternating;
medians and their ratio.

    .venv/bin/python benchmarks/bench_witness.py [--events 40000] [--repeat 3] [--watchdog 10]
        [--imports 200 --baseline DIR] [--new-files 12000 [--dirs 500] --baseline DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spyglass.events import Event  # noqa: E402
from spyglass.pipeline import Pipeline, RunContext  # noqa: E402
from spyglass.policy import Policy  # noqa: E402
from spyglass.rules.engine import RuleEngine  # noqa: E402
from spyglass.rules.ruleset import load_ruleset  # noqa: E402
from spyglass.witness import Protected, WitnessGuard  # noqa: E402


def events(ws: Path, n: int) -> list[Event]:
    out = [Event(type="process.start", pid=10, ppid=1), Event(type="process.exec", pid=10, exe="/bin/sh",
                                                               argv=["sh"])]
    for i in range(n):
        d = ws / f"pkg{i % 40}" / f"mod{i % 7}"
        kind = "file.write" if i % 3 == 0 else "file.read"
        out.append(Event(type=kind, pid=10, path=str(d / f"f{i % 500}.py")))
    return out


def one_pass(evs: list[Event], ws: Path, store: Path, guard: bool) -> float:
    rs = load_ruleset(Policy.default(ws))
    sinks: list[object] = [RuleEngine(rs, Policy.default(ws), home="/root")]
    if guard:
        sinks.append(WitnessGuard(Protected.for_run(store)))
    pipe = Pipeline(sinks, RunContext(run_id="bench", root_cwd=str(ws), workspace=[str(ws)]))
    pipe.start()
    t0 = time.perf_counter()
    for ev in evs:
        pipe.feed(ev)
    return time.perf_counter() - t0


def watchdog_cost(n: int) -> None:
    """Median start-to-end of an eBPF-recorded ``true``, with and without the watchdog."""
    from spyglass.capture.base import LaunchSpec
    from spyglass.capture.ebpf import EbpfBackend
    from spyglass.capture.ebpf.probe import static_problem

    found = static_problem()
    if found is not None:
        print(f"watchdog: skipped, eBPF unavailable: {found[0]}")
        return
    backend = EbpfBackend()
    times: dict[bool, list[float]] = {True: [], False: []}
    for i in range(2 * n):
        on = i % 2 == 0
        backend.preload()
        t0 = time.perf_counter()
        session = backend.start(LaunchSpec(["true"], "/tmp", options={"watchdog": on}))
        for _ in session.events():
            pass
        times[on].append(time.perf_counter() - t0)
    with_wd, without = statistics.median(times[True]), statistics.median(times[False])
    print(f"eBPF `true`, watchdog  {with_wd * 1000:8.1f} ms (median of {n})")
    print(f"eBPF `true`, none      {without * 1000:8.1f} ms (median of {n})")
    print(f"ratio (watchdog/none)  {with_wd / without:8.2f}")


NEW_FILES_CHILD = r"""
import os, shutil, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
from spyglass.events import Event
from spyglass.pipeline import Pipeline, RunContext
from spyglass.witness import Protected, WitnessGuard
n, ndirs, repeat = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
root = "/dev/shm" if os.path.isdir("/dev/shm") else None
best = None
for r in range(repeat):
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        ws, store = os.path.join(tmp, "ws"), os.path.join(tmp, "store")
        os.makedirs(os.path.join(store, "runs"))
        os.makedirs(ws)
        evs = [Event(type="process.start", pid=10, ppid=1),
               Event(type="process.exec", pid=10, exe="/usr/bin/tar", argv=["tar", "xf", "x.tar"])]
        dirs = [os.path.join(ws, f"p{i % 10}", f"d{i}") for i in range(ndirs)]
        made = set()
        for i in range(n):
            d = dirs[i % ndirs]
            if d not in made:
                made.add(d)
                evs.append(Event(type="file.mkdir", pid=10, syscall="mkdirat", path=d, mode="0755"))
            else:
                evs.append(Event(type="file.mkdir", pid=10, syscall="mkdirat", path=d, mode="0755", ok=False,
                                 errno="EEXIST"))
            f = os.path.join(d, f"f{i}.py")
            evs.append(Event(type="file.create", pid=10, syscall="openat", path=f, mode="0600",
                             flags="O_WRONLY|O_CREAT|O_EXCL|O_NOCTTY|O_NONBLOCK|O_CLOEXEC"))
            evs.append(Event(type="file.chown", pid=10, syscall="fchown", path=f))
            evs.append(Event(type="file.chmod", pid=10, syscall="fchmod", path=f, mode="0644"))
        guard = WitnessGuard(Protected.for_run(store))
        pipe = Pipeline([guard], RunContext(run_id="bench", root_cwd=ws, workspace=[ws]))
        pipe.start()
        cpu = 0.0
        for ev in evs:
            if ev.type == "file.mkdir" and ev.ok:  # the tree is made as the stream goes (not timed)
                os.makedirs(ev.path, exist_ok=True)
            t0 = time.process_time()
            pipe.feed(ev)
            cpu += time.process_time() - t0
        assert not guard.alerts
        best = cpu / len(evs) if best is None else min(best, cpu / len(evs))
print(best)
"""


def new_files_cost(n: int, ndirs: int, repeat: int, baseline: Path | None) -> None:
    """The guard alone on an untar's events: CPU per event, here and in ``baseline``."""
    import subprocess

    trees = {"this": REPO, **({"baseline": baseline} if baseline is not None else {})}
    times: dict[str, list[float]] = {k: [] for k in trees}
    for _ in range(3):
        for name, tree in trees.items():
            out = subprocess.run([sys.executable, "-c", NEW_FILES_CHILD, str(tree), str(n), str(ndirs), str(repeat)],
                                 check=True, capture_output=True, text=True, timeout=900).stdout
            times[name].append(float(out))
    for name, ts in times.items():
        print(f"guard alone, untar of {n} new files in {ndirs} directories, {name:9s} "
              f"{statistics.median(ts) * 1e6:6.2f} us/event CPU (median of 3 processes, best of {repeat} each)")
    if baseline is not None:
        print(f"ratio (this/baseline)  {statistics.median(times['this']) / statistics.median(times['baseline']):8.2f}")


IMPORTS_CHILD = r"""
import statistics, sys, time
sys.path.insert(0, sys.argv[1])
import spyglass.cli.main, spyglass.session.core, spyglass.capture.strace, spyglass.rules.engine, spyglass.store
from spyglass.witness import imports
try:  # the run's end's own test (spyglass.witness.endofrun), as far as it goes without a run
    from spyglass.witness.endofrun import EndOfRun
    from spyglass.witness.protected import Protected
    from spyglass.pipeline import RunContext
    end = EndOfRun(Protected())
    end.started = time.time() + 60
    ctx = RunContext(run_id="bench", root_cwd="/nonexistent", workspace=["/nonexistent"])
    check = lambda: end.check_imports(ctx)
except ImportError:
    check = lambda: imports.check(time.time() + 60, lambda p: False, remove=False)
n, times = int(sys.argv[2]), []
for _ in range(n):
    t0 = time.perf_counter()
    check()
    times.append(time.perf_counter() - t0)
print(statistics.median(times))
"""


def imports_cost(n: int, baseline: Path | None) -> None:
    """Median wall time of one end-of-run imports check, here and in ``baseline``."""
    import subprocess

    trees = {"this": REPO, **({"baseline": baseline} if baseline is not None else {})}
    times: dict[str, list[float]] = {k: [] for k in trees}
    for _ in range(3):
        for name, tree in trees.items():
            out = subprocess.run([sys.executable, "-c", IMPORTS_CHILD, str(tree), str(n)], check=True,
                                 capture_output=True, text=True, timeout=600).stdout
            times[name].append(float(out))
    for name, ts in times.items():
        print(f"imports check, {name:9s} {statistics.median(ts) * 1000:8.2f} ms (median of 3 x {n})")
    if baseline is not None:
        print(f"ratio (this/baseline)  {statistics.median(times['this']) / statistics.median(times['baseline']):8.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=40000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--watchdog", type=int, default=0, metavar="N", help="also time N eBPF runs of `true` each way")
    ap.add_argument("--imports", type=int, default=0, metavar="N", help="also time the end-of-run imports check")
    ap.add_argument("--baseline", type=Path, help="another checkout to time the imports check (--imports) or the "
                    "guard (--new-files) of")
    ap.add_argument("--new-files", type=int, default=0, metavar="N",
                    help="time the guard alone on an untar of N new files (with --baseline: that checkout's too)")
    ap.add_argument("--dirs", type=int, default=500, help="directories of --new-files")
    args = ap.parse_args()
    if args.new_files:
        new_files_cost(args.new_files, args.dirs, args.repeat, args.baseline)
        return
    if args.imports:
        imports_cost(args.imports, args.baseline)
        return
    if args.watchdog:
        watchdog_cost(args.watchdog)
    with tempfile.TemporaryDirectory() as tmp:
        ws, store = Path(tmp) / "ws", Path(tmp) / "store"
        (store / "runs").mkdir(parents=True)
        for i in range(40):
            for j in range(7):
                (ws / f"pkg{i}" / f"mod{j}").mkdir(parents=True)
        evs = events(ws, args.events)
        base = statistics.median(one_pass(evs, ws, store, False) for _ in range(args.repeat))
        with_guard = statistics.median(one_pass(evs, ws, store, True) for _ in range(args.repeat))
    n = len(evs)
    print(f"events: {n}, repeat: {args.repeat}")
    print(f"rule engine alone      {base:8.3f} s  {base / n * 1e6:7.2f} us/event")
    print(f"rule engine + guard    {with_guard:8.3f} s  {with_guard / n * 1e6:7.2f} us/event")
    print(f"ratio (guard / alone)  {with_guard / base:8.2f}")


if __name__ == "__main__":
    main()
