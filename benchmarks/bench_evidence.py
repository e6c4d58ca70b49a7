"""Evidence benchmarks: verify throughput, manifest time on a tree of N files, gate time.

    .venv/bin/python benchmarks/bench_evidence.py [--events 200000] [--files 20000]

Prints one line per figure.  Everything runs in a temporary directory.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from spyglass.events import Event
from spyglass.evidence.gate import run_gate
from spyglass.evidence.manifest import ManifestOptions, build_manifest
from spyglass.evidence.verify import verify_run
from spyglass.pipeline import Pipeline, RunContext
from spyglass.store import RunMeta, RunReader, RunWriter, Store, new_run_id


def _events(n: int) -> list[Event]:
    out: list[Event] = []
    pid = 1000
    for i in range(n):
        k = i % 50
        if k == 0:
            pid += 1
            out.append(Event(type="process.start", pid=pid, ppid=1000))
        elif k == 1:
            argv = ["python3", "-m", "pytest", "-q"] if i % 1000 == 1 else ["sh", "-c", f"step {i}"]
            out.append(Event(type="process.exec", pid=pid, exe="/usr/bin/python3", argv=argv, cwd="/ws"))
        elif k == 49:
            out.append(Event(type="process.exit", pid=pid, exit_code=0))
        elif k % 7 == 0:
            out.append(Event(type="file.write", pid=pid, path=f"/ws/src/mod{i % 300}.py", flags="O_WRONLY"))
        else:
            out.append(
                Event(
                    type="file.read",
                    pid=pid,
                    path=f"/usr/lib/python3.11/m{i % 900}.py",
                    flags="O_RDONLY|O_CLOEXEC",
                )
            )
    return out


def bench_verify(root: Path, n: int) -> RunReader:
    store = Store(root / "store", create=True)
    meta = RunMeta(id=new_run_id(), command=["bench"], cwd="/ws", workspace=["/ws"], started=1)
    events = _events(n)
    w = RunWriter(store, meta)
    p = Pipeline([w], RunContext(run_id=meta.id))
    t0 = time.perf_counter()
    for e in events:
        p.feed(e)
    w.finish()
    t_write = time.perf_counter() - t0
    size = (store.run_dir(meta.id) / "events.jsonl").stat().st_size
    t0 = time.perf_counter()
    res = verify_run(store.run_dir(meta.id))
    t_verify = time.perf_counter() - t0
    assert res.status == "verified", res.problems
    print(f"write (pipeline + chained store): {n} events in {t_write:.2f}s = {n / t_write:,.0f} events/s")
    print(
        f"verify: {n} events ({size / 1e6:.1f} MB) in {t_verify:.2f}s = {n / t_verify:,.0f} events/s, "
        f"{size / 1e6 / t_verify:.0f} MB/s"
    )
    return RunReader(store, meta.id)


def bench_gate(reader: RunReader) -> None:
    t0 = time.perf_counter()
    res = run_gate(
        reader,
        [
            "tests-passed-after-last-edit",
            "no-writes-outside-workspace",
            "evidence-verified",
            "workspace-changed",
            "no-alerts-at-or-above=high",
        ],
    )
    dt = time.perf_counter() - t0
    n = reader.meta.counts.get("events", 0)
    print(
        f"gate (5 requirements, one events pass + verify): {n} events in {dt:.2f}s = {n / dt:,.0f} events/s"
        f" [{'pass' if res.passed else 'fail'}]"
    )


def kept_sizes(sizes: list[int]) -> Callable[[str, bytes], None]:
    return lambda path, content: sizes.append(len(content))


def bench_manifest(root: Path, n_files: int) -> None:
    tree = root / "tree"
    per_dir = 100
    for i in range(n_files):
        d = tree / f"pkg{i // per_dir:04d}"
        if i % per_dir == 0:
            d.mkdir(parents=True)
        (d / f"mod{i % per_dir:03d}.py").write_text(f"# module {i}\n" + "x = 1\n" * (i % 40))
    total = sum(f.stat().st_size for f in tree.rglob("*") if f.is_file())
    for label, keep in (("hash only", 0), ("hash + keep text for diffs", 262144)):
        kept: list[int] = []
        t0 = time.perf_counter()
        m, _ = build_manifest(
            [tree],
            ManifestOptions(keep_text_max=keep),
            keeper=kept_sizes(kept) if keep else None,
        )
        dt = time.perf_counter() - t0
        print(
            f"manifest ({label}): {len(m.files)} files, {total / 1e6:.1f} MB in {dt:.2f}s = "
            f"{len(m.files) / dt:,.0f} files/s"
        )
    big = tree / "big.bin"
    with big.open("wb") as f:
        f.write(os.urandom(1 << 20) * 256)
    t0 = time.perf_counter()
    build_manifest([tree], ManifestOptions(excludes=["pkg*/**"]))
    dt = time.perf_counter() - t0
    print(f"manifest hashing throughput: 256 MB file in {dt:.2f}s = {256 / dt:.0f} MB/s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--files", type=int, default=20_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="spyglass-bench-") as d:
        root = Path(d)
        reader = bench_verify(root, args.events)
        bench_gate(reader)
        bench_manifest(root, args.files)


if __name__ == "__main__":
    main()
