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

With ``--imports N`` it times the end-of-run check of what spyglass runs besides its
own package (spyglass.witness.imports: nothing changed, nothing removed) N times in a
child process that has imported what a run imports, for this checkout and, with
``--baseline DIR`` (an export of ``main``), for that one's package, alternating;
medians and their ratio.

    .venv/bin/python benchmarks/bench_witness.py [--events 40000] [--repeat 3] [--watchdog 10]
        [--imports 200 --baseline DIR]
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
    ap.add_argument("--baseline", type=Path, help="another checkout to time the imports check of (--imports)")
    args = ap.parse_args()
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
