"""A sandboxed run in the report: launchers shown once as labels, the relay and nscd not counted as bypasses.

The run is replayed from events shaped as a real `run --sandbox` records
them (bwrap starting the proxy relay starting the agent's shell), with the
rules live, so the alert and its lineage are the engine's own.  The page
is checked in Debian's Chromium.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spyglass.capture.replay import ReplayBackend
from spyglass.events import Event
from spyglass.policy import Policy
from spyglass.report.html import render_html
from spyglass.rules import build_sinks
from spyglass.session.record import RunRequest, record
from spyglass.store import RunReader, Store

HOME = "/home/u"
AGENT = ["sh", "-c", f"cat {HOME}/.ssh/id_rsa; curl https://203.0.113.5/"]
RELAY = ["/usr/bin/python3", "-I", "-S", "/run/spyglass/relay.py", "/run/spyglass/proxy.sock", "3128", "--", *AGENT]
BWRAP = ["bwrap", "--unshare-net", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", *RELAY]


def _events() -> list[Event]:
    return [
        Event(type="process.start", pid=100, ppid=1),
        Event(type="process.exec", pid=100, exe="/usr/bin/bwrap", argv=BWRAP),
        Event(type="process.start", pid=101, ppid=100),
        Event(type="process.exec", pid=101, exe="/usr/bin/python3", argv=RELAY),
        Event(type="net.connect", pid=101, address="/run/spyglass/proxy.sock", net_type="unix"),
        Event(type="process.start", pid=102, ppid=101),
        Event(type="process.exec", pid=102, exe="/usr/bin/sh", argv=AGENT),
        Event(type="net.connect", pid=102, address="/var/run/nscd/socket", net_type="unix"),
        Event(type="process.start", pid=103, ppid=102),
        Event(type="process.exec", pid=103, exe="/usr/bin/cat", argv=["cat", f"{HOME}/.ssh/id_rsa"]),
        Event(type="file.read", pid=103, path=f"{HOME}/.ssh/id_rsa"),
        Event(type="process.start", pid=104, ppid=102),
        Event(type="process.exec", pid=104, exe="/usr/bin/curl", argv=["curl", "https://203.0.113.5/"]),
        Event(type="net.connect", pid=104, address="127.0.0.1", port=3128, transport="tcp", net_type="ipv4"),
        Event(type="net.connect", pid=104, address="203.0.113.5", port=443, transport="tcp", net_type="ipv4"),
    ]


def test_sandboxed_lineage_and_plumbing(tmp_path: Path, artifacts: Path, chromium: Callable[..., Any]) -> None:
    store = Store(tmp_path / "store", create=True)
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = Policy.default(ws)
    sinks = build_sinks(policy, home=HOME, stream=io.StringIO())
    req = RunRequest(argv=BWRAP, cwd=str(ws), workspace=[str(ws)], sandbox=True,
                     extra={"home": HOME, "sandbox": {"relay": {"port": 3128}}})
    outcome = record(req, ReplayBackend(_events()), store, sinks)
    reader = RunReader(store, outcome.meta.id)
    assert any(a.rule_id == "cred-secret-read" for a in reader.alerts())
    out = render_html(reader, tmp_path / "report.html", verify=False)
    with chromium(out.resolve().as_uri()) as (page, _log):
        page.wait_for_selector("body[data-ready='1']")
        card = page.locator("article.alert", has_text="Secret file read").first
        lineage = card.locator(".lineage li").all_inner_texts()
        text = "\n".join(lineage)
        # the agent's command once, the launchers as one label
        assert text.count(f"cat {HOME}/.ssh/id_rsa; curl") == 1, lineage
        assert sum("sandbox: bwrap › proxy relay" in x for x in lineage) == 1, lineage
        assert "--unshare-net" not in text
        card.screenshot(path=str(artifacts / "sandboxed-alert.png"))
        rows = {r.split("\t")[1].strip(): r for r in page.locator("#network table.grid tr").all_inner_texts()[1:]}
        assert "spyglass plumbing" in rows["/run/spyglass/proxy.sock"]
        assert "spyglass plumbing" in rows["127.0.0.1"]
        assert "local IPC" in rows["/var/run/nscd/socket"]
        assert "bypassed the proxy" in rows["203.0.113.5"]
        assert sum("bypassed the proxy" in r for r in rows.values()) == 1
        page.locator("#network").screenshot(path=str(artifacts / "sandboxed-network.png"))


def test_sandboxed_lineage_in_show(tmp_path: Path) -> None:
    """`show` (the terminal summary) folds the launchers the same way."""
    from spyglass.report.terminal import print_run_summary

    store = Store(tmp_path / "store", create=True)
    ws = tmp_path / "ws"
    ws.mkdir()
    sinks = build_sinks(Policy.default(ws), home=HOME, stream=io.StringIO())
    req = RunRequest(argv=BWRAP, cwd=str(ws), workspace=[str(ws)], sandbox=True,
                     extra={"home": HOME, "sandbox": {"relay": {"port": 3128}}})
    outcome = record(req, ReplayBackend(_events()), store, sinks)
    buf = io.StringIO()
    print_run_summary(RunReader(store, outcome.meta.id), buf, color=False)
    text = buf.getvalue()
    lineage = text.split("lineage", 1)[1].split("event", 1)[0]
    assert "[sandbox: bwrap › proxy relay]" in lineage and "[sandbox: proxy relay] sh" not in lineage
    assert lineage.count("sh -c 'cat /home/u/.ssh/id_rsa; curl https://203.0.113.5/'") == 1
    assert "spyglass plumbing" in text and "local IPC" in text
    assert text.count("bypassed proxy") == 1
