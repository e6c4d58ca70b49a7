#!/usr/bin/env python3
"""Regenerate docs/report.png, the README's picture of the HTML report.

Records the bundled demo (``spyglass demo``, strace backend) into a temporary
store, writes its HTML report, opens it in headless Chromium (Debian's
``chromium`` package) and saves the top of the page: summary, alerts and
process tree.  ``--sample`` uses the hand-made demo-shaped run of the tests
instead (for machines where strace cannot trace).  Usage:

    .venv/bin/python scripts/screenshot.py [--sample] [--out docs/report.png] [--keep]
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from spyglass.report.browser import CHROMIUM_ARGS, chromium_path  # noqa: E402
from spyglass.store import RunReader, Store  # noqa: E402


def _sample_run(tmp: Path) -> RunReader:
    spec = importlib.util.spec_from_file_location("sample_run", REPO / "tests" / "report" / "sample_run.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    store = Store(tmp / "store", create=True)
    return RunReader(store, mod.build_sample_run(store, tmp / "demo"))


def _demo_run(tmp: Path) -> RunReader:
    store_dir = tmp / "store"
    proc = subprocess.run(
        [sys.executable, "-m", "spyglass", "demo", "--store", str(store_dir), "--dir", str(tmp / "demo")],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"spyglass demo failed (exit {proc.returncode}):\n{proc.stderr}\nTry --sample.")
    store = Store(store_dir)
    return RunReader(store, store.resolve("latest"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "report.png")
    ap.add_argument("--sample", action="store_true", help="use the hand-made demo-shaped run")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--keep", action="store_true", help="keep the temporary store and report.html")
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright

    from spyglass.report.html import render_html

    exe = chromium_path()
    if exe is None:
        raise SystemExit("chromium is not installed: apt-get install chromium")
    tmp = Path(tempfile.mkdtemp(prefix="spyglass-screenshot-"))
    try:
        reader = _sample_run(tmp) if args.sample else _demo_run(tmp)
        report = render_html(reader, tmp / "report.html")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe, args=list(CHROMIUM_ARGS))
            try:
                page = browser.new_page(viewport={"width": args.width, "height": 900})
                page.goto(report.resolve().as_uri())
                page.wait_for_selector("body[data-ready='1']")
                box = page.locator("#processes").bounding_box()
                assert box is not None
                height = int(box["y"] + box["height"] + 16)
                page.screenshot(
                    path=str(args.out),
                    clip={"x": 0, "y": 0, "width": args.width, "height": height},
                    full_page=True,
                )
            finally:
                browser.close()
        print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KiB) from run {reader.id}")
        if args.keep:
            print(f"kept: {tmp}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
