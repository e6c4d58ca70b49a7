#!/usr/bin/env python3
"""The live per-event path: ``spyglass run -q --backend strace`` against raw strace with the
same flags, and the alert latency (the secret read -> its alert line on spyglass's stderr).

Ratios (issue 19's targets: <= 1.10x): each workload runs bare, under raw strace
(``strace_command``: the backend's flags, writing to a file) and under ``spyglass run -q
--backend strace`` (and ``--backend ebpf`` with ``--ebpf``), the modes alternating in a
rotating order; medians of ``--repeat``.  Workloads on tmpfs (/dev/shm): untar of ~48 MB
in ~12k files of the Python standard library, ``git status`` x5 in a repository of 10k
files, ``compileall`` of part of the standard library, 1000 execs of /bin/true.  Each workload
runs in a directory of its own, which is the run's workspace (the untar's target, the repository,
the sources compiled, an empty directory for the execs): ``--shared-workspace`` runs the untar,
compileall and the execs in the benchmark's one temporary directory instead (what earlier figures
measured), so that each run's workspace evidence lists and hashes every other workload's files too
(the tarball, the repository, the untarred tree).  The bytecode of each spyglass measured is
compiled first (``compileall``), as an installed spyglass's is: the runs have
PYTHONDONTWRITEBYTECODE set, and a fresh checkout would compile its modules at every start.

Alert latency (target: p99 <= 50 ms under bursts): one ``spyglass run --backend strace``
whose agent forks a child per trial; the child notes CLOCK_REALTIME and reads a decoy
``~/.ssh/id_rsa`` (the HOME is a temporary directory); the benchmark reads spyglass's
stderr as it comes and stamps the ``cred-secret-read`` line of that pid.  ``idle``: nothing
else runs; ``burst``: a second child creates new files without pause the whole time.
``--ebpf`` adds the table of ``--backend ebpf``; ``--sandbox`` adds the same tables for
sandboxed runs (``run --sandbox``: the key the agent reads is the decoy home's honeytoken,
and the line stamped is ``cred-honeytoken-access``).  ``--latency-only ebpf`` (or
``strace``) measures one backend's latency only.

Usage: .venv/bin/python benchmarks/bench_live.py [--quick] [--repeat 3] [--trials 60] [--ebpf]
       [--sandbox] [--latency-only strace|ebpf] [--only untar,git,...] [--no-latency] [--no-ratios]
       [--no-per-event] [--shared-workspace] [--compare OTHER_CHECKOUT] [--ebpf-only]

``--compare DIR`` runs another checkout's spyglass (e.g. an export of main) in the same run,
alternating with this one, for before/after figures on a noisy machine (with ``--ebpf``, under
both backends; the eBPF columns also give the records each code's runs lost).
``--ebpf-only`` leaves out the strace runs (with ``--ebpf``: bare against ``--backend ebpf``).
Run it from another checkout's root to measure that checkout (the spyglass it runs is the one
beside this script: PYTHONPATH).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parent.parent
#: the spyglass measured: this checkout's, or SPYGLASS_BENCH_CODE's (``--compare`` runs the engine
#: figures of the other checkout through it, with this script)
sys.path.insert(0, os.environ.get("SPYGLASS_BENCH_CODE", str(REPO)))

from spyglass.capture.strace.command import strace_command  # noqa: E402

Workload = tuple[list[str], Path, Callable[[], None]]


def timed(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _stdlib_files(limit_files: int, limit_bytes: int) -> list[Path]:
    lib = Path(sysconfig.get_paths()["stdlib"])
    out: list[Path] = []
    size = 0
    for p in sorted(lib.rglob("*")):
        if "__pycache__" in p.parts or not p.is_file() or p.is_symlink():
            continue
        if p.stat().st_size > 64 << 10:  # many files of source-tree sizes, not a few big archives
            continue
        out.append(p)
        size += p.stat().st_size
        if len(out) >= limit_files or size >= limit_bytes:
            break
    return out


def make_workloads(base: Path, quick: bool, shared: bool = False) -> dict[str, Workload]:
    lib = Path(sysconfig.get_paths()["stdlib"])
    files = _stdlib_files(3000 if quick else 12000, (12 if quick else 48) << 20)
    tar_path = base / "lib.tar"
    with tarfile.open(tar_path, "w") as tf:
        for p in files:
            tf.add(p, arcname=str(p.relative_to(lib.parent)), recursive=False)
    untar_dir = base / "untar"

    def reset_untar() -> None:
        shutil.rmtree(untar_dir, ignore_errors=True)
        untar_dir.mkdir()

    repo = base / "repo"
    for i in range(3000 if quick else 10000):
        d = repo / f"d{i % 100}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.txt").write_text(f"file {i}\n")
    git = ["git", "-c", "user.email=b@x", "-c", "user.name=b"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=repo, check=True)
    src = base / "pysrc"
    for sub in ["json", "email", "http", "xml"] + ([] if quick else ["asyncio", "importlib", "logging", "urllib"]):
        shutil.copytree(lib / sub, src / sub, ignore=shutil.ignore_patterns("__pycache__", "test*"))

    def reset_compile() -> None:
        for p in src.rglob("__pycache__"):
            shutil.rmtree(p, ignore_errors=True)

    execs = 300 if quick else 1000
    exec_dir = base / "execs"
    exec_dir.mkdir()
    return {
        f"untar {sum(p.stat().st_size for p in files) >> 20} MB ({len(files)} files)": (
            ["tar", "xf", str(tar_path), "-C", str(untar_dir)], base if shared else untar_dir, reset_untar),
        "git status x5": (["sh", "-c", "for i in 1 2 3 4 5; do git status -s >/dev/null; done"], repo, lambda: None),
        "compileall": ([sys.executable, "-m", "compileall", "-q", str(src)], base if shared else src, reset_compile),
        f"{execs} execs": (["sh", "-c", f"i=0; while [ $i -lt {execs} ]; do /bin/true; i=$((i+1)); done"],
                           base if shared else exec_dir, lambda: None),
    }  # fmt: skip


def _last_lost(store: Path) -> int:
    """Records the newest run in ``store`` lost (run.json ``capture.lost``; 0 when none is found)."""
    import json

    runs = sorted((store / "runs").glob("*/run.json"), key=lambda p: p.stat().st_mtime_ns)
    if not runs:
        return 0
    return int(json.loads(runs[-1].read_text()).get("capture", {}).get("lost", 0) or 0)


def ratios(base: Path, args: argparse.Namespace, env: dict[str, str], other: dict[str, str] | None) -> None:
    workloads = make_workloads(base, args.quick, args.shared_workspace)
    if args.only:
        wanted = tuple(args.only.split(","))
        workloads = {k: v for k, v in workloads.items() if k.startswith(wanted)}
    spyglass = [sys.executable, "-m", "spyglass", "run", "-q"]
    trace = base / "trace.txt"
    store = Path(env["SPYGLASS_STORE"])
    rows = []
    strace = not args.ebpf_only
    for name, (argv, cwd, reset) in workloads.items():
        modes: dict[str, Callable[[], float]] = {"bare": lambda argv=argv, cwd=cwd: timed(argv, cwd)}
        if strace:
            modes["strace"] = lambda argv=argv, cwd=cwd: timed(strace_command(str(trace), argv), cwd)
            modes["sg strace"] = lambda argv=argv, cwd=cwd: timed([*spyglass, "--backend", "strace", "--", *argv], cwd,
                                                                  env)
        if other is not None and strace:
            modes["sg other"] = lambda argv=argv, cwd=cwd: timed(
                [*spyglass, "--backend", "strace", "--", *argv], cwd, other)
        if args.ebpf:
            modes["sg ebpf"] = lambda argv=argv, cwd=cwd: timed([*spyglass, "--backend", "ebpf", "--", *argv], cwd, env)
            if other is not None:
                modes["sg ebpf other"] = lambda argv=argv, cwd=cwd: timed(
                    [*spyglass, "--backend", "ebpf", "--", *argv], cwd, other)
        times: dict[str, list[float]] = {m: [] for m in modes}
        lost: dict[str, int] = {m: 0 for m in modes if m.startswith("sg ebpf")}
        order = list(modes)
        for i in range(args.repeat):
            for mode in order[i % len(order):] + order[: i % len(order)]:
                reset()
                times[mode].append(modes[mode]())
                if mode in lost:
                    lost[mode] += _last_lost(store)
        rows.append((name, {m: statistics.median(v) for m, v in times.items()}, lost))
        print(f"  {name}: done", file=sys.stderr, flush=True)
    head = "| workload | bare s |"
    if strace:
        head += " strace s | sg strace s | sg strace / strace |"
    if other is not None and strace:
        head += " --compare s | --compare / strace |"
    if args.ebpf:
        head += " sg ebpf s | sg ebpf / bare | lost |"
        if other is not None:
            head += " --compare ebpf s | --compare ebpf / bare | lost | this / --compare (ebpf) |"
    print("\n" + head)
    print("|---" + "|---:" * (head.count("|") - 2) + "|")
    for name, med, lost in rows:
        line = f"| {name} | {med['bare']:.3f} |"
        if strace:
            line += f" {med['strace']:.3f} | {med['sg strace']:.3f} | {med['sg strace'] / med['strace']:.2f}x |"
        if other is not None and strace:
            line += f" {med['sg other']:.3f} | {med['sg other'] / med['strace']:.2f}x |"
        if args.ebpf:
            line += f" {med['sg ebpf']:.3f} | {med['sg ebpf'] / med['bare']:.2f}x | {lost['sg ebpf']} |"
            if other is not None:
                line += (f" {med['sg ebpf other']:.3f} | {med['sg ebpf other'] / med['bare']:.2f}x |"
                         f" {lost['sg ebpf other']} | {med['sg ebpf'] / med['sg ebpf other']:.2f}x |")
        print(line)
    if strace:
        print("(target: sg strace / strace <= 1.10x)")
    if args.ebpf:
        print(f"(lost: eBPF records the runs lost, summed over the {args.repeat} repeats; "
              "the eBPF target: 0 lost, end to end as close to bare as possible)")


AGENT = r"""
import os, random, sys, time
trials, burst_dir, stamps = int(sys.argv[1]), sys.argv[2], sys.argv[3]
key = os.path.expanduser("~/.ssh/id_rsa")
burster = None
if burst_dir != "-":
    burster = os.fork()
    if burster == 0:  # a burst of new files for as long as the trials run
        os.makedirs(burst_dir, exist_ok=True)
        i = 0
        while True:
            open(os.path.join(burst_dir, str(i)), "w").close()
            i += 1
    time.sleep(0.3)
out = open(stamps, "w")
for _ in range(trials):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        t0 = time.time_ns()
        with open(key) as f:
            f.read()
        os.write(w, str(t0).encode())
        os._exit(0)
    os.close(w)
    t0 = os.read(r, 64).decode()
    os.close(r)
    os.waitpid(pid, 0)
    out.write(f"{pid} {t0}\n")
    out.flush()
    time.sleep(random.uniform(0.02, 0.06))
if burster:
    os.kill(burster, 9)
    os.waitpid(burster, 0)
"""


def _read_alerts(stream: IO[bytes], seen: dict[int, int], rule: str = "cred-secret-read") -> None:
    """Stamp each ``rule`` line of spyglass's stderr as it arrives (pid -> time ns)."""
    for raw in iter(stream.readline, b""):
        now = time.time_ns()
        line = raw.decode(errors="replace")
        if rule in line and " pid " in line:
            try:
                seen.setdefault(int(line.split(" pid ", 1)[1].split()[0]), now)
            except ValueError:
                pass


def _latency_run(base: Path, env: dict[str, str], backend: str, load: str, trials: int, tag: str,
                 sandbox: bool = False) -> list[float]:
    """One ``spyglass run`` of ``trials`` secret reads: the latencies (ms) of the alert lines seen."""
    home = base / "lat-home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nfake\n")
    agent = base / "lat-agent.py"
    agent.write_text(AGENT)
    ws = base / "lat-ws"  # the workspace: what a sandboxed agent may write (its burst, its stamps)
    ws.mkdir(exist_ok=True)
    if sandbox:
        agent = ws / "lat-agent.py"
        agent.write_text(AGENT)
    burst = ws / f"burst-{tag}"
    shutil.rmtree(burst, ignore_errors=True)
    stamps = ws / f"stamps-{tag}"
    argv = [sys.executable, "-m", "spyglass", "run", *(["--sandbox"] if sandbox else []), "--backend", backend,
            "--", sys.executable, str(agent), str(trials), str(burst) if load == "burst" else "-", str(stamps)]
    seen: dict[int, int] = {}
    proc = subprocess.Popen(argv, cwd=ws, env=dict(env, HOME=str(home)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    assert proc.stderr is not None
    rule = "cred-honeytoken-access" if sandbox else "cred-secret-read"
    t = threading.Thread(target=_read_alerts, args=(proc.stderr, seen, rule), daemon=True)
    t.start()
    proc.wait()
    t.join(timeout=10)
    shutil.rmtree(burst, ignore_errors=True)
    rows = [tuple(int(x) for x in row.split()) for row in
            (stamps.read_text().split("\n") if stamps.exists() else []) if row.strip()]
    if sandbox:  # the agent knows its pids in the sandbox's namespace, the alert says the host's: in order
        return [(at - t0) / 1e6 for (_pid, t0), at in zip(rows, sorted(seen.values()), strict=False)]
    return [(seen[pid] - t0) / 1e6 for pid, t0 in rows if pid in seen]


def latency(base: Path, args: argparse.Namespace, codes: dict[str, dict[str, str]], backend: str,
            sandbox: bool = False) -> None:
    """Alert latency per load and code; with several codes, runs alternate between them (3 rounds)."""
    rounds = 3 if len(codes) > 1 else 1
    per_run = max(1, args.trials // rounds)
    what = f"{backend}, sandboxed: honeytoken read" if sandbox else f"{backend}: secret read"
    print(f"\nalert latency, {what} -> alert line ({per_run * rounds} trials each"
          f"{f', {rounds} alternating runs per code' if rounds > 1 else ''})")
    print("| load | code | alerts seen | p50 ms | p90 ms | p99 ms | max ms |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for load in ("idle", "burst"):
        got: dict[str, list[float]] = {c: [] for c in codes}
        for r in range(rounds):
            for i, (code, env) in enumerate(codes.items()):
                got[code] += _latency_run(base, env, backend, load, per_run,
                                          f"{load}-{backend}-{sandbox:d}-{r}-{i}", sandbox)
        for code, lat in got.items():
            lat.sort()
            if not lat:
                print(f"| {load} | {code} | 0 | - | - | - | - |")
                continue

            def q(p: float, lat: list[float] = lat) -> float:
                return lat[min(len(lat) - 1, int(p * len(lat)))]

            print(f"| {load} | {code} | {len(lat)} | {q(0.5):.1f} | {q(0.9):.1f} | {q(0.99):.1f} | {lat[-1]:.1f} |")
    print("(target: p99 <= 50 ms under bursts)")


def per_event(base: Path, args: argparse.Namespace) -> None:
    """CPU time per strace line (parser, in this process) and per event (rule engine, full pack, in a
    process of its own per code: with ``--compare`` the other checkout too, alternating)."""

    from spyglass.capture.strace.parser import StraceParser

    files = _stdlib_files(2000, 16 << 20)
    tar_path, out, trace = base / "pe.tar", base / "pe-out", base / "pe.trace"
    lib = Path(sysconfig.get_paths()["stdlib"])
    with tarfile.open(tar_path, "w") as tf:
        for p in files:
            tf.add(p, arcname=str(p.relative_to(lib.parent)), recursive=False)
    out.mkdir()
    timed(strace_command(str(trace), ["tar", "xf", str(tar_path), "-C", str(out)]), base)
    lines = trace.read_text(errors="surrogateescape").splitlines() * 5
    best = min(_cpu_each(StraceParser(cwd="/").feed, lines) for _ in range(3))
    print(f"\nper event (CPU time, best of 3): strace parser {best / len(lines) * 1e6:.2f} us/line "
          f"({len(lines):,} lines of an untar trace)")
    codes = {"this": None, **({"--compare": str(Path(args.compare).resolve())} if args.compare else {})}
    got: dict[str, list[list[float]]] = {c: [] for c in codes}
    for _ in range(3 if args.compare else 1):  # alternating, each in a process of its own
        for code, where in codes.items():
            env = dict(os.environ, **({"SPYGLASS_BENCH_CODE": where} if where else {}))
            out = subprocess.run([sys.executable, __file__, "--engine-only"], env=env, capture_output=True,
                                 text=True, check=True).stdout
            got[code].append([float(x) for x in out.split()])
    for code, runs in got.items():
        off, lane, pipe = (statistics.median(r[k] for r in runs) for k in range(3))
        tag = f" [{code}]" if args.compare else ""
        print(f"rule engine{tag}, new paths (file.create + file.chmod each), best of 3 per process"
              f"{', median of 3 processes' if args.compare else ''}: fast lane off {off:.2f} us/event, "
              f"on {lane + pipe:.2f} (lane {lane:.2f} + pipeline {pipe:.2f})")
    if args.compare:
        a, b = ([r[1] + r[2] for r in got[c]] for c in codes)
        print(f"  fast lane on, this / --compare: {statistics.median(a) / statistics.median(b):.2f}x")


def engine_cost() -> list[float]:
    """CPU per event of the rule engine (full pack) on new paths: lane off; lane on, the lane's
    part and the pipeline's (us; each best of 3, a new engine and new paths each time)."""
    import inspect

    from spyglass.events import Event
    from spyglass.pipeline import Pipeline, RunContext
    from spyglass.policy import Policy
    from spyglass.rules.engine import RuleEngine
    from spyglass.rules.ruleset import load_ruleset

    home, ws = "/home/dev", "/home/dev/project"
    rs = load_ruleset(Policy.default())
    has_lane = "fast_lane" in inspect.signature(RuleEngine).parameters
    out: list[float] = []
    for lane in (False, True):
        tries = []
        for t in range(3):
            evs = [Event(type="process.start", pid=100, ppid=1, ts=1),
                   Event(type="process.exec", pid=100, exe="/usr/bin/tar", argv=["tar", "xf"], ts=2)]
            for i in range(20000):
                path = f"{ws}/l{lane}{t}/d{i % 50}/f{i}.py"
                evs.append(Event(type="file.create", pid=100, path=path, flags="O_WRONLY|O_CREAT|O_EXCL", ts=3 + i))
                evs.append(Event(type="file.chmod", pid=100, path=path, mode="0644", ts=3 + i))
            engine = RuleEngine(rs, home=home, workspace=[ws], **({"fast_lane": lane} if has_lane else {}))
            pipe = Pipeline([engine], RunContext(run_id="x", root_cwd=ws, workspace=[ws], home=home))
            pipe.start()
            lane_s = _cpu_each(engine.urgent, evs) if lane else 0.0  # type: ignore[attr-defined]
            tries.append((lane_s + _cpu_each(pipe.feed, evs), lane_s, len(evs)))
        total, lane_s, n = min(tries)
        if lane:
            out += [lane_s / n * 1e6, (total - lane_s) / n * 1e6]
        else:
            out.append(total / n * 1e6)
    return out


def _cpu_each(fn: Callable[[Any], object], items: list[Any]) -> float:
    t0 = time.process_time()
    for x in items:
        fn(x)
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--trials", type=int, default=60)
    ap.add_argument("--quick", action="store_true", help="smaller workloads and fewer trials (a smoke run)")
    ap.add_argument("--only", help="comma-separated workload name prefixes")
    ap.add_argument("--ebpf", action="store_true", help="also spyglass run --backend ebpf (root)")
    ap.add_argument("--ebpf-only", action="store_true",
                    help="with --ebpf: the ratios of bare and --backend ebpf only (no strace runs)")
    ap.add_argument("--sandbox", action="store_true", help="also the alert latency of sandboxed runs")
    ap.add_argument("--latency-only", choices=["strace", "ebpf"], help="the alert latency of this backend only")
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--no-ratios", action="store_true")
    ap.add_argument("--no-per-event", action="store_true")
    ap.add_argument("--shared-workspace", action="store_true",
                    help="untar, compileall and the execs in one directory, the workspace of each (earlier figures)")
    ap.add_argument("--engine-only", action="store_true", help=argparse.SUPPRESS)  # per_event's child
    ap.add_argument("--compare", metavar="DIR", help="another checkout's root: its spyglass measured alongside, "
                    "alternating (ratios and latency)")
    args = ap.parse_args()
    if args.engine_only:
        print(" ".join(f"{x:.3f}" for x in engine_cost()))
        return
    if args.quick:
        args.repeat = min(args.repeat, 2)
        args.trials = min(args.trials, 20)
    load = os.getloadavg()
    print(f"spyglass live path, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, kernel "
          f"{os.uname().release}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
          f"{' (quick)' if args.quick else ''}, code: {REPO}")
    root = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="spyglass-bench-live-", dir=root) as tmp:
        base = Path(tmp)
        env = dict(os.environ, SPYGLASS_STORE=str(base / "store"), PYTHONDONTWRITEBYTECODE="1",
                   PYTHONPATH=str(REPO))
        other = None
        codes = {"this": env}
        for code in [REPO, *([Path(args.compare).resolve()] if args.compare else [])]:
            # as an installed spyglass: its modules compiled (the runs themselves write no bytecode)
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(code / "spyglass")], check=True,
                           stdout=subprocess.DEVNULL)
        if args.compare:
            other = dict(env, PYTHONPATH=str(Path(args.compare).resolve()))
            codes["--compare"] = other
            print(f"--compare: {Path(args.compare).resolve()}")
        if not args.no_ratios:
            ratios(base, args, env, other)
        if not args.no_per_event:
            per_event(base, args)
        if not args.no_latency:
            backends = [args.latency_only] if args.latency_only else ["strace", *(["ebpf"] if args.ebpf else [])]
            for backend in backends:
                latency(base, args, codes, backend)
            for backend in backends if args.sandbox else []:
                latency(base, args, codes, backend, sandbox=True)
    load = os.getloadavg()
    print(f"\nload average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
