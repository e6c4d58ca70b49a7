#!/usr/bin/env python3
"""Start-up cost of ``spyglass run -q -- true``: where the fixed time goes, per backend.

Runs, in a rotating order so that load drifts hit every mode alike: the bare
``true``, ``python -c pass`` (the interpreter alone), ``spyglass --help``, and
``spyglass run -q --backend B -- true`` for each backend that can run here (eBPF
needs root), each in a fresh empty working directory with its own store.
The run's phase marks (``SPYGLASS_PHASES``, :mod:`spyglass.phases`; the baseline's
too, in columns of their own) give the breakdown: interpreter, CLI and imports, policy, backend choice, rules load and
compile, sinks, store, sinks' start, capture start (strace spawn / eBPF
load+attach), the rules' warm-up after the launch, child run, finish (sinks,
store and index), exit.  Medians; differences and ratios against the bare
command of the same run, CPU seconds per run (steadier than wall time on a
busy machine), and the start-up targets (0.10 s over the bare
command, issue 19; 0.15 s with the eBPF backend, issue 14), met or not.

``run B --policy`` is the same run naming a small policy file (a harness usually
names one).  ``--store-runs N`` first fills the store with N finished runs (copies
of one run's record under new ids): a harness's store holds thousands, and every
command opening the store looks at each of them.  ``--baseline DIR`` adds the same
runs with another checkout's package (for example an export of ``main``) so a
change is measured against what it replaces in one run (same interpreter and
packages).  Each checkout's spyglass starts as its ``./scripts/setup.sh`` installs it (the
console script it writes, else pip's).  ``--baseline-python`` runs the baseline with another virtual environment's
interpreter instead (its ``site`` start and ``.pth`` files: how the package is installed), the same
checkout unless ``--baseline`` names one.  Usage:

    .venv/bin/python benchmarks/bench_startup.py [--repeat 9] [--quick] [--baseline DIR] [--watchdog 30]
                                                 [--store-runs 2000] [--baseline-python OTHER_VENV/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PHASES = [
    "interpreter", "cli", "imports", "backend select", "policy", "rules load", "rules compile", "sinks",
    "store", "sinks start", "warm", "capture start", "warm after launch", "child run", "finish: sinks",
    "finish: store", "exit",
]  # fmt: skip


def _entry_point(pkg_root: Path) -> tuple[str, str]:
    """(module, function) of the ``spyglass`` console script that checkout declares (its pyproject.toml)."""
    import tomllib

    with open(pkg_root / "pyproject.toml", "rb") as f:
        target = tomllib.load(f)["project"]["scripts"]["spyglass"]
    module, _, func = target.partition(":")
    return module, func


#: where the console scripts written for the measured checkouts go (set by main)
SCRIPTS: list[Path] = []


def _launcher(pkg_root: Path, python: str = sys.executable) -> list[str]:
    """``spyglass`` from ``pkg_root`` with ``python`` (this interpreter unless named), started as
    ``./scripts/setup.sh`` of that checkout installs it: the console script that checkout writes
    (``spyglass/cli/script.py``: ``python -I -S``, this environment's site-packages and the checkout
    named in it), else pip's (``site`` start, ``.pth`` files included, its checkout first on the path,
    entered where its pyproject.toml's console script enters)."""
    if (pkg_root / "spyglass" / "cli" / "script.py").exists():
        out = SCRIPTS[0] / f"spyglass-{len(list(SCRIPTS[0].iterdir()))}"
        subprocess.run([python, "-m", "spyglass.cli.script", str(out)], cwd=pkg_root, check=True)
        first = out.read_text().splitlines()[0]
        return [first[2:].split()[0], "-I", "-S", str(out)]  # what its #! line says
    module, func = _entry_point(pkg_root)
    code = f"import sys; sys.path.insert(0, {str(pkg_root)!r}); from {module} import {func}; {func}()"
    return [python, "-c", code]


#: mode -> CPU seconds (user + system) of each run and the processes it waited for
CPU: dict[str, list[float]] = {}


def _timed(argv: list[str], env: dict[str, str], cwd: Path, mode: str = "") -> float:
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if mode:
        CPU.setdefault(mode, []).append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed ({proc.returncode}): {proc.stderr.decode(errors='replace')[-400:]}")
    return took


def _phases(path: Path, spawned: float) -> dict[str, float]:
    """Seconds per phase of the last spyglass process that wrote ``path``."""
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    path.unlink()
    marks = json.loads(lines[-1])["marks"]
    out: dict[str, float] = {}
    prev = spawned
    for name, ts in marks:
        out[name] = out.get(name, 0.0) + max(0.0, ts - prev)
        prev = ts
    return out


def ebpf_usable() -> bool:
    sys.path.insert(0, str(REPO))
    try:
        from spyglass.capture.ebpf.probe import static_problem

        return os.geteuid() == 0 and static_problem() is None
    finally:
        sys.path.pop(0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=9, help="rounds (each runs every mode once)")
    ap.add_argument("--quick", action="store_true", help="3 rounds")
    ap.add_argument("--baseline", type=Path, help="another checkout (its spyglass/ package) to compare with")
    ap.add_argument("--baseline-python", metavar="PY",
                    help="run the baseline with this interpreter (another virtual environment's python: its "
                         "site start and .pth files); the baseline's checkout is this one unless --baseline names one")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    ap.add_argument("--watchdog", type=int, default=0, metavar="N",
                    help="also start the eBPF watchdog's script N times (and the baseline's, and the strace "
                         "backend's), as a run does, and print its CPU time (one runs beside every run)")
    ap.add_argument("--store-runs", type=int, default=0, metavar="N",
                    help="fill the store with N finished runs before the measured rounds (a harness's store)")
    ap.add_argument("--importtime", type=int, default=0, metavar="N",
                    help="also print the N slowest imports of one eBPF (else strace) run (python -X importtime)")
    args = ap.parse_args()
    rounds = 3 if args.quick else args.repeat
    backends = (["ebpf"] if ebpf_usable() else []) + ["strace"]
    base = Path(tempfile.mkdtemp(prefix="spyglass-bench-startup-"))
    SCRIPTS.append(base / "bin")
    SCRIPTS[0].mkdir()
    env = dict(os.environ)
    env.pop("SPYGLASS_POLICY", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed spyglass has its bytecode compiled
    env["XDG_CONFIG_HOME"] = str(base / "config")  # no user policy: the built-in defaults
    env["XDG_CACHE_HOME"] = str(base / "cache")
    phase_file = base / "phases.jsonl"
    true = shutil.which("true") or "/bin/true"
    modes: dict[str, tuple[list[str], bool]] = {
        "true": ([true], False),
        "python -c pass": ([sys.executable, "-c", "pass"], False),
        "spyglass --help": ([*_launcher(REPO), "--help"], False),
    }
    # a harness usually names its policy: a small one, for the first backend
    policy = base / "policy.yaml"
    policy.write_text("mode: observe\nsecrets: ['~/.mine/**']\nnetwork:\n  allow: [pypi.org, '*.github.com']\n")
    with_policy = ["--policy", str(policy)]
    for b in backends:
        modes[f"run {b}"] = ([*_launcher(REPO), "run", "-q", "--backend", b, "--", true], True)
    modes[f"run {backends[0]} --policy"] = ([*_launcher(REPO), "run", "-q", "--backend", backends[0], *with_policy,
                                             "--", true], False)
    if args.baseline is not None or args.baseline_python:
        launch = _launcher((args.baseline or REPO).resolve(), args.baseline_python or sys.executable)
        for b in backends:
            modes[f"baseline run {b}"] = ([*launch, "run", "-q", "--backend", b, "--", true], True)  # its phases too
        modes[f"baseline run {backends[0]} --policy"] = (
            [*launch, "run", "-q", "--backend", backends[0], *with_policy, "--", true], False)
    # one unmeasured run of each: bytecode caches written, the rule cache filled (a harness runs many)
    for i, (argv, _) in enumerate(modes.values()):
        _run_in(argv, env, base, f"warm{i}", None)
    if args.store_runs:
        _fill_store(base / "store", args.store_runs)
    walls: dict[str, list[float]] = {m: [] for m in modes}
    phases: dict[str, list[dict[str, float]]] = {m: [] for m, (_, p) in modes.items() if p}
    names = list(modes)
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for m in order:
            argv, with_phases = modes[m]
            took, ph = _run_in(argv, env, base, f"r{r}-{m.replace(' ', '_')}", phase_file if with_phases else None,
                               mode=m)
            walls[m].append(took)
            if with_phases:
                phases[m].append(ph)
    slow = _slowest_imports(backends[0], env, base, true, args.importtime) if args.importtime else []
    shutil.rmtree(base, ignore_errors=True)
    _report(walls, phases, rounds)
    if slow:
        print(f"\nslowest imports of `spyglass run -q --backend {backends[0]} -- true` (own time, ms):")
        total = sum(t for t, _ in slow)
        for ms, name in slow[: args.importtime]:
            print(f"  {ms:7.1f}  {name}")
        print(f"  {total:7.1f}  all imports")
    if args.watchdog:
        _watchdog_report(args.watchdog, args.baseline)
    if args.json:
        print(json.dumps({"wall": walls, "phases": phases}))


def _watchdog_argv(pkg_root: Path, sock: int, backend: str = "ebpf") -> list[str]:
    """The watchdog's command line as that checkout's ``Watchdog`` builds it (its configuration
    as marshal and ``-I -S``, or as JSON and ``-P`` before the script was made lean); ``backend``:
    whose script (the strace backend's has one since capture/strace/watchdog.py)."""
    script = pkg_root / "spyglass" / "capture" / backend / "watchdog.py"
    cfg = {"sock": sock, "monitor": os.getpid(), "root": 0, "package_root": str(pkg_root)}
    if "marshal.loads(" in script.read_text():
        import marshal

        return [sys.executable, "-I", "-S", str(script), marshal.dumps(cfg).hex()]
    return [sys.executable, "-P", str(script), json.dumps(cfg)]


def _watchdog_cpu(pkg_root: Path, backend: str = "ebpf") -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one watchdog from its spawn to its exit on ``done``."""
    import socket

    mine, theirs = socket.socketpair()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(_watchdog_argv(pkg_root, theirs.fileno(), backend), pass_fds=[theirs.fileno()],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    theirs.close()
    mine.sendall(b"done\n")  # read at its first look: the time measured is its start
    _, err = proc.communicate(timeout=60)
    took = time.perf_counter() - t0
    mine.close()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"watchdog of {pkg_root} failed ({proc.returncode}): {err.decode(errors='replace')[-400:]}")
    return r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, took


def _watchdog_report(n: int, baseline: Path | None) -> None:
    roots = {"watchdog": REPO, **({"baseline watchdog": baseline.resolve()} if baseline is not None else {})}
    scripts = {k: "ebpf" for k in roots}
    if (REPO / "spyglass" / "capture" / "strace" / "watchdog.py").exists():  # the strace backend's, beside
        roots["strace watchdog"], scripts["strace watchdog"] = REPO, "strace"
    cpu: dict[str, list[float]] = {k: [] for k in roots}
    wall: dict[str, list[float]] = {k: [] for k in roots}
    for i in range(n):
        for name in list(roots)[i % len(roots):] + list(roots)[: i % len(roots)]:
            c, w = _watchdog_cpu(roots[name], scripts[name])
            cpu[name].append(c)
            wall[name].append(w)
    load = os.getloadavg()
    print(f"\nthe watchdogs' start (spawn to exit on `done`), {n} each, load average {load[0]:.2f}, medians:")
    for name in roots:
        print(f"  {name:<28} cpu {statistics.median(cpu[name]) * 1000:6.1f} ms   "
              f"wall {statistics.median(wall[name]) * 1000:6.1f} ms")
    if baseline is not None:
        ratio = statistics.median(cpu["watchdog"]) / statistics.median(cpu["baseline watchdog"])
        print(f"  cpu ratio to the baseline      {ratio:.2f}")


def _run_in(argv: list[str], env: dict[str, str], base: Path, tag: str,
            phase_file: Path | None, *, mode: str = "") -> tuple[float, dict[str, float]]:
    cwd = base / "cwd" / tag
    cwd.mkdir(parents=True)
    run_env = dict(env, SPYGLASS_STORE=str(base / "store"))
    if phase_file is not None:
        run_env["SPYGLASS_PHASES"] = str(phase_file)
    spawned = time.time()
    took = _timed(argv, run_env, cwd, mode)
    return took, (_phases(phase_file, spawned) if phase_file is not None else {})


def _fill_store(store: Path, n: int) -> None:
    """``n`` more finished runs in ``store``: its newest run's record under new (older) ids, indexed."""
    sys.path.insert(0, str(REPO))
    try:
        import msgspec

        from spyglass.store.store import Store, new_run_id

        s = Store(store, create=True)
        meta = s.read_meta(s.list_ids()[-1])
        for i in range(n):
            copy = msgspec.structs.replace(meta, id=new_run_id(meta.started - (i + 1) * 1_000_000_000))
            s.run_dir(copy.id).mkdir()
            s.write_meta(copy)
        s.index.close()
    finally:
        sys.path.pop(0)
    print(f"the store holds {n} more runs", file=sys.stderr)


def _slowest_imports(backend: str, env: dict[str, str], base: Path, true: str, n: int) -> list[tuple[float, str]]:
    """(own import time in ms, module) of one run, slowest first."""
    cwd = base / "cwd" / "importtime"
    cwd.mkdir(parents=True)
    argv = [sys.executable, "-X", "importtime", *_launcher(REPO)[1:], "run", "-q", "--backend", backend, "--", true]
    proc = subprocess.run(argv, cwd=cwd, env=dict(env, SPYGLASS_STORE=str(base / "store")), capture_output=True,
                          text=True, check=False)
    rows: list[tuple[float, str]] = []
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if line.startswith("import time:") and len(parts) == 3 and parts[0].split(":")[1].strip().isdigit():
            rows.append((int(parts[0].split(":")[1]) / 1000, parts[2].strip()))
    return sorted(rows, reverse=True)


#: start-up targets, seconds over the bare command: (mode, limit, where it is asked)
TARGETS = [
    ("run strace", 0.10, "issue 19: `spyglass run -q -- true`"),
    ("run ebpf", 0.10, "issue 19: `spyglass run -q -- true` (eBPF is the default backend)"),
    ("run ebpf", 0.15, "issue 14: eBPF backend start-up"),
    ("run ebpf --policy", 0.15, "issue 14, with a policy file"),
]


def _targets(walls: dict[str, list[float]], bare: float) -> None:
    """Each target, the median over the bare command of this run, and whether it is met."""
    print("\ntargets (median over the bare command):")
    for mode, limit, where in TARGETS:
        for prefix in ("", "baseline "):
            ws = walls.get(prefix + mode)
            if not ws:
                continue
            over = statistics.median(ws) - bare
            verdict = "met" if over <= limit else f"NOT met ({over - limit:+.3f} s)"
            print(f"  {prefix + mode:<30} {over:6.3f} s  <= {limit:.2f} s  {verdict:<22} {where}")


def _report(walls: dict[str, list[float]], phases: dict[str, list[dict[str, float]]], rounds: int) -> None:
    load = os.getloadavg()
    print(f"spyglass start-up, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {rounds} rounds, medians")
    bare = statistics.median(walls["true"])
    print(f"\n{'mode':<30} {'median s':>9} {'min s':>7} {'- true s':>9} {'x true':>8} {'cpu s':>7}")
    for m, ws in walls.items():
        med = statistics.median(ws)
        cpu = statistics.median(CPU.get(m) or [0.0])  # user+system of the run's waited-for processes
        print(f"{m:<30} {med:9.3f} {min(ws):7.3f} {med - bare:9.3f} {med / bare:8.1f} {cpu:7.3f}")
    _targets(walls, bare)
    if not phases:
        return
    cols = list(phases)
    w = max(14, *(len(c) + 2 for c in cols))
    print(f"\nphases of `spyglass run -q -- true` (ms, medians){'':<4}" + "".join(f"{c:>{w}}" for c in cols))
    for name in PHASES:
        vals = [statistics.median([p.get(name, 0.0) for p in phases[c]]) * 1000 for c in cols]
        print(f"  {name:<48}" + "".join(f"{v:{w}.1f}" for v in vals))
    sums = [statistics.median([sum(p.values()) for p in phases[c]]) * 1000 for c in cols]
    print(f"  {'sum (spawn to exit)':<48}" + "".join(f"{v:{w}.1f}" for v in sums))


if __name__ == "__main__":
    main()
