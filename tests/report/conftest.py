"""Fixtures for the report tests: a stored demo-like run, and the demo itself where it can run."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from spyglass.report.browser import CHROMIUM_ARGS, chromium_path
from spyglass.store import RunReader, Store

HERE = Path(__file__).resolve().parent
ARTIFACTS = HERE.parent.parent / "test-artifacts" / "report"



@dataclass
class PageLog:
    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)


@contextmanager
def open_page(url: str, width: int = 1280, height: int = 900) -> Iterator[tuple[Any, PageLog]]:
    """A page at ``url`` in headless Chromium, with every request and console error logged."""
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    if exe is None:
        raise RuntimeError("chromium is not installed (apt-get install chromium)")
    log = PageLog()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on("request", lambda r: log.requests.append(r.url))
            page.on("console", lambda m: log.console_errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: log.page_errors.append(str(e)))
            page.goto(url)
            yield page, log
        finally:
            browser.close()


@pytest.fixture
def chromium() -> Callable[..., Any]:
    """``open_page(url)`` for headless Chromium; skips the test when chromium is not installed."""
    if chromium_path() is None:
        pytest.skip("chromium is not installed (apt-get install chromium; scripts/setup.sh does it)")
    return open_page


@pytest.fixture
def sample_module() -> ModuleType:
    return load_sample_module()


def load_sample_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spyglass_sample_run", HERE / "sample_run.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def sample_run(tmp_path: Path) -> RunReader:
    """A hand-made run shaped like the demo: a skill script reads ~/.ssh/id_rsa (one high alert)."""
    store = Store(tmp_path / "store", create=True)
    rid = load_sample_module().build_sample_run(store, tmp_path / "demo")
    return RunReader(store, rid)


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def demo_run(tmp_path: Path, spy: Any, store_dir: Path) -> tuple[RunReader, str]:
    """The bundled demo recorded live (with its alerts) where strace is installed, else the sample run.

    Returns the reader and where the run came from ("demo" or "sample")."""
    if shutil.which("strace") is not None:
        res = spy("demo", "--dir", str(tmp_path / "demo"))
        assert res.exit_code == 0, res.output
        store = Store(store_dir)
        reader = RunReader(store, store.resolve("latest"))
        assert reader.alerts(), "the demo raised no alert"
        return reader, "demo"
    store = Store(tmp_path / "sample-store", create=True)
    rid = load_sample_module().build_sample_run(store, tmp_path / "sample")
    return RunReader(store, rid), "sample"
