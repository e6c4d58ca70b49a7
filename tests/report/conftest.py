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

from spyglass.store import RunReader, Store

HERE = Path(__file__).resolve().parent
ARTIFACTS = HERE.parent.parent / "test-artifacts" / "report"

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


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
        browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
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


def _demo_backend_works() -> bool:
    if shutil.which("strace") is None:
        return False
    try:
        import spyglass.capture.strace.backend  # noqa: F401
    except ImportError:
        return False
    return True


def _with_offline_alerts(store: Store, reader: RunReader) -> RunReader | None:
    """The demo's events re-recorded with the alerts the rule pack raises over them
    (for as long as `spyglass demo` does not run the rule engine live)."""
    try:
        from spyglass.pipeline import Pipeline, RunContext
        from spyglass.policy import load_policy
        from spyglass.rules.replay import check_run
        from spyglass.rules.ruleset import load_ruleset
        from spyglass.store import RunWriter, new_run_id

        policy = load_policy(None, reader.meta.cwd)
        alerts = check_run(reader, load_ruleset(policy), policy)
    except Exception:
        return None
    if not alerts:
        return None
    import msgspec

    meta = msgspec.structs.replace(reader.meta, id=new_run_id(), status="running", counts={})
    writer = RunWriter(store, meta)
    pipe = Pipeline([writer], RunContext(run_id=meta.id, meta={"run": meta}))
    for ev in reader.events():
        pipe.feed(ev, renumber=False)
    for a in alerts:
        writer.alert(a)
    writer.finish("complete", exit_code=reader.meta.exit_code)
    return RunReader(store, meta.id)


@pytest.fixture
def demo_run(tmp_path: Path, spy: Any, store_dir: Path) -> tuple[RunReader, str]:
    """The bundled demo recorded live when the strace backend works here, else the sample run.

    Returns the reader and where the run came from ("demo" or "sample")."""
    if _demo_backend_works():
        res = spy("demo", "--dir", str(tmp_path / "demo"))
        if res.exit_code == 0:
            store = Store(store_dir)
            reader = RunReader(store, store.resolve("latest"))
            if reader.alerts():
                return reader, "demo"
            again = _with_offline_alerts(store, reader)
            if again is not None:
                return again, "demo"
    store = Store(tmp_path / "sample-store", create=True)
    rid = load_sample_module().build_sample_run(store, tmp_path / "sample")
    return RunReader(store, rid), "sample"
