#!/usr/bin/env python3
"""Capture overhead: bare command vs raw ``strace --seccomp-bpf`` (same syscall set)
vs ``spyglass run --backend strace`` and ``--backend ebpf`` (end to end: start-up,
capture, rules, store, workspace evidence) vs the bare command while a capture is attached to
another tree (``ebpf-attached``: what the hook costs any process, the floor) vs the eBPF capture alone (in this process,
program loaded beforehand: attach, run, decode every event) vs the eBPF capture with
every event through the pipeline and the full rule pack (``ebpf+rules``: the kernel
side plus the Python consumer, rules on, without the fixed start-up), on the
workloads of the capture notes; plus the eBPF program's kernel-side cost (per
workload, and per untraced system call and per emitted event on controlled loops),
the records the eBPF runs lost, and the strace parser's throughput.
The ``+fd/strace`` column is raw strace with the optional descriptor bookkeeping
calls (dup*/fcntl/close) traced too, against raw strace: what tracking them costs.
"net/bare" columns take off the fixed start-up measured on ``true`` in the same run.
``spyglass run`` is given ``--wait-descendants 0``: like the bare command, the
recording ends when the root process does.

Prints a table of median wall times and ratios measured in the same run, the
modes alternating in a rotating order (these machines are noisy: compare ratios,
not seconds).  The eBPF columns need root; they are left out elsewhere.  Usage:

    .venv/bin/python benchmarks/bench_capture.py [--repeat 3] [--quick] [--only untar,find]
        [--modes sg-ebpf,ebpf+rules]
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
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# SPYGLASS_BENCH_CODE: another checkout's spyglass package (--baseline runs this script's
# functions on it)
sys.path.insert(0, os.environ.get("SPYGLASS_BENCH_CODE") or str(REPO))

from ebpf_costs import (  # noqa: E402
    PER_RECORD,
    kernel_cost,
    kernel_probe,
    print_kernel,
    timed_baseline,
    timed_ebpf_capture,
    wait_preload,
)

from spyglass.capture.strace.backend import strace_command  # noqa: E402

_KEEP: list[object] = []  # servers that must outlive make_workloads (the model stub)


def timed(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _no_cache(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    skip = ("__pycache__", "/test", "site-packages", "dist-packages")
    return None if any(s in info.name for s in skip) else info


def make_workloads(base: Path, quick: bool) -> dict[str, tuple[list[str], Path, Callable[[], None]]]:
    """name -> (argv, cwd, reset-before-each-run)."""
    n_files = 1500 if quick else 4000
    src = base / "src"
    for i in range(n_files):
        d = src / f"d{i % 50}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.txt").write_text(f"file {i}\n" * 4)
    tar_path = base / "stdlib.tar"  # written below: the whole standard library (a part of it with --quick)
    untar_dir = base / "untar"

    def reset_untar() -> None:
        shutil.rmtree(untar_dir, ignore_errors=True)
        untar_dir.mkdir()

    repo = base / "repo"
    shutil.copytree(src, repo)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.email=b@x", "-c", "user.name=b", "commit", "-qm", "x"], cwd=repo, check=True)
    stdlib = base / "stdlib"
    libdir = Path(sysconfig.get_paths()["stdlib"])
    for sub in (
        ["json", "email", "http", "xml", "asyncio"]
        if quick
        else [
            "json",
            "email",
            "http",
            "xml",
            "asyncio",
            "concurrency",
            "importlib",
            "logging",
            "unittest",
            "urllib",
            "sqlite3",
            "multiprocessing",
            "tomllib",
            "wsgiref",
        ]
    ):
        if (libdir / sub).is_dir():
            shutil.copytree(libdir / sub, stdlib / sub, ignore=shutil.ignore_patterns("__pycache__", "test*"))

    with tarfile.open(tar_path, "w") as tf:  # without its tests, caches and installed packages
        tf.add(stdlib if quick else libdir, arcname="stdlib", filter=_no_cache)

    def reset_compile() -> None:
        for p in stdlib.rglob("__pycache__"):
            shutil.rmtree(p, ignore_errors=True)

    (base / "empty").mkdir()
    execs = 300 if quick else 1000
    noop = lambda: None  # noqa: E731
    out: dict[str, tuple[list[str], Path, Callable[[], None]]] = {
        "true (start-up cost)": (["true"], base / "empty", noop),
        "untar": (["tar", "xf", str(tar_path), "-C", str(untar_dir)], base, reset_untar),
        "find": (["find", "/usr", "-name", "*.py"], base, noop),
        "git status x5": (["sh", "-c", "for i in 1 2 3 4 5; do git status -s >/dev/null; done"], repo, noop),
        "compileall": ([sys.executable, "-m", "compileall", "-q", str(stdlib)], base, reset_compile),
        f"{execs} execs": (
            ["sh", "-c", f"i=0; while [ $i -lt {execs} ]; do /bin/true; i=$((i+1)); done"],
            base,
            noop,
        ),
    }
    codex = REPO / ".cache" / "agents" / "node_modules" / ".bin" / "codex"
    if codex.exists():  # a scripted codex session against the model stub on loopback
        from spyglass.agents.model_stub import start_stub
        from spyglass.agents.script import parse_script
        from spyglass.agents.setup import codex_home

        steps = [{"say": "Listing the files.", "run": "ls -la"}, {"say": "Done."}]
        stub = start_stub(parse_script({"model": "spyglass-stub", "steps": steps}))
        _KEEP.append(stub)
        os.environ["CODEX_HOME"] = str(codex_home(base / "codex-home", stub.url))
        ws = base / "codex-ws"
        ws.mkdir()
        # a plain PATH and an empty HOME: codex's shell sources the user's profile, and shims that
        # rehash under a lock (pyenv) would time that (and other users of the lock) instead of codex
        user_home = base / "codex-user"
        user_home.mkdir()
        argv = ["env", f"HOME={user_home}", "PATH=/usr/local/bin:/usr/bin:/bin", str(codex), "exec"]
        argv += ["--skip-git-repo-check"]
        argv += ["--json", "List the files."]
        out["codex session (scripted)"] = (argv, ws, noop)
    return out


def parser_throughput(lines: list[str]) -> float:
    from spyglass.capture.strace.parser import StraceParser

    parser = StraceParser(cwd="/")
    t0 = time.perf_counter()
    n = 0
    for line in lines:
        n += len(parser.feed(line))
    parser.finish()
    dt = time.perf_counter() - t0
    return len(lines) / dt


def timed_attached(argv: list[str], cwd: Path) -> float:
    """The bare workload while a capture is attached to another tree (a ``sleep``): the workload is
    not tracked, so it pays only what the hook costs every process of the machine (the kernel's
    syscall-tracepoint path and the program's first filter). The floor of any capture built on a
    ``sys_exit`` hook, which is all this kernel offers (no fentry, kprobes or LSM: the eBPF notes)."""
    import threading

    from spyglass.capture.base import LaunchSpec
    from spyglass.capture.ebpf import EbpfBackend

    backend = EbpfBackend()
    backend.preload()
    wait_preload(backend)
    session = backend.start(LaunchSpec(["sleep", "600"], str(cwd), env=dict(os.environ)))
    events = session.events()
    drain = threading.Thread(target=lambda: [None for _ in events], daemon=True)
    drain.start()
    try:
        return timed(argv, cwd)
    finally:
        session.kill_tree()
        drain.join(30)


def last_run_capture(store: Path) -> dict[str, object]:
    """The ``capture`` block (lost, lines ...) and event count of the newest run in ``store``."""
    import json

    runs = sorted((store / "runs").iterdir()) if (store / "runs").is_dir() else []
    if not runs:
        return {}
    meta = json.loads((runs[-1] / "run.json").read_text())
    out = dict(meta.get("capture") or {})
    out["events"] = (meta.get("counts") or {}).get("events", 0)
    return out


def _ratio(a: float | None, b: float) -> str:
    return "-" if a is None else f"{a / b:.2f}"


def _secs(a: float | None) -> str:
    return "-" if a is None else f"{a:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smaller workloads (a smoke run)")
    ap.add_argument("--only", help="comma-separated workload name prefixes to run (the start-up row always runs)")
    ap.add_argument(
        "--modes",
        help="comma-separated modes to time (bare is always timed): strace, strace+fd, sg-strace, sg-ebpf, "
        "ebpf-attached, ebpf-capture, ebpf+rules; default all",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        help="another checkout (e.g. `git archive main`, its eBPF object built): adds sg-ebpf@base and "
        "ebpf+rules@base, the same measures with its code, in the same run",
    )
    args = ap.parse_args()
    from spyglass.capture.ebpf.probe import static_problem

    ebpf_problem = static_problem()
    wanted_modes = set(args.modes.split(",")) if args.modes else None
    # the bare command ends when its root process does: so does the recording here (spyglass's
    # default grace for descendants that outlive the root is not a cost of capturing)
    sg_run = [sys.executable, "-m", "spyglass", "run", "-q", "--wait-descendants", "0"]
    lost: dict[str, int] = {}  # workload -> most records lost in any eBPF capture of it
    with tempfile.TemporaryDirectory(prefix="spyglass-bench-") as tmp:
        base = Path(tmp)
        workloads = make_workloads(base, args.quick)
        if args.only:
            wanted = ("true", *args.only.split(","))
            workloads = {k: v for k, v in workloads.items() if k.startswith(wanted)}
        store = base / "store"
        trace_out = base / "trace.txt"
        env = dict(os.environ, SPYGLASS_STORE=str(store), PYTHONDONTWRITEBYTECODE="1")
        rows = []
        cpu_rows: list[tuple[str, dict[str, float]]] = []
        kernel: list[tuple[str, int, dict[str, tuple[int, int]]]] = []
        for name, (argv, cwd, reset) in workloads.items():

            def sg_ebpf(argv: list[str] = argv, cwd: Path = cwd, name: str = name) -> float:
                dt = timed([*sg_run, "--backend", "ebpf", "--", *argv], cwd, env)
                n = int(str(last_run_capture(store).get("lost", 0)))
                lost[name] = max(lost.get(name, 0), n)
                return dt

            modes: dict[str, Callable[[], float]] = {
                "bare": lambda argv=argv, cwd=cwd: timed(argv, cwd),
                "strace": lambda argv=argv, cwd=cwd: timed(strace_command(str(trace_out), argv), cwd),
                "strace+fd": lambda argv=argv, cwd=cwd: timed(
                    strace_command(str(trace_out), argv, fd_tracking=True), cwd
                ),
                "sg-strace": lambda argv=argv, cwd=cwd: timed([*sg_run, "--backend", "strace", "--", *argv], cwd, env),
            }
            if ebpf_problem is None:
                modes["sg-ebpf"] = sg_ebpf
                modes["ebpf-attached"] = lambda argv=argv, cwd=cwd: timed_attached(argv, cwd)
                modes["ebpf-capture"] = lambda argv=argv, cwd=cwd: timed_ebpf_capture(argv, cwd)
                modes["ebpf+rules"] = lambda argv=argv, cwd=cwd: timed_ebpf_capture(argv, cwd, rules=True)
            if ebpf_problem is None and args.baseline is not None:
                base_env = dict(env, PYTHONPATH=str(args.baseline.resolve()))
                modes["sg-ebpf@base"] = lambda argv=argv, cwd=cwd, e=base_env: timed(
                    [*sg_run, "--backend", "ebpf", "--", *argv], cwd, e
                )
                modes["ebpf+rules@base"] = lambda argv=argv, cwd=cwd: timed_baseline(args.baseline.resolve(), argv, cwd)
            if wanted_modes is not None:
                modes = {m: f for m, f in modes.items() if m == "bare" or m.split("@")[0] in wanted_modes}
            times: dict[str, list[float]] = {m: [] for m in modes}
            order = list(modes)
            for i in range(args.repeat):
                for mode in order[i % len(order) :] + order[: i % len(order)]:  # rotating order
                    reset()
                    times[mode].append(modes[mode]())
            med = {m: statistics.median(v) for m, v in times.items()}
            rows.append((name, med))
            cpu_rows.append((name, {m: statistics.median(v) for m, v in PER_RECORD.items()}))
            PER_RECORD.clear()
            if ebpf_problem is None:
                reset()
                n, st, n_lost = kernel_cost(argv, cwd)
                lost[name] = max(lost.get(name, 0), n_lost)
                kernel.append((name, n, st))
            print(f"  {name}: done", file=sys.stderr, flush=True)
        rate = 0.0
        lines: list[str] = []
        if "untar" in workloads and (wanted_modes is None or "strace" in wanted_modes):
            argv, cwd, reset = workloads["untar"]  # parser throughput on the raw trace of a file-heavy workload
            reset()
            timed(strace_command(str(trace_out), argv), cwd)
            lines = trace_out.read_text(errors="surrogateescape").splitlines()
            lines = (lines * max(1, 200_000 // max(1, len(lines))))[:200_000]
            rate = parser_throughput(lines)
        probe = kernel_probe(base) if ebpf_problem is None else None

    print(
        f"\nspyglass capture overhead, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, kernel "
        f"{os.uname().release}, load average {os.getloadavg()[0]:.1f}, median of {args.repeat}"
        f"{' (quick)' if args.quick else ''}\n"
    )
    print_table(rows, lost)
    if any(per for _, per in cpu_rows):
        print("\nconsumer CPU per record (this process: start, reader, decoder, rules, stop; median):")
        for name, per in cpu_rows:
            if per:
                print(f"  {name:16}" + "".join(f"  {m} {v * 1e6:6.1f} us" for m, v in sorted(per.items())))
    if ebpf_problem is not None:
        print(f"\n(no eBPF column: {ebpf_problem[0]})")
    if kernel:
        print_kernel(kernel)
    if probe is not None:
        per_call, rel, ab, n = probe
        print(
            f"\nkernel side on controlled loops: {per_call:.0f} ns per untraced system call (one hook, nothing"
            f" emitted;\n any process of the machine pays it while a capture runs); per emitted event beyond that:"
            f" {rel:.0f} ns\n for an open by a relative name (working directory walked), {ab:.0f} ns by an absolute"
            f" path ({n} events)"
        )
    if rate:
        print(f"\nparser throughput: {rate:,.0f} strace lines/s ({len(lines):,} lines of an untar trace)")


def print_table(rows: list[tuple[str, dict[str, float]]], lost: dict[str, int]) -> None:
    """The wall-time table; "net" columns take off the fixed start-up of ``spyglass run`` (its
    time on ``true`` minus bare ``true``, same run), leaving what recording the workload costs."""
    start = next((med for name, med in rows if name.startswith("true")), None)

    def startup(mode: str) -> float:
        return 0.0 if start is None or mode not in start else start[mode] - start["bare"]

    modes = ["strace", "sg-strace", "sg-ebpf", "sg-ebpf@base", "ebpf-attached", "ebpf-capture", "ebpf+rules"]
    modes.append("ebpf+rules@base")
    modes = [m for m in modes if any(m in med for _, med in rows)]
    head = "| workload | bare s |" + "".join(f" {m} s |" for m in modes)
    head += "".join(f" {m}/bare |" for m in modes)
    net = [m for m in ("sg-strace", "sg-ebpf@base", "sg-ebpf", "ebpf+rules@base", "ebpf+rules") if m in modes]
    head += "".join(f" {m} net/bare |" for m in net)
    with_lost = bool(lost) and any("ebpf" in m for m in modes)
    if with_lost:
        head += " ebpf lost |"
    fd = any("strace+fd" in med and "strace" in med for _, med in rows)
    if fd:
        head += " +fd/strace |"
    print(head)
    print("|---" + "|---:" * (head.count("|") - 2) + "|")
    for name, med in rows:
        b = med["bare"]
        line = f"| {name} | {b:.3f} |" + "".join(f" {_secs(med.get(m))} |" for m in modes)
        line += "".join(f" {_ratio(med.get(m), b)} |" for m in modes)
        for m in net:
            v = med.get(m)
            line += " - |" if v is None or name.startswith("true") else f" {(v - startup(m)) / b:.2f} |"
        if with_lost:
            line += f" {lost.get(name, 0)} |"
        if fd:
            line += f" {med['strace+fd'] / med['strace']:.2f} |"
        print(line)
    if start is not None:
        fixed = ", ".join(f"{m} {startup(m):.3f} s" for m in net)
        if fixed:
            print(f"(net: minus the fixed start-up measured on `true` in this run: {fixed})")


if __name__ == "__main__":
    main()
