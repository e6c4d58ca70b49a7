"""Every figure of the performance issue's table in one run, against its target.

Runs the scripts that measure each row, each as a child, in this order, and prints their own
output as it comes, then one table of the rows with the target and whether it is met:

* start-up: ``bench_startup.py --repeat N --json`` (``spyglass run -q -- true`` over the bare command,
  per backend);
* the live ratios and the alert latency: ``bench_live.py --repeat R --trials T --no-per-event``
  (``--ebpf`` when this is root): ``spyglass run -q --backend strace`` over raw strace with the same
  flags on the untar, ``git status`` x5, ``compileall`` and 1000 execs, the eBPF run over the bare
  command, records lost, and the p99 from a secret read to its alert line, idle and under a burst
  of new files;
* replay and check: ``bench_pipeline.py --events E`` (a synthetic run replayed through the store,
  agent awareness and the rules; ``spyglass check`` of it; peak RSS).

Every ratio is taken within its own script's run, the modes alternating (these machines are
noisy).  ``--quick`` is a smoke run (fewer rounds, 200,000 events): its figures are not the ones
to quote.  Usage:

    .venv/bin/python benchmarks/bench_targets.py [--quick] [--repeat 11] [--live-repeat 3]
                                                 [--trials 40] [--events 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: issue 19's targets
START_TARGET = 0.10
RATIO_TARGET = 1.10
RATE_TARGET = 500_000
RSS_TARGET = 150.0
P99_TARGET = 50.0


def _child(argv: list[str]) -> str:
    """Run a benchmark script, echo its output as it comes, and return it."""
    print(f"\n$ {' '.join(argv[1:])}", flush=True)
    proc = subprocess.Popen([sys.executable, *argv[1:]], cwd=HERE.parent, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        if not line.startswith("{"):  # a script's JSON is for this one
            sys.stdout.write(line)
            sys.stdout.flush()
        lines.append(line)
    if proc.wait() != 0:
        print(f"(exited {proc.returncode})", flush=True)
    return "".join(lines)


def startup(repeat: int) -> list[tuple[str, str, str, bool | None]]:
    out = _child([sys.executable, str(HERE / "bench_startup.py"), "--repeat", str(repeat), "--json"])
    rows: list[tuple[str, str, str, bool | None]] = []
    doc = next((json.loads(line) for line in reversed(out.splitlines()) if line.startswith("{")), None)
    if doc is None:
        return [("start-up", "no figures", f"<= {START_TARGET:.2f} s over bare", None)]
    walls = doc["wall"]
    bare = sorted(walls["true"])[len(walls["true"]) // 2]
    for mode in ("run ebpf", "run strace"):
        if mode in walls:
            ws = sorted(walls[mode])
            over = ws[len(ws) // 2] - bare
            rows.append((f"`spyglass run -q -- true`, {mode.split()[1]}", f"{over:.3f} s over bare",
                         f"<= {START_TARGET:.2f} s", over <= START_TARGET))
    return rows


_TABLE_ROW = re.compile(r"^\| (?P<name>[^|]+?) \| (?P<cells>.*)\|$")


def live(repeat: int, trials: int, quick: bool) -> list[tuple[str, str, str, bool | None]]:
    ebpf = os.geteuid() == 0
    argv = [sys.executable, str(HERE / "bench_live.py"), "--repeat", str(repeat), "--trials", str(trials),
            "--no-per-event", *(["--ebpf"] if ebpf else []), *(["--quick"] if quick else [])]
    out = _child(argv)
    rows: list[tuple[str, str, str, bool | None]] = []
    header: list[str] = []
    section = ""
    for line in out.splitlines():
        if line.startswith("alert latency, "):  # "alert latency, strace: secret read -> ..."
            section = line[len("alert latency, "):].split(" ->")[0]
        if line.startswith("| workload") or line.startswith("| load"):
            header = [c.strip() for c in line.strip("|").split("|")]
            continue
        m = _TABLE_ROW.match(line)
        if not m or line.startswith("|---") or not header:
            continue
        cells = [m["name"].strip(), *(c.strip() for c in m["cells"].split("|"))]
        cell = dict(zip(header, cells, strict=False))
        if header[0] == "workload":
            if "sg strace / strace" in cell:
                ratio = float(cell["sg strace / strace"].rstrip("x"))
                rows.append((f"{cell['workload']}: sg strace / raw strace", f"{ratio:.2f}x",
                             f"<= {RATIO_TARGET:.2f}x", ratio <= RATIO_TARGET))
            if "sg ebpf / bare" in cell:
                ratio = float(cell["sg ebpf / bare"].rstrip("x"))
                rows.append((f"{cell['workload']}: sg ebpf / bare", f"{ratio:.2f}x ({cell.get('lost', '?')} lost)",
                             "0 lost, near bare", None))
        elif header[0] == "load" and cell.get("p99 ms", "-") != "-":
            p99 = float(cell["p99 ms"])
            met = p99 <= P99_TARGET if cell["load"] == "burst" else None
            rows.append((f"alert latency p99, {section}, {cell['load']}",
                         f"{p99:.1f} ms", f"<= {P99_TARGET:.0f} ms under bursts", met))
    return rows


_RATE = re.compile(r"^\s+(?P<what>replay \(store, awareness, rules\)|spyglass check)\s+(?P<rate>[\d.]+)k events/s"
                   r".*peak RSS\s+(?P<rss>[\d.]+) MB")


def replay(events: int) -> list[tuple[str, str, str, bool | None]]:
    out = _child([sys.executable, str(HERE / "bench_pipeline.py"), "--events", str(events)])
    rows: list[tuple[str, str, str, bool | None]] = []
    for line in out.splitlines():
        m = _RATE.match(line)
        if m:
            rate, rss = float(m["rate"]) * 1000, float(m["rss"])
            rows.append((f"{m['what']}, {events:,} events", f"{rate / 1000:.1f}k events/s, {rss:.0f} MB",
                         f">= {RATE_TARGET // 1000}k events/s, <= {RSS_TARGET:.0f} MB",
                         rate >= RATE_TARGET and rss <= RSS_TARGET))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run: 3 start-up rounds, 1 live round, "
                    "10 latency trials, 200,000 events")
    ap.add_argument("--repeat", type=int, default=11, help="start-up rounds")
    ap.add_argument("--live-repeat", type=int, default=3, help="live rounds per workload")
    ap.add_argument("--trials", type=int, default=40, help="alert latency trials per load")
    ap.add_argument("--events", type=int, default=1_000_000, help="events of the synthetic run replayed")
    args = ap.parse_args()
    if args.quick:
        args.repeat, args.live_repeat, args.trials, args.events = 3, 1, 10, 200_000
    load = os.getloadavg()
    started = time.time()
    print(f"performance targets, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
          f"kernel {os.uname().release}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    rows = [*startup(args.repeat), *live(args.live_repeat, args.trials, args.quick), *replay(args.events)]
    load = os.getloadavg()
    print(f"\nperformance targets: every row ({time.time() - started:.0f} s; load average at the end "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f})\n")
    print("| what | now | target | met |")
    print("|---|---|---|---|")
    for what, now, target, met in rows:
        print(f"| {what} | {now} | {target} | {'-' if met is None else 'yes' if met else 'NO'} |")
    missed = sum(1 for *_, met in rows if met is False)
    print(f"\n{missed} of {sum(1 for *_, met in rows if met is not None)} targets not met")


if __name__ == "__main__":
    main()
