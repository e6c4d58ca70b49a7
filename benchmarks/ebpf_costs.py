"""The eBPF measurements of ``bench_capture.py``: in-process captures and the program's kernel-side cost.

``timed_ebpf_capture`` times the capture alone (the program loaded beforehand), or with every
event through the pipeline and the full rule pack; ``timed_baseline`` the same with another
checkout's spyglass, in a child process (``bench_capture`` puts that checkout first on the
path when ``SPYGLASS_BENCH_CODE`` names it); ``kernel_cost``, ``kernel_probe`` and
``print_kernel`` the programs' own time, from ``kernel.bpf_stats_enabled``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


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
    with ``rules``, every event also goes through the fast lane and the pipeline with the full rule
    pack (compiled beforehand): the kernel side plus the Python consumer, what ``spyglass run`` does
    per event without its fixed start-up, store and workspace evidence."""
    from spyglass.capture.base import LaunchSpec
    from spyglass.capture.ebpf import EbpfBackend
    from spyglass.pipeline import Pipeline, RunContext
    from spyglass.rules.engine import RuleEngine
    from spyglass.rules.ruleset import load_ruleset

    backend = EbpfBackend()
    backend.preload()
    wait_preload(backend)
    pipe: Pipeline | None = None
    if rules:
        ctx = RunContext(root_cwd=str(cwd), workspace=[str(cwd)], monitor_pids=[os.getpid()])
        engine = RuleEngine(_ruleset(load_ruleset))
        pipe = Pipeline([engine], ctx)
        pipe.start()
        # every event type's functions built before the clock, as `spyglass run` has them from its
        # code cache (compiling them at their first events cost this harness about 45 ms a run)
        warm = getattr(engine, "warm", None)
        if warm is not None:
            warm(lambda: True)
    with _Quiet():
        t0, c0 = time.perf_counter(), time.process_time()
        # with rules, the fast lane on the reader's thread as `spyglass run` wires it
        hooks = {"urgent": pipe.urgent_hook(), "lookout": pipe.urgent_hook("lookout")} if pipe is not None else {}
        session = backend.start(LaunchSpec(argv, str(cwd), env=dict(os.environ), **hooks))
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


def timed_baseline(code: Path, argv: list[str], cwd: Path) -> float:
    """``ebpf+rules`` with another checkout's spyglass (its own eBPF object), in a child process."""
    import json

    prog = "import json, sys; import bench_capture; import ebpf_costs as b; "
    prog += "print(b.timed_ebpf_capture(json.loads(sys.argv[1]), b.Path(sys.argv[2]), rules=True))"
    env = dict(os.environ, SPYGLASS_BENCH_CODE=str(code), PYTHONPATH=str(REPO / "benchmarks"))
    out = subprocess.run(
        [sys.executable, "-c", prog, json.dumps(argv), str(cwd)], env=env, capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def wait_preload(backend: Any) -> None:
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
