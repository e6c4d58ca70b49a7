"""Headless Chromium for the UI tests (the same offline launcher as the report's tests)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from spyglass.report.browser import CHROMIUM_ARGS, chromium_path


@dataclass
class PageLog:
    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)


@contextmanager
def open_browser() -> Iterator[tuple[Any, PageLog]]:
    """A browser context whose pages log every request and error into one PageLog."""
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    assert exe is not None
    log = PageLog()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=list(CHROMIUM_ARGS))
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.on("request", lambda r: log.requests.append(r.url))
            context.on("console", lambda m: log.console_errors.append(m.text) if m.type == "error" else None)
            context.on("weberror", lambda e: log.page_errors.append(str(e.error)))
            yield context, log
        finally:
            browser.close()


@pytest.fixture
def browser() -> Callable[..., Any]:
    if chromium_path() is None:
        pytest.skip("chromium is not installed (apt-get install chromium; scripts/setup.sh does it)")
    return open_browser
