#!/usr/bin/env python3
"""Capture overhead: bare command vs raw ``strace --seccomp-bpf`` (same syscall set)
vs ``spyglass run``, on the workloads of the capture notes, plus parser throughput.
The ``strace +fd`` column is raw strace with the optional descriptor bookkeeping
calls (dup*/fcntl/close) traced too: ``+fd/strace`` is what tracking them costs.

Prints a table of median wall times and ratios measured in the same run (these
machines are noisy: compare ratios, not seconds).  Usage:

    .venv/bin/python benchmarks/bench_capture.py [--repeat 3] [--quick]
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
sys.path.insert(0, str(REPO))

from spyglass.capture.strace.backend import strace_command  # noqa: E402


def timed(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def make_workloads(base: Path, quick: bool) -> dict[str, tuple[list[str], Path, Callable[[], None]]]:
    """name -> (argv, cwd, reset-before-each-run)."""
    n_files = 1500 if quick else 4000
    src = base / "src"
    for i in range(n_files):
        d = src / f"d{i % 50}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.txt").write_text(f"file {i}\n" * 4)
    tar_path = base / "files.tar"
    with tarfile.open(tar_path, "w") as tf:
        tf.add(src, arcname="src")
    untar_dir = base / "untar"

    def reset_untar() -> None:
        shutil.rmtree(untar_dir, ignore_errors=True)
        untar_dir.mkdir()

    repo = base / "repo"
    shutil.copytree(src, repo)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(
        ["git", "-c", "user.email=b@x", "-c", "user.name=b", "commit", "-qm", "x"], cwd=repo, check=True
    )
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

    def reset_compile() -> None:
        for p in stdlib.rglob("__pycache__"):
            shutil.rmtree(p, ignore_errors=True)

    (base / "empty").mkdir()
    execs = 300 if quick else 1000
    noop = lambda: None  # noqa: E731
    return {
        "true (start-up cost)": (["true"], base / "empty", noop),
        "untar": (["tar", "xf", str(tar_path), "-C", str(untar_dir)], base, reset_untar),
        "find": (["find", "/usr/lib", "-name", "*.so*"], base, noop),
        "git status x5": (["sh", "-c", "for i in 1 2 3 4 5; do git status -s >/dev/null; done"], repo, noop),
        "compileall": ([sys.executable, "-m", "compileall", "-q", str(stdlib)], base, reset_compile),
        f"{execs} execs": (
            ["sh", "-c", f"i=0; while [ $i -lt {execs} ]; do /bin/true; i=$((i+1)); done"],
            base,
            noop,
        ),
    }


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smaller workloads (a smoke run)")
    args = ap.parse_args()
    spyglass = [sys.executable, "-m", "spyglass"]
    with tempfile.TemporaryDirectory(prefix="spyglass-bench-") as tmp:
        base = Path(tmp)
        workloads = make_workloads(base, args.quick)
        store = base / "store"
        trace_out = base / "trace.txt"
        env = dict(os.environ, SPYGLASS_STORE=str(store), PYTHONDONTWRITEBYTECODE="1")
        rows = []
        for name, (argv, cwd, reset) in workloads.items():
            modes: dict[str, Callable[[], float]] = {
                "bare": lambda argv=argv, cwd=cwd: timed(argv, cwd),
                "strace": lambda argv=argv, cwd=cwd: timed(strace_command(str(trace_out), argv), cwd),
                "strace +fd": lambda argv=argv, cwd=cwd: timed(
                    strace_command(str(trace_out), argv, fd_tracking=True), cwd
                ),
                "spyglass": lambda argv=argv, cwd=cwd: timed([*spyglass, "run", "-q", "--", *argv], cwd, env),
            }
            times: dict[str, list[float]] = {m: [] for m in modes}
            for _ in range(args.repeat):
                for mode, fn in modes.items():  # interleaved, so drift hits all modes alike
                    reset()
                    times[mode].append(fn())
            med = {m: statistics.median(v) for m, v in times.items()}
            rows.append((name, med))
            print(f"  {name}: done", file=sys.stderr, flush=True)
        # parser throughput on the last raw trace of a file-heavy workload
        argv, cwd, reset = workloads["untar"]
        reset()
        timed(strace_command(str(trace_out), argv), cwd)
        lines = trace_out.read_text(errors="surrogateescape").splitlines()
        lines = (lines * max(1, 200_000 // max(1, len(lines))))[:200_000]
        rate = parser_throughput(lines)

    print(
        f"\nspyglass capture overhead, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, "
        f"median of {args.repeat}{' (quick)' if args.quick else ''}\n"
    )
    print(
        "| workload | bare s | strace s | spyglass s | strace/bare | spyglass/bare | spyglass/strace "
        "| strace +fd/bare | +fd/strace |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, med in rows:
        print(
            f"| {name} | {med['bare']:.3f} | {med['strace']:.3f} | {med['spyglass']:.3f} | "
            f"{med['strace'] / med['bare']:.2f} | {med['spyglass'] / med['bare']:.2f} | "
            f"{med['spyglass'] / med['strace']:.2f} | {med['strace +fd'] / med['bare']:.2f} | "
            f"{med['strace +fd'] / med['strace']:.2f} |"
        )
    print(f"\nparser throughput: {rate:,.0f} strace lines/s ({len(lines):,} lines of an untar trace)")


if __name__ == "__main__":
    main()
