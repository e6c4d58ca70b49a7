"""The UI's pages: the run list, and the HTML report of a run made live.

Both use the HTML report's stylesheet and its alert card markup; the run
page *is* the report (``spyglass.report.html``), with a content security
policy that lets it reach this server and a small script that shows new
alerts and counts as they arrive and reloads into the final report when the
run ends.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

from spyglass.report.describe import format_ts
from spyglass.report.html import _asset, html_report_bytes
from spyglass.store import RunReader

_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
    "connect-src 'self'"
)
_REPORT_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
)





@cache
def _ui_asset(name: str) -> str:
    return resources.files("spyglass.web").joinpath("static").joinpath(name).read_text(encoding="utf-8")


def _e(v: Any) -> str:
    return html.escape("-" if v is None else str(v))


def runs_page(rows: Sequence[dict[str, Any]], filters: dict[str, str], token: str, levels: Sequence[str]) -> str:
    query = "".join(f"&{k}={html.escape(v)}" for k, v in filters.items())
    body_rows = []
    for r in rows:
        lv = f' <span class="badge lv-{_e(r["max_level"])}">{_e(r["max_level"])}</span>' if r["max_level"] else ""
        top = f' <code class="rule">{_e(r["top_alert"]["rule_id"])}</code>' if r["top_alert"] else ""
        body_rows.append(
            f'<tr data-run="{_e(r["id"])}" data-status="{_e(r["status"])}">'
            f'<td><a href="/run/{_e(r["id"])}?token={_e(token)}">{_e(r["id"])}</a></td>'
            f'<td><span class="pill st-{_e(r["status"])}">{_e(r["status"])}</span></td>'
            f'<td>{_e(r["agent_id"])}</td><td>{_e(r["task"])}</td><td class="r">{_e(r["events"])}</td>'
            f'<td class="alerts">{_e(r["alerts"])}{lv}{top}</td>'
            f'<td class="cmd"><code>{_e(r["command"])}</code></td></tr>'
        )

    def field(name: str, label: str) -> str:
        return f'<label>{label}<input name="{name}" value="{html.escape(filters.get(name, ""))}"></label>'

    status_opts = "".join(
        f'<option{" selected" if filters.get("status") == s else ""}>{s}</option>'
        for s in ("", "running", "complete", "incomplete", "interrupted")
    )
    level_opts = "".join(
        f'<option value="{lv}"{" selected" if filters.get("level") == lv else ""}>{lv or "any"}</option>'
        for lv in ("", *levels)
    )
    started = format_ts(rows[0]["started"]) if rows else "-"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<title>spyglass: runs</title>
<style>{_asset("static", "report.css")}{_ui_asset("ui.css")}</style></head>
<body data-token="{_e(token)}" data-query="{query}">
<header class="top"><div class="brand">spyglass</div><nav><a href="/?token={_e(token)}">Runs</a></nav>
<span id="live-dot" title="live updates"></span></header>
<main><section id="runs"><h1>Runs</h1>
<form class="filters" method="get" action="/">
<input type="hidden" name="token" value="{_e(token)}">
{field("agent", "agent")}{field("task", "task")}
<label>status<select name="status">{status_opts}</select></label>
<label>level at least<select name="level">{level_opts}</select></label>
<button type="submit">filter</button></form>
<p class="note">newest first; latest start {started}; the list updates by itself</p>
<table class="grid runs"><thead><tr><th>run</th><th>status</th><th>agent</th><th>task</th><th class="r">events</th>
<th>alerts</th><th>command</th></tr></thead><tbody id="runs-body">{"".join(body_rows)}</tbody></table>
</section></main>
<script>{_ui_asset("runs.js")}</script></body></html>"""


def live_report(reader: RunReader, token: str) -> bytes:
    """The run's HTML report; while the run goes on, with a live bar and alerts arriving at the top."""
    page = html_report_bytes(reader).decode("utf-8")
    if reader.meta.status != "running":
        return page.encode("utf-8")
    after = len(reader.alerts(on_bad_line=lambda *_: None))
    config = json.dumps({"run": reader.id, "token": token, "after": after}).replace("</", "<\\/")
    page = page.replace(_REPORT_CSP, _CSP, 1)
    bar = (
        '<div id="live-bar"><b>live</b> <span class="live-text">running</span>'
        '<div id="live-alerts"></div></div>'
    )
    page = page.replace("</style>", _ui_asset("ui.css") + "</style>", 1).replace("<main>", f"{bar}<main>", 1)
    script = (
        f'<script type="application/json" id="live-config">{config}</script>'
        f'<script>{_ui_asset("live.js")}</script>'
    )
    return page.replace("</body>", f"{script}</body>", 1).encode("utf-8")
