"""The HTML report as a reviewer sees it: opened in headless Chromium, offline, clicked through.

Screenshots land in test-artifacts/report/.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from spyglass.report.html import render_compare_html, render_html
from spyglass.store import RunReader, Store

SECTIONS = ("#summary", "#alerts", "#processes", "#timeline", "#graph", "#files", "#network", "#evidence")


def _rows(page: Any) -> int:
    return int(page.locator("#tl-body tr").count())


def _assert_offline_and_clean(log: Any, url: str) -> None:
    assert log.requests == [url], f"the page fetched something: {log.requests}"
    assert log.console_errors == [], log.console_errors
    assert log.page_errors == [], log.page_errors


def test_demo_report_in_chromium(
    demo_run: tuple[RunReader, str], tmp_path: Path, artifacts: Path, chromium: Callable[..., Any]
) -> None:
    reader, origin = demo_run
    out = render_html(reader, tmp_path / "report.html")
    url = out.resolve().as_uri()
    alert = sorted(
        reader.alerts(), key=lambda a: -["info", "low", "medium", "high", "critical"].index(a.level)
    )[0]
    with chromium(url) as (page, log):
        page.wait_for_selector("body[data-ready='1']")
        for sel in SECTIONS:
            assert page.locator(sel).is_visible(), sel
        page.screenshot(path=str(artifacts / f"{origin}-full.png"), full_page=True)

        # the alert, its lineage and the event that fired it
        card = page.locator("article.alert").first
        assert alert.title in card.inner_text()
        assert card.locator(".lineage li").count() >= 2
        # root first, the offender last
        assert card.locator(".lineage li").last.inner_text().split()[0] == str(alert.pid)
        assert card.locator("table.fired tbody tr, table.fired tr").count() >= 2
        page.locator("#alerts").screenshot(path=str(artifacts / f"{origin}-alerts.png"))

        # the process tree: collapse everything, then open the root and one process's details
        page.click("#tree-collapse")
        root = page.locator("#tree ul.root > li.node").first
        children = root.locator(":scope > ul > li")
        assert children.count() == 0 or not children.first.is_visible()
        root.locator(":scope > .row > .tog").click()
        assert root.locator(":scope > .row > .tog").get_attribute("aria-expanded") == "true"
        assert children.first.is_visible()
        children.first.locator(":scope > .row .label").click()
        assert children.first.locator(":scope > .details").is_visible()
        page.locator("#processes").screenshot(path=str(artifacts / f"{origin}-processes.png"))

        # the timeline: filter by type, by path, by process
        everything = _rows(page)
        assert everything > 0
        page.select_option("#f-type", "type:process.exec")
        execs = _rows(page)
        assert 0 < execs < everything
        types = page.locator("#tl-body tr td:nth-child(4)").all_inner_texts()
        assert set(types) == {"process.exec"}
        page.click("#f-clear")
        assert _rows(page) == everything
        page.fill("#f-text", ".ssh/id_rsa")
        hits = page.locator("#tl-body tr").all_inner_texts()
        assert hits and all(".ssh/id_rsa" in h for h in hits)
        assert page.locator("#tl-body tr.hit").count() >= 1
        page.locator("#timeline").screenshot(path=str(artifacts / f"{origin}-timeline.png"))
        page.click("#f-clear")
        page.locator("article.alert .show-pid").first.click()
        assert page.input_value("#f-pid") == str(alert.pid)
        pids = set(page.locator("#tl-body tr td:nth-child(3)").all_inner_texts())
        assert pids == {str(alert.pid)}

        # the behaviour graph, with the alert's resource marked
        graph = page.locator("#graph svg.graph")
        assert graph.is_visible()
        assert page.locator("#graph g.leaf").count() >= 3
        assert page.locator("#graph g.leaf.alert").count() >= 1
        page.locator("#graph").screenshot(path=str(artifacts / f"{origin}-graph.png"))
        _assert_offline_and_clean(log, url)


def test_compare_report_in_chromium(
    tmp_path: Path, artifacts: Path, chromium: Callable[..., Any], sample_module: ModuleType
) -> None:
    sample = sample_module
    store = Store(tmp_path / "store", create=True)
    ids = [
        sample.build_sample_run(store, tmp_path / "a", task="summarise-csv"),
        sample.build_sample_run(store, tmp_path / "a", task="summarise-csv", scale=2),
        sample.build_sample_run(store, tmp_path / "b", task="other-task", scale=3),
    ]
    out = render_compare_html([RunReader(store, i) for i in ids], tmp_path / "compare.html")
    url = out.resolve().as_uri()
    with chromium(url) as (page, log):
        heat = page.locator("table.heat[data-kind='combined']")
        assert heat.is_visible()
        assert heat.locator("td.cell:not(.margin)").count() == 9
        assert "summarise-csv" in page.locator("#tasks").inner_text()
        page.screenshot(path=str(artifacts / "compare.png"), full_page=True)
        _assert_offline_and_clean(log, url)
