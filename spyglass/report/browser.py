"""Headless Chromium for looking at reports: the system browser with flags that
keep it offline (no background networking, updates or sync).

Used by the report's browser tests, ``scripts/screenshot.py`` and
``benchmarks/bench_report.py``; Playwright drives it, and never downloads a
browser of its own.
"""

from __future__ import annotations

import shutil

CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium_path() -> str | None:
    """Debian's Chromium, if installed."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None
