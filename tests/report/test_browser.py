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

SECTIONS = ("#summary", "#alerts", "#overview", "#processes", "#timeline", "#graph", "#files", "#network", "#evidence")


def _rows(page: Any) -> int:
    return int(page.locator("#tl-body tr").count())


def _in_viewport(page: Any, loc: Any, *, part: bool = False) -> bool:
    """LOC is on the current screen (bounding boxes are relative to the viewport); PART: its top is."""
    box = loc.bounding_box()
    height = page.viewport_size["height"]
    return box is not None and 0 <= box["y"] < height and (part or box["y"] + box["height"] <= height)


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
        # the first screen leads with the verdict and the alert cards
        verdict = page.locator("#verdict")
        assert verdict.is_visible() and _in_viewport(page, verdict)
        text = verdict.inner_text()
        assert "ALERTS" in text.upper() and "GATE" in text.upper() and "EVIDENCE" in text.upper()
        assert alert.level in text
        first_card = page.locator("article.alert").first
        assert _in_viewport(page, first_card, part=True)
        page.screenshot(path=str(artifacts / f"{origin}-first-screen.png"))
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
        # "show in timeline" jumps to the alert's event and marks it
        button = page.locator("article.alert .show-pid").first
        seq = button.get_attribute("data-seq")
        button.click()
        focus = page.locator("#tl-body tr.focus")
        assert focus.count() == 1 and focus.get_attribute("data-seq") == seq
        assert focus.is_visible() and _in_viewport(page, focus)
        # a process id in the timeline still filters by process
        page.click("#f-clear")
        page.locator("#tl-body .pidlink").first.click()
        pid = page.input_value("#f-pid")
        assert set(page.locator("#tl-body tr td:nth-child(3)").all_inner_texts()) == {pid}

        # failed lookups (opens of files not there) are folded until asked for
        page.click("#f-clear")
        folded = _rows(page)
        page.check("#f-noise")
        assert _rows(page) >= folded
        page.click("#f-clear")
        errnos = page.locator("#tl-body tr td:nth-child(5) .err").all_inner_texts()
        assert not any(e.strip() in ("ENOENT", "ENOTDIR") and "file.read" in r
                       for e, r in zip(errnos, page.locator("#tl-body tr").all_inner_texts(), strict=False))

        # diffs are single-spaced: each line starts where the one above ends
        page.locator("#files details.change").evaluate_all("ds => ds.forEach(d => d.open = true)")
        diff_lines = page.locator("#files pre.diff span")
        assert diff_lines.count() >= 2
        a, b = diff_lines.nth(0).bounding_box(), diff_lines.nth(1).bounding_box()
        assert a and b and abs(b["y"] - (a["y"] + a["height"])) < 2, (a, b)
        # the failed lookups are there, folded: the switch brings them back
        page.click("#f-clear")
        before = _rows(page)
        page.check("#f-noise")
        page.fill("#f-text", "")
        assert page.locator("#tl-body tr", has_text="ENOENT").count() > 0
        page.uncheck("#f-noise")
        assert _rows(page) == before

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
