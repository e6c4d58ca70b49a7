"""The recorded terminal in the HTML report, in headless Chromium (offline): lines and events in step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spyglass.report.browser import CHROMIUM_ARGS, chromium_path
from spyglass.report.html import render_html
from spyglass.store import RunReader, Store


@pytest.mark.slow
def test_terminal_section_follows_the_timeline(spy: Any, store_dir: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    if chromium_path() is None:
        pytest.skip("chromium is not installed (apt-get install chromium; scripts/setup.sh does it)")
    from playwright.sync_api import sync_playwright

    monkeypatch.chdir(tmp_path)
    script = (
        "echo first line; sleep 0.6; echo second line; sleep 0.6; cat /etc/hostname >/dev/null; sleep 0.6; echo third"
    )
    assert spy("run", "-q", "--record-tty", "--", "sh", "-c", script).exit_code == 0
    store = Store(store_dir)
    reader = RunReader(store, store.resolve("latest"))
    out = render_html(reader, tmp_path / "r.html")
    requests: list[str] = []
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_page()
            page.on("request", lambda r: requests.append(r.url))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(out.resolve().as_uri())
            page.wait_for_selector("#term[data-ready='1']")
            lines = page.locator("#term .tl")
            texts = [lines.nth(i).inner_text() for i in range(lines.count())]
            assert any("first line" in t for t in texts) and any("third" in t for t in texts)
            # the line printed while /etc/hostname was read lists that event
            second = page.locator("#term .tl", has_text="second line")
            second.click()
            assert "hostname" in page.locator("#term .evs").inner_text()
            # an event in the timeline finds its line
            page.select_option("#f-type", "type:file.read")
            page.fill("#f-text", "/etc/hostname")
            page.locator("#tl-body tr").first.locator("td").first.click()
            assert "second line" in page.locator("#term .tl.sel").inner_text()
        finally:
            browser.close()
    assert requests == [out.resolve().as_uri()] and errors == []
