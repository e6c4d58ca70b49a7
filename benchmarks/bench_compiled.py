"""Benchmark: the per-event hot path compiled with mypyc, against the same code interpreted.

Issue 19 asks for 500k events/s end to end; if Python cannot reach it, a compiled hot path is to
be measured before one is chosen.  This script builds one and measures it:

* two copies of this checkout's package in a temporary directory: one as it is (interpreted),
  one with the per-event modules (``MODULES``: the pipeline, the rule engine and its lane, the
  field context, the run state, path sets and memos, agent awareness, the store writer and its
  hash chain, the event codec, the replay backend) compiled to C extensions by mypyc, which ships
  with mypy (a test dependency); it needs a C compiler and Python's headers;
* a synthetic run (``bench_pipeline.py``'s generator, ``--events``), then, alternating the two
  copies ``--repeat`` times: its replay end to end (store, awareness, rules), ``spyglass check``
  of it, the rule engine alone on the events in memory, and ``spyglass run -q -- true`` (start-up);
* before any ratio, that both copies raised the same alerts in the replay (count and a digest of
  rule, process, message and events): a faster build that alerts differently is not a result.

It prints the best CPU time of each (the steadier figure on a shared machine) and the wall
time, the ratios compiled / interpreted, the build's time and size, and the issue's target.
The rule pack's generated matchers are compiled at run time (``compile()``) and stay
interpreted in both copies; ``PATCHES`` lists the compiled copy's only edit.  ``--keep DIR``
keeps the two copies (``DIR/interpreted``, ``DIR/compiled``): ``bench_startup.py --baseline
DIR/compiled`` then measures start-up phase by phase.  Usage:

    .venv/bin/python benchmarks/bench_compiled.py [--events 200000] [--repeat 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import bench_pipeline as bp

HERE = Path(__file__).resolve().parents[1]

#: the modules every event goes through (a profile of the replay: ``bench_pipeline.py --profile``)
MODULES = [
    "spyglass/pipeline.py",
    "spyglass/rules/engine.py",
    "spyglass/rules/context.py",
    "spyglass/rules/runstate.py",
    "spyglass/rules/pathmemo.py",
    "spyglass/rules/tracking.py",
    "spyglass/rules/emitter.py",
    "spyglass/rules/state.py",
    "spyglass/policy/paths.py",
    "spyglass/agents/awareness.py",
    "spyglass/store/writer.py",
    "spyglass/store/chain.py",
    "spyglass/events/codec.py",
    "spyglass/capture/replay.py",
]

#: edits to the compiled copy only, each (file, text, replacement): mypyc forbids an interpreted
#: class to derive from a compiled one unless the base allows it (``mypy_extensions``, a
#: dependency of mypy, not of spyglass), and every sink outside ``MODULES`` derives from ``Sink``
PATCHES = [
    ("spyglass/pipeline.py", "\nclass Sink:\n",
     "\nfrom mypy_extensions import mypyc_attr\n\n\n@mypyc_attr(allow_interpreted_subclasses=True)\nclass Sink:\n"),
]

MYPY_INI = """[mypy]
python_version = 3.11
strict = True
[mypy-jsonschema.*,grpc.*,google.protobuf.*]
ignore_missing_imports = True
"""


def build(dest: Path, modules: list[str] | None) -> float:
    """Copy the package to ``dest`` and, with ``modules``, compile those with mypyc there: seconds."""
    dest.mkdir(parents=True)
    shutil.copytree(HERE / "spyglass", dest / "spyglass", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    # byte-code made now, so that no timed phase pays for compiling it
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(dest / "spyglass")], check=True)
    if not modules:
        return 0.0
    mypyc = Path(sys.executable).parent / "mypyc"
    if not mypyc.exists():
        sys.exit(f"mypyc not found next to {sys.executable}: it ships with mypy (pip install mypy)")
    if shutil.which("cc") is None or not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        sys.exit("mypyc needs a C compiler and Python's headers: apt-get install gcc python3-dev")
    (dest / "mypy.ini").write_text(MYPY_INI)
    for name, text, replacement in PATCHES:
        path = dest / name
        source = path.read_text()
        if source.count(text) != 1:
            sys.exit(f"{name} has changed: this script's edit to it no longer applies ({text.strip()!r})")
        path.write_text(source.replace(text, replacement))
    t0 = time.perf_counter()
    proc = subprocess.run([str(mypyc), *modules], cwd=dest, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
        sys.exit(f"mypyc failed to compile the hot path:\n{tail}")
    return time.perf_counter() - t0


def startup(tree: Path, store: Path) -> float:
    """Wall seconds of one ``spyglass run -q -- true`` with ``tree``'s package."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "spyglass", "run", "-q", "--store", str(store), "--", "true"],
                   cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=200_000, help="events in the synthetic run")
    ap.add_argument("--repeat", type=int, default=2, help="rounds, each running both copies once")
    ap.add_argument("--keep", type=Path, default=None, help="build the two copies here and keep them")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="spyglass-bench-compiled-"))
    root = args.keep.resolve() if args.keep is not None else tmp
    trees = {"interpreted": root / "interpreted", "compiled": root / "compiled"}
    try:
        load = os.getloadavg()
        print(f"hot path compiled with mypyc against interpreted; {args.events} events, {args.repeat} rounds; "
              f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} CPUs")
        build(trees["interpreted"], None)
        secs = build(trees["compiled"], MODULES)
        size = sum(p.stat().st_size for p in trees["compiled"].rglob("*.so"))
        print(f"  built {len(MODULES)} modules with mypyc in {secs:.0f} s ({size / 1e6:.1f} MB of extensions)")
        store = tmp / "store"
        me = [sys.executable, str(Path(bp.__file__).resolve()), "--store", str(store)]
        w, _, _ = bp._child([*me, "--phase", "write", "--events", str(args.events)])
        run_id, n = str(w["run"]), int(w["events"])  # type: ignore[call-overload]
        cpu: dict[tuple[str, str], list[float]] = {}
        wall: dict[tuple[str, str], list[float]] = {}
        digests: dict[str, set[tuple[object, object]]] = {}

        def note(name: str, what: str, seconds: float, cpu_s: float) -> None:
            cpu.setdefault((name, what), []).append(cpu_s)
            wall.setdefault((name, what), []).append(seconds)

        for name, tree in trees.items():  # untimed: the rules' and code caches of each copy
            startup(tree, tmp / f"runs-{name}")
        for _ in range(args.repeat):
            for name, tree in trees.items():
                res, seconds, _ = bp._child([*me, "--phase", "replay", "--run", run_id], tree)
                note(name, "replay", seconds, bp._LAST_CPU[0])
                digests.setdefault(name, set()).add((res.get("alerts"), res.get("alerts_digest")))
                _, seconds, _ = bp._child([sys.executable, "-m", "spyglass", "check", "--store", str(store),
                                           "--format", "json", run_id], tree)
                note(name, "check", seconds, bp._LAST_CPU[0])
                res, _, _ = bp._child([*me, "--phase", "rules", "--events", str(n)], tree)
                per = float(res["cpu"]) / int(res["events"])  # type: ignore[arg-type, call-overload]
                note(name, "rules", per, per)
                for _ in range(3):
                    t = startup(tree, tmp / f"runs-{name}")
                    note(name, "startup", t, t)
        if len(digests["interpreted"]) != 1 or digests["interpreted"] != digests["compiled"]:
            sys.exit(f"the two copies alerted differently (count, digest): {digests}: no ratio is given")
        (alerts, digest), = digests["compiled"]
        print(f"  both copies raised the same {alerts} alerts in every replay (digest {digest})")
        for what, label in (("replay", "replay (store, awareness, rules)"), ("check", "spyglass check")):
            line = []
            for name in trees:
                best = min(cpu[(name, what)])
                line.append(f"{name} {n / best / 1000:6.1f}k events/s (CPU {best:.2f} s, "
                            f"wall {min(wall[(name, what)]):.2f} s)")
            ratio = min(cpu[("interpreted", what)]) / min(cpu[("compiled", what)])
            print(f"  {label:<34} {'; '.join(line)}; compiled {ratio:.2f}x the rate"
                  f"{'' if what != 'replay' else f'; target {bp.TARGET_RATE / 1000:.0f}k/s'}")
        ri, rc = min(cpu[("interpreted", "rules")]), min(cpu[("compiled", "rules")])
        print(f"  {'rules alone (in memory, CPU)':<34} interpreted {ri * 1e6:.2f} us/event; compiled {rc * 1e6:.2f}"
              f" us/event; compiled {ri / rc:.2f}x the rate")
        si, sc = statistics.median(wall[("interpreted", "startup")]), statistics.median(wall[("compiled", "startup")])
        print(f"  {'spyglass run -q -- true (median)':<34} interpreted {si:.3f} s; compiled {sc:.3f} s; "
              f"compiled {si / sc:.2f}x as fast")
        if args.keep is not None:
            print(f"  kept: {trees['interpreted']} and {trees['compiled']}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
