#!/usr/bin/env python3
"""How long an agent that kills spyglass goes on running before the watchdog kills it.

Each round runs ``spyglass run --backend B -- sh -c AGENT`` in a fresh HOME and
workspace (the default store, no flags), where the agent kills spyglass (its
parent) with SIGKILL at its first step and then appends a timestamp to a file,
as fast as ``date`` can, until it is killed.  From the file and the watchdog's
note (``monitor-lost.json``) it prints, per backend, medians and maxima of:

* ``ran``: the agent's last timestamp minus its first (how long it ran after
  the kill, give or take one ``date``);
* ``noticed``: the note's time (when the watchdog found spyglass gone) minus
  the agent's first timestamp (negative: noticed before the first ``date`` ran);

and how many rounds left the agent running (a failure: the watchdog must kill
it) or left no final note.  With ``--baseline DIR`` (an export of another
checkout, its BPF object built) the same rounds run with that checkout's
package too, alternating.  Usage:

    .venv/bin/python benchmarks/bench_monitor_death.py [--rounds 10] [--backends ebpf,strace] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spyglass.capture.procfs import running as _alive  # noqa: E402

AGENT = "kill -KILL $PPID; echo $$ > agent.pid; while :; do date +%s%N >> ts; done"


def one(code: Path, backend: str) -> tuple[float | None, float | None, str]:
    """(ran ms, noticed ms, problem) of one round."""
    base = Path(tempfile.mkdtemp(prefix="spyglass-bench-death-"))
    try:
        ws, home = base / "ws", base / "home"
        ws.mkdir()
        home.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPYGLASS_")}
        env.update(HOME=str(home), PYTHONPATH=str(code))
        subprocess.run([sys.executable, "-m", "spyglass", "run", "--backend", backend, "--", "sh", "-c", AGENT],
                       cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120,
                       check=False, start_new_session=True)  # fmt: skip
        pid_file = ws / "agent.pid"
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = int(pid_file.read_text()) if pid_file.exists() else 0
        while pid and _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid and _alive(pid):
            os.kill(pid, signal.SIGKILL)
            return None, None, "left running"
        notes = list(home.glob(".local/state/spyglass/runs/*/monitor-lost.json"))
        while (not notes or not json.loads(notes[0].read_text()).get("final")) and time.monotonic() < deadline:
            time.sleep(0.05)
            notes = list(home.glob(".local/state/spyglass/runs/*/monitor-lost.json"))
        if not notes:
            return None, None, "no note"
        stamps = [int(x) for x in (ws / "ts").read_text().split()] if (ws / "ts").exists() else []
        if not stamps:
            return 0.0, None, ""  # killed before its first date
        noted = int(json.loads(notes[0].read_text())["ts"])
        return (stamps[-1] - stamps[0]) / 1e6, (noted - stamps[0]) / 1e6, ""
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--backends", default="ebpf,strace")
    ap.add_argument("--baseline", type=Path, help="another checkout's export, run alternately")
    args = ap.parse_args()
    codes = {"this": REPO, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    load = os.getloadavg()
    print(f"agent killing spyglass at its first step, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{os.cpu_count()} CPUs, load average {load[0]:.2f}, {args.rounds} rounds per mode")  # fmt: skip
    results: dict[tuple[str, str], list[tuple[float | None, float | None, str]]] = {}
    for i in range(args.rounds):
        for backend in args.backends.split(","):
            for name, code in codes.items():
                results.setdefault((name, backend), []).append(one(code, backend))
        print(f"  round {i + 1}/{args.rounds} done", file=sys.stderr)
    print(f"{'mode':<20} {'ran ms (median / max)':>24} {'noticed ms (median)':>21} {'left running':>13} {'no note':>8}")
    for (name, backend), rows in results.items():
        ran = [r for r, _, p in rows if r is not None and not p]
        noticed = [n for _, n, p in rows if n is not None and not p]
        left = sum(p == "left running" for _, _, p in rows)
        none = sum(p == "no note" for _, _, p in rows)
        ran_s = f"{statistics.median(ran):.1f} / {max(ran):.1f}" if ran else "-"
        noticed_s = f"{statistics.median(noticed):.1f}" if noticed else "-"
        print(f"{name + ' ' + backend:<20} {ran_s:>24} {noticed_s:>21} {left:>13} {none:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
