#!/usr/bin/env python3
"""HTML report of a large run: build time, file size, and time until the page is
interactive in headless Chromium.

Records a demo-shaped run with about ``--events`` events (the sample run of
tests/report, its skill script repeated), renders its report, then opens the
file in Debian's chromium and waits for the report's script to finish
drawing (``body[data-ready]``).  Prints one line per figure.  Usage:

    .venv/bin/python benchmarks/bench_report.py [--events 100000] [--repeat 3] [--no-browser]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spyglass.report.browser import CHROMIUM_ARGS, chromium_path  # noqa: E402
from spyglass.report.collect import collect_run  # noqa: E402
from spyglass.report.html import render_html, render_html_text  # noqa: E402
from spyglass.store import RunReader, Store  # noqa: E402

EVENTS_PER_SCALE = 23  # events one repetition of the sample's skill script adds


def _sample_module() -> object:
    spec = importlib.util.spec_from_file_location("sample_run", REPO / "tests" / "report" / "sample_run.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _browser_times(path: Path, repeat: int) -> tuple[float, float, int]:
    """(median ms until interactive from navigation start, median ms for load, DOM nodes)."""
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    if exe is None:
        raise SystemExit("chromium is not installed: apt-get install chromium (or pass --no-browser)")
    ready: list[float] = []
    loaded: list[float] = []
    nodes = 0
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=list(CHROMIUM_ARGS))
        errors: list[str] = []
        try:
            for _ in range(repeat):
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(path.resolve().as_uri())
                page.wait_for_selector("body[data-ready='1']", timeout=120_000)
                t = page.evaluate(
                    "() => { const n = performance.getEntriesByType('navigation')[0];"
                    " return [performance.now(), n.loadEventEnd,"
                    " document.getElementsByTagName('*').length]; }"
                )
                ready.append(float(t[0]))
                loaded.append(float(t[1]))
                nodes = int(t[2])
                if errors:
                    raise SystemExit(f"page errors: {errors}")
                page.close()
        finally:
            browser.close()
    return statistics.median(ready), statistics.median(loaded), nodes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-events", type=int, default=3000, help="timeline events embedded in the report")
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the temporary store and report")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="spyglass-bench-report-"))
    try:
        store = Store(tmp / "store", create=True)
        sample = _sample_module()
        t = time.perf_counter()
        rid = sample.build_sample_run(  # type: ignore[attr-defined]
            store, tmp / "demo", scale=max(1, args.events // EVENTS_PER_SCALE)
        )
        t_record = time.perf_counter() - t
        reader = RunReader(store, rid)
        n = reader.meta.counts["events"]
        size_jsonl = reader.events_path.stat().st_size
        print(
            f"run: {n:,} events, {len(reader.alerts())} alerts, events.jsonl {size_jsonl / 2**20:.1f} MiB "
            f"(recorded in {t_record:.1f} s)"
        )

        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            data = collect_run(reader, max_events=args.max_events)
            t_collect = time.perf_counter() - t
            t = time.perf_counter()
            render_html_text(data)
            times.append((t_collect, time.perf_counter() - t))
        out = render_html(reader, tmp / "report.html", max_events=args.max_events)
        size = out.stat().st_size
        tc = statistics.median(x[0] for x in times)
        tr = statistics.median(x[1] for x in times)
        print(f"build: read + digest + profile + verify {tc:.2f} s, render {tr:.3f} s  ({n / tc:,.0f} events/s)")
        print(
            f"report: {size / 1024:.0f} KiB, {len(data.timeline.events):,} timeline events embedded, "
            f"{len(data.digest.procs.procs):,} processes in the run"
        )
        if not args.no_browser:
            ready, loaded, nodes = _browser_times(out, args.repeat)
            print(
                f"chromium: interactive {ready:.0f} ms after navigation start (load event {loaded:.0f} ms), "
                f"{nodes:,} DOM elements; median of {args.repeat}"
            )
        if args.keep:
            print(f"kept: {tmp}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
