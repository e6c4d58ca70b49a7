"""The eBPF consumer's CPU per record, away from the workload's noise.

Each workload runs once under the eBPF backend with ``dump_records`` (the raw
records, in the order the reader decoded them); then the records are decoded
``--repeat`` times by this checkout's decoder (and by ``--baseline DIR``'s, in
a child process, on the same records) and the best time per record is
printed, with the ratio.  ``--profile`` prints cProfile's top functions of
this checkout's decoder for each workload.

    sudo .venv/bin/python benchmarks/bench_decode.py --baseline /tmp/base
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

_LEN = struct.Struct("<I")


def workloads(tmp: Path) -> dict[str, tuple[list[str], Path]]:
    stdlib = Path(os.__file__).parent
    tarball = tmp / "stdlib.tar"
    if not tarball.exists():
        subprocess.run(["tar", "-cf", str(tarball), "--exclude=__pycache__", "--exclude=site-packages",
                        "-C", str(stdlib.parent), stdlib.name], check=True)  # fmt: skip
    untar = tmp / "untar"
    comp = tmp / "comp"
    for d in (untar, comp):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
    subprocess.run(["tar", "-xf", str(tarball), "-C", str(comp)], check=True)
    return {
        "untar": (["tar", "-xf", str(tarball)], untar),
        "find": (["find", "/usr", "-name", "*.py"], tmp),
        "git-status-x5": (["sh", "-c", "for i in 1 2 3 4 5; do git status >/dev/null; done"], REPO),
        "exec-1000": (["sh", "-c", "i=0; while [ $i -lt 1000 ]; do /bin/true; i=$((i+1)); done"], tmp),
        "compileall": ([sys.executable, "-m", "compileall", "-q", "-j1", "."], comp),
    }


def record(argv: list[str], cwd: Path, dump: Path) -> int:
    """Run ``argv`` under eBPF capture, writing its raw records to ``dump``; the lost count."""
    from spyglass.capture.base import LaunchSpec
    from spyglass.capture.ebpf import EbpfBackend

    null = open(os.devnull, "w")  # noqa: SIM115
    spec = LaunchSpec(argv, str(cwd), env=dict(os.environ), options={"dump_records": str(dump)},
                      stdio=(None, null, None))  # fmt: skip
    session = EbpfBackend().start(spec)
    for _ in session.events():
        pass
    null.close()
    return session.result().lost


def load(dump: Path) -> list[bytes]:
    data = dump.read_bytes()
    out: list[bytes] = []
    at = 0
    while at < len(data):
        (n,) = _LEN.unpack_from(data, at)
        out.append(data[at + 4 : at + 4 + n])
        at += 4 + n
    return out


def decode_time(dump: Path, repeat: int) -> tuple[float, int]:
    """Best seconds to decode every record of ``dump`` with a fresh decoder; events made."""
    from spyglass.capture.ebpf.decoder import RecordDecoder

    recs = load(dump)
    best, events = float("inf"), 0
    for _ in range(repeat):
        dec = RecordDecoder(0)
        t0 = time.process_time()
        n = 0
        many = getattr(dec, "feed_many", None)
        if many is not None:  # in steps of 64, as the reader does
            for i in range(0, len(recs), 64):
                out: list[object] = []
                many(recs[i : i + 64], out)
                n += len(out)
        else:
            for r in recs:
                n += len(dec.feed(r))
        best = min(best, time.process_time() - t0)
        events = n
    return best, events


def profile(dump: Path, top: int) -> None:
    from spyglass.capture.ebpf.decoder import RecordDecoder

    recs = load(dump)
    dec = RecordDecoder(0)
    prof = cProfile.Profile()
    prof.enable()
    for r in recs:
        dec.feed(r)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def baseline_time(code: Path, dump: Path, repeat: int) -> float:
    prog = "import json, sys; sys.path.insert(0, sys.argv[3]); import bench_decode as b; "
    prog += "print(json.dumps(b.decode_time(b.Path(sys.argv[1]), int(sys.argv[2]))))"
    env = dict(os.environ, PYTHONPATH=str(code))
    out = subprocess.run([sys.executable, "-c", prog, str(dump), str(repeat), str(REPO / "benchmarks")],
                         env=env, capture_output=True, text=True, check=True, cwd=str(code))  # fmt: skip
    return float(json.loads(out.stdout.strip().splitlines()[-1])[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", help="comma-separated workload name prefixes")
    ap.add_argument("--baseline", type=Path, help="another checkout: its decoder on the same records")
    ap.add_argument("--dumps", type=Path, help="keep the recorded records here (and reuse them on the next run)")
    ap.add_argument("--profile", type=int, metavar="N", help="print the top N functions of this decoder")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-decode-"))
    try:
        for name, (argv, cwd) in workloads(tmp).items():
            if args.only and not any(name.startswith(p) for p in args.only.split(",")):
                continue
            dump = (args.dumps or tmp) / f"{name}.rec"
            lost = record(argv, cwd, dump) if not dump.exists() else 0
            nrec = len(load(dump))
            secs, events = decode_time(dump, args.repeat)
            line = f"{name:14} records {nrec:7d} events {events:7d} lost {lost}  {secs / nrec * 1e6:6.2f} us/record"
            if args.baseline is not None:
                base = baseline_time(args.baseline, dump, args.repeat)
                line += f"  baseline {base / nrec * 1e6:6.2f} us/record  ratio {secs / base:.2f}"
            print(line, flush=True)
            if args.profile:
                profile(dump, args.profile)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    main()
