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
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# SPYGLASS_BENCH_CODE: another checkout's spyglass package (--baseline runs this script's
# functions on it)
sys.path.insert(0, os.environ.get("SPYGLASS_BENCH_CODE") or str(REPO))

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


class _Quiet:
    """fd 1 to /dev/null while a workload runs in this process's capture (find prints every match)."""

    def __enter__(self) -> None:
        self.saved = os.dup(1)
        self.null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(self.null, 1)

    def __exit__(self, *exc: object) -> None:
        os.dup2(self.saved, 1)
        os.close(self.saved)
        os.close(self.null)


def timed_ebpf_capture(argv: list[str], cwd: Path, rules: bool = False) -> float:
    """The eBPF capture alone (program loaded beforehand): attach, run, decode every event, detach;
    with ``rules``, every event also goes through the pipeline and the full rule pack (compiled
    beforehand): the kernel side plus the Python consumer, what ``spyglass run`` does per event
    without its fixed start-up, store and workspace evidence."""
    from spyglass.capture.base import LaunchSpec
    from spyglass.capture.ebpf import EbpfBackend
    from spyglass.pipeline import Pipeline, RunContext
    from spyglass.rules.engine import RuleEngine
    from spyglass.rules.ruleset import load_ruleset

    backend = EbpfBackend()
    backend.preload()
    _wait_preload(backend)
    pipe: Pipeline | None = None
    if rules:
        ctx = RunContext(root_cwd=str(cwd), workspace=[str(cwd)], monitor_pids=[os.getpid()])
        pipe = Pipeline([RuleEngine(_ruleset(load_ruleset))], ctx)
        pipe.start()
    with _Quiet():
        t0, c0 = time.perf_counter(), time.process_time()
        session = backend.start(LaunchSpec(argv, str(cwd), env=dict(os.environ)))
        if pipe is None:
            for _ in session.events():
                pass
        else:
            feed = pipe.feed
            for ev in session.events():
                feed(ev)
            pipe.done()
        dt = time.perf_counter() - t0
        CONSUMER_CPU.append(time.process_time() - c0)
        records = getattr(getattr(session, "decoder", None), "records", 0)
        PER_RECORD.setdefault("ebpf+rules" if rules else "ebpf-capture", []).append(
            CONSUMER_CPU[-1] / max(1, records)
        )
    return dt


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
    _wait_preload(backend)
    session = backend.start(LaunchSpec(["sleep", "600"], str(cwd), env=dict(os.environ)))
    events = session.events()
    drain = threading.Thread(target=lambda: [None for _ in events], daemon=True)
    drain.start()
    try:
        return timed(argv, cwd)
    finally:
        session.kill_tree()
        drain.join(30)


def timed_baseline(code: Path, argv: list[str], cwd: Path) -> float:
    """``ebpf+rules`` with another checkout's spyglass (its own eBPF object), in a child process."""
    import json

    prog = "import json, sys; import bench_capture as b; "
    prog += "print(b.timed_ebpf_capture(json.loads(sys.argv[1]), b.Path(sys.argv[2]), rules=True))"
    env = dict(os.environ, SPYGLASS_BENCH_CODE=str(code), PYTHONPATH=str(REPO / "benchmarks"))
    out = subprocess.run(
        [sys.executable, "-c", prog, json.dumps(argv), str(cwd)], env=env, capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def _wait_preload(backend: Any) -> None:
    """The program loaded before the clock starts (older checkouts keep the load on the backend)."""
    thread = getattr(backend, "_preload", None)
    if thread is not None:
        thread.join()
        return
    try:
        from spyglass.capture.ebpf import preload
    except ImportError:
        return
    while preload.pending():
        time.sleep(0.005)


_RULES: list[object] = []
CONSUMER_CPU: list[float] = []  # CPU seconds of this process (reader, decoder, rules) per in-process capture
#: mode -> CPU seconds of this process per record decoded, per in-process capture (reset per workload)
PER_RECORD: dict[str, list[float]] = {}


def _ruleset(load: Callable[[], object]) -> Any:
    if not _RULES:
        _RULES.append(load())
    return _RULES[0]


def kernel_cost(argv: list[str], cwd: Path) -> tuple[int, dict[str, tuple[int, int]], int]:
    """Events, per-program (run_time_ns, run_cnt) and lost records of one eBPF capture
    (kernel.bpf_stats_enabled on)."""
    from spyglass.capture.base import LaunchSpec
    from spyglass.capture.ebpf import EbpfBackend

    stats = Path("/proc/sys/kernel/bpf_stats_enabled")
    old = stats.read_text().strip()
    stats.write_text("1")
    try:
        with _Quiet():
            spec = LaunchSpec(argv, str(cwd), options={"kernel_stats": True}, env=dict(os.environ))
            session = EbpfBackend().start(spec)
            n = sum(1 for _ in session.events())
    finally:
        stats.write_text(old)
    return n, session.kernel_stats, session.result().lost


def kernel_probe(base: Path) -> tuple[float, float, float, int]:
    """The kernel side on two controlled loops (one capture each, kernel.bpf_stats_enabled on):
    200k ``getppid`` calls (not reported: what every untraced system call of the machine pays)
    and 20k opens of a file by a relative name (reported, with the working directory walked).
    Returns (ns per untraced call, ns per emitted event with a walk, ns per absolute-path open
    event, events of the open loop)."""
    d = base / "kprobe"
    d.mkdir(exist_ok=True)
    (d / "f.txt").write_text("x")
    loops = {
        "untraced": "import os\nfor _ in range(200_000): os.getppid()",
        "relative": "import os\nfor _ in range(20_000): os.close(os.open('f.txt', os.O_RDONLY))",
        "absolute": f"import os\nfor _ in range(20_000): os.close(os.open({str(d / 'f.txt')!r}, os.O_RDONLY))",
    }
    got: dict[str, tuple[int, dict[str, tuple[int, int]], int]] = {}
    for name, code in loops.items():
        got[name] = kernel_cost([sys.executable, "-c", code], d)
    _, st, _ = got["untraced"]
    ns, calls = st.get("sys_exit", (0, 0))
    per_call = ns / max(1, calls)

    def per_event(name: str) -> tuple[float, int]:
        n, st, _ = got[name]
        total = sum(v[0] for v in st.values())
        hook_calls = sum(st.get(p, (0, 0))[1] for p in ("sys_enter", "sys_exit"))
        return max(0.0, total - hook_calls * per_call) / max(1, n), n

    rel, n = per_event("relative")
    ab, _ = per_event("absolute")
    return per_call, rel, ab, n


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


def print_kernel(kernel: list[tuple[str, int, dict[str, tuple[int, int]]]]) -> None:
    print("\neBPF kernel side (kernel.bpf_stats_enabled=1, one capture per workload; the counters add ~20 ns a run)")
    print("| workload | events | hook calls | ns per hook call | all programs ns | ns per emitted event |")
    print("|---|---:|---:|---:|---:|---:|")
    # the baseline: a hook call that emits nothing (the start-up row: almost all of its calls
    # are other processes' untraced syscalls)
    base_name, _, base_st = next((k for k in kernel if k[0].startswith("true")), kernel[0])
    base_calls = sum(base_st.get(p, (0, 0))[1] for p in ("sys_enter", "sys_exit"))
    base_ns = sum(base_st.get(p, (0, 0))[0] for p in ("sys_enter", "sys_exit")) / max(1, base_calls)
    for name, n, st in kernel:
        calls = sum(st.get(p, (0, 0))[1] for p in ("sys_enter", "sys_exit"))
        hook_ns = sum(st.get(p, (0, 0))[0] for p in ("sys_enter", "sys_exit"))
        total = sum(v[0] for v in st.values())
        beyond = max(0.0, total - calls * base_ns) / max(1, n)
        print(f"| {name} | {n} | {calls:,} | {hook_ns / max(1, calls):.0f} | {total:,} | {beyond:.0f} |")
    print(f"(the baseline, {base_name!r} row: {base_ns:.0f} ns per hook call, almost all of them other processes'")
    print(" syscalls; the last column is the rest of the programs' time per emitted event; 0 when it is lost in")
    print(" the baseline's noise: see the controlled loops below)")


if __name__ == "__main__":
    main()
