"""Evidence benchmarks: verify throughput, manifest time on a tree of N files, gate time, and the
workspace evidence's finish (after-manifest, diff, files written) with the before-manifest's hashes
kept for unchanged files against every file read again (medians, modes alternating).

``runs`` (with ``--baseline DIR``, another checkout, e.g. an export of main): real ``spyglass run -q
--backend strace`` in a workspace of ``--files`` files, this code and the baseline's alternating, for
three agents (``true``: nothing changes; ``edit``: 1% of the files get a line; ``untar``: 1000 new
files); medians of the wall time and of the phase marks (``SPYGLASS_PHASES``) that hold the workspace
evidence: ``sinks start`` (the before-listing) and ``finish: sinks`` (after-manifest, diff, writes).

    .venv/bin/python benchmarks/bench_evidence.py [--events 200000] [--files 20000]
        [--only verify,manifest,threads,newlines,finish,runs] [--baseline DIR] [--repeat 5]

Prints one line per figure.  Everything runs in a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from spyglass.events import Event
from spyglass.evidence.gate import run_gate
from spyglass.evidence.hashmemo import RACY_MARGIN_NS
from spyglass.evidence.manifest import ManifestOptions, build_manifest
from spyglass.evidence.verify import verify_run
from spyglass.evidence.workspace import WorkspaceEvidence
from spyglass.pipeline import Pipeline, RunContext
from spyglass.store import RunMeta, RunReader, RunWriter, Store, new_run_id

REPO = Path(__file__).resolve().parent.parent


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


def _make_tree(tree: Path, n_files: int, per_dir: int = 100) -> None:
    for i in range(n_files):
        d = tree / f"pkg{i // per_dir:04d}"
        if i % per_dir == 0:
            d.mkdir(parents=True)
        (d / f"mod{i % per_dir:03d}.py").write_text(f"# module {i}\n" + "x = 1\n" * (i % 40))


def kept_sizes(sizes: list[int]) -> Callable[[str, bytes], None]:
    return lambda path, content: sizes.append(len(content))


def bench_manifest(root: Path, n_files: int) -> None:
    tree = root / "tree"
    _make_tree(tree, n_files)
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


def _finish_once(root: Path, tree: Path, keep: bool, changed: list[Path], tag: str) -> tuple[float, float, int]:
    """One sink around an "agent" that edits ``changed``: (wall s, CPU s) of done(), hashes kept."""
    ctx = RunContext(run_id="bench", root_cwd=str(tree), workspace=[str(tree)])
    sink = WorkspaceEvidence(evidence_dir=root / f"ev-{tag}", keep_hashes=keep)
    sink.start(ctx)
    if sink._hasher is not None:
        sink._hasher.join()
    for p in changed:
        p.write_text(p.read_text() + "y = 2\n")
    t0, c0 = time.perf_counter(), time.process_time()
    sink.done(ctx)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert sink.changes is not None and len(sink.changes.modified) == len(changed)
    return wall, cpu, sink._memo.reused if sink._memo is not None else 0


def bench_finish(root: Path, n_files: int, repeat: int) -> None:
    tree = root / "ws"
    _make_tree(tree, n_files)
    # a workspace's files are older than the racy margin (files changed just before the run are read again)
    time.sleep(RACY_MARGIN_NS / 1e9 + 0.1)
    files = sorted(tree.rglob("*.py"))
    changed = files[:: 100]
    got: dict[bool, list[tuple[float, float, int]]] = {True: [], False: []}
    for i in range(repeat):
        for keep in (True, False) if i % 2 == 0 else (False, True):
            got[keep].append(_finish_once(root, tree, keep, changed, f"{i}-{keep}"))
    med = {k: (statistics.median(v[0] for v in rows), statistics.median(v[1] for v in rows)) for k, rows in got.items()}
    print(f"workspace evidence finish, {n_files} files, {len(changed)} changed (median of {repeat}): "
          f"every file read again {med[False][0]:.3f}s wall / {med[False][1]:.3f}s CPU; "
          f"unchanged files keep their hashes ({got[True][-1][2]} kept) {med[True][0]:.3f}s / {med[True][1]:.3f}s "
          f"= {med[True][0] / med[False][0]:.2f}x wall, {med[True][1] / max(med[False][1], 1e-9):.2f}x CPU")


def _phases(path: Path) -> dict[str, float]:
    """The duration of each phase of the one run that wrote ``path`` (s)."""
    marks = json.loads(path.read_text().splitlines()[-1])["marks"]
    return {name: t - prev for (name, t), (_, prev) in zip(marks[1:], marks, strict=False)}


def bench_runs(root: Path, n_files: int, repeat: int, baseline: Path | None) -> None:
    ws = root / "runs-ws"
    _make_tree(ws, n_files)
    tar = root / "new.tar"
    with tarfile.open(tar, "w") as tf:
        tf.add(ws / "pkg0000", arcname="pkg0000")
        for p in sorted(ws.iterdir())[1:10]:
            tf.add(p, arcname=p.name)
    edits = " ".join(str(p) for p in sorted(ws.rglob("*.py"))[::100])
    def nothing() -> None:
        pass

    def empty_new() -> None:
        shutil.rmtree(ws / "new", ignore_errors=True)
        (ws / "new").mkdir()

    agents: dict[str, tuple[list[str], Callable[[], None]]] = {
        "true": (["true"], nothing),
        "edit 1%": (["sh", "-c", f"for f in {edits}; do echo '# edit' >> $f; done"], nothing),
        "untar 1000": (["tar", "xf", str(tar), "-C", str(ws / "new")], empty_new),
    }
    time.sleep(RACY_MARGIN_NS / 1e9 + 0.1)  # a workspace's files are older than the racy margin
    codes = {"this": str(REPO)} | ({"base": str(baseline.resolve())} if baseline is not None else {})
    for code in codes.values():  # as installed: compiled (with PYTHONDONTWRITEBYTECODE set, an export of
        # a checkout would compile every module at every start, and only its runs would pay for it)
        subprocess.run([sys.executable, "-m", "compileall", "-q", f"{code}/spyglass"], check=True,
                       stdout=subprocess.DEVNULL)
    print(f"\nspyglass run -q --backend strace in a workspace of {n_files} files (medians of {repeat}; s)")
    print("| agent | code | wall | sinks start | finish: sinks |")
    print("|---|---|---:|---:|---:|")
    for name, (argv, reset) in agents.items():
        got: dict[str, list[tuple[float, float, float]]] = {c: [] for c in codes}
        for i in range(repeat):
            order = list(codes) if i % 2 == 0 else list(reversed(codes))
            for code in order:
                reset()
                marks = root / f"phases-{code}.jsonl"
                marks.unlink(missing_ok=True)
                env = dict(os.environ, PYTHONPATH=codes[code], SPYGLASS_PHASES=str(marks))
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "spyglass", "run", "-q", "--backend", "strace",
                                "--store", str(root / f"store-{code}"), "--", *argv],
                               cwd=ws, env=env, check=True, stdout=subprocess.DEVNULL)
                wall = time.perf_counter() - t0
                ph = _phases(marks)
                got[code].append((wall, ph.get("sinks start", 0.0), ph.get("finish: sinks", 0.0)))
        med = {c: [statistics.median(r[k] for r in rows) for k in range(3)] for c, rows in got.items()}
        for code, (wall, start, finish) in med.items():
            ratio = ""
            if code == "this" and "base" in med:
                b = med["base"]
                ratio = f" ({wall / b[0]:.2f}x / {start / b[1]:.2f}x / {finish / b[2]:.2f}x of base)"
            print(f"| {name} | {code} | {wall:.3f} | {start:.3f} | {finish:.3f}{ratio} |")


def bench_threads(root: Path, repeat: int) -> None:
    """The after-manifest's hashing threads (files of ``manifest._POOL_MIN`` bytes and more) against
    the walk hashing every file itself (``_WORKERS = 1``), alternating, on 200 files of 0.3-0.5 MB
    and 2000 of 2 KB; medians of wall and CPU time."""
    from spyglass.evidence import manifest

    tree = root / "mixed"
    tree.mkdir()
    for i in range(200):
        (tree / f"big{i:03d}.bin").write_bytes(os.urandom(300_000 + i * 1000))
    for i in range(2000):
        (tree / f"small{i:04d}.txt").write_text(f"line {i}\n" * 200)
    size = sum(f.stat().st_size for f in tree.iterdir())
    workers, threshold = manifest._WORKERS, manifest._POOL_MIN
    # (threads, smallest file handed to them): as shipped, the walk alone, every file to the threads
    modes = {"threads": (workers, threshold), "alone": (1, threshold), "every file": (workers, 0)}
    times: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
    try:
        for _ in range(repeat):
            for mode, (manifest._WORKERS, manifest._POOL_MIN) in modes.items():
                t0, c0 = time.perf_counter(), time.process_time()
                build_manifest([tree], ManifestOptions(keep_text_max=0), keeper=None)
                times[mode].append((time.perf_counter() - t0, time.process_time() - c0))
    finally:
        manifest._WORKERS, manifest._POOL_MIN = workers, threshold
    med = {m: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for m, v in times.items()}
    alone = med["alone"][0]
    print(f"manifest of 2200 files, {size / 1e6:.0f} MB (median of {repeat}): "
          + "; ".join(f"{m} {w:.3f}s wall / {c:.3f}s CPU = {w / alone:.2f}x" for m, (w, c) in med.items())
          + f" ({workers} threads, files of {threshold >> 10} KiB and more)")


def bench_newlines(repeat: int) -> None:
    """``changes.only_newlines`` against the regular expression it replaced, on the standard
    library's sources (what a diff of added files asks of each)."""
    import re
    import sysconfig

    from spyglass.evidence.changes import only_newlines

    old = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
    lib = Path(sysconfig.get_paths()["stdlib"])
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(lib.glob("*.py"))]
    size = sum(map(len, texts))
    best: dict[str, float] = {}
    for _ in range(repeat):
        for name, fn in (("regex", lambda t: old.search(t) is None), ("only_newlines", only_newlines)):
            t0 = time.perf_counter()
            found = [fn(t) for t in texts]
            best[name] = min(best.get(name, 1e9), time.perf_counter() - t0)
            assert found == [old.search(t) is None for t in texts]
    print(f"line breaks of {len(texts)} source files, {size / 1e6:.1f} M characters (best of {repeat}): "
          f"regex {best['regex'] * 1000:.2f} ms, only_newlines {best['only_newlines'] * 1000:.3f} ms = "
          f"{best['regex'] / best['only_newlines']:.0f}x faster")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5, help="runs of each finish mode")
    ap.add_argument("--only", help="comma-separated: verify (and gate), manifest (and threads, newlines), "
                    "threads, newlines, finish, runs")
    ap.add_argument("--baseline", type=Path, help="another checkout to compare with (runs)")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else {"verify", "manifest", "finish", "runs"}
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="spyglass-bench-") as d:
        root = Path(d)
        if "verify" in only:
            reader = bench_verify(root, args.events)
            bench_gate(reader)
        if "manifest" in only:
            bench_manifest(root, args.files)
        if "threads" in only or "manifest" in only:
            bench_threads(root, args.repeat)
        if "newlines" in only or "manifest" in only:
            bench_newlines(args.repeat)
        if "finish" in only:
            bench_finish(root, args.files, args.repeat)
        if "runs" in only:
            bench_runs(root, args.files, args.repeat, args.baseline)


if __name__ == "__main__":
    main()
