"""The HTML report file: self-contained, bounded, every section present or said missing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType

from spyglass.events import Alert, Event
from spyglass.pipeline import Pipeline, RunContext
from spyglass.report.html import json_for_script, render_compare_html, render_html
from spyglass.store import RunMeta, RunReader, RunWriter, Store, new_run_id


def _payload(html: str) -> dict[str, object]:
    m = re.search(r'<script type="application/json" id="spyglass-data">(.*?)</script>', html, re.S)
    assert m is not None
    data = json.loads(m.group(1))
    assert isinstance(data, dict)
    return data


def _record(store: Store, events: list[Event], alerts: list[Alert] = (), **meta: object) -> RunReader:  # type: ignore[assignment]
    m = RunMeta(id=new_run_id(), command=["agent", "--go"], started=1_000_000_000, **meta)  # type: ignore[arg-type]
    w = RunWriter(store, m)
    pipe = Pipeline([w], RunContext(run_id=m.id))
    for ev in events:
        pipe.feed(ev)
    for a in alerts:
        w.alert(a)
    m.ended = 3_000_000_000
    w.finish("complete", exit_code=0)
    return RunReader(store, m.id)


def test_report_is_one_offline_file_with_every_section(sample_run: RunReader, tmp_path: Path) -> None:
    out = render_html(sample_run, tmp_path / "r.html")
    html = out.read_text()
    for sid in ("summary", "alerts", "processes", "timeline", "graph", "files", "network", "evidence"):
        assert f'id="{sid}"' in html
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    # nothing that a browser would fetch
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "@import" not in html and "url(" not in html
    # the alert, its lineage, the event that fired it
    assert "A private key or credential file was read" in html
    assert "make_report.py data.csv" in html
    assert "/home/.ssh/id_rsa" in html
    data = _payload(html)
    assert data["eventsTotal"] == sample_run.meta.counts["events"]
    # sections without data say so
    assert "Not recorded" in html


def test_large_run_is_summarised_not_inlined(tmp_path: Path, sample_module: ModuleType) -> None:
    store = Store(tmp_path / "s", create=True)
    rid = sample_module.build_sample_run(store, tmp_path / "demo", scale=400)
    reader = RunReader(store, rid)
    total = reader.meta.counts["events"]
    assert total > 9_000
    out = render_html(reader, tmp_path / "r.html", max_events=500, max_procs=50)
    html = out.read_text()
    data = _payload(html)
    events = data["events"]
    assert isinstance(events, list) and 0 < len(events) <= 500
    procs = data["procs"]
    assert isinstance(procs, list) and len(procs) == 50
    # the event that fired the alert is always embedded, marked
    alert_seq = reader.alerts()[0].event_seqs[0]
    assert [e for e in events if e[0] == alert_seq and e[6] == 1]
    # and the page says what it left out and how to get it
    assert f"embeds {len(events)} of {total:,} events" in html
    assert f"spyglass events {rid} --type TYPE" in html
    assert "50 of 4" in html  # "50 of 4xx processes"
    assert len(html) < 600_000


def test_script_payload_cannot_close_its_tag(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True)
    nasty = "/w/</script><script>alert(1)</script>"
    reader = _record(
        store,
        [
            Event(type="process.start", pid=1, ts=1_000_000_000),
            Event(
                type="process.exec",
                pid=1,
                ts=1_100_000_000,
                exe="/bin/sh",
                argv=["sh", "-c", "echo </script>"],
            ),
            Event(type="file.create", pid=1, ts=1_200_000_000, path=nasty),
        ],
    )
    html = render_html(reader, tmp_path / "r.html").read_text()
    assert html.count("<script") == 2  # the payload and the code, nothing injected
    assert nasty not in html
    assert _payload(html)["events"]
    assert "\\u003c/script>" in json_for_script({"a": "</script>"})


def test_network_section_shows_proxy_decisions_and_sandbox_denials(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True)
    reader = _record(
        store,
        [
            Event(type="process.start", pid=7, ts=1_000_000_000),
            Event(
                type="proxy.request",
                pid=7,
                ts=1_100_000_000,
                domain="pypi.org",
                address="pypi.org",
                port=443,
                method="CONNECT",
                decision="allow",
                rule="network.allow",
            ),
            Event(
                type="proxy.request",
                pid=7,
                ts=1_200_000_000,
                domain="evil.example",
                address="evil.example",
                port=443,
                method="CONNECT",
                decision="deny",
                rule="not in network.allow",
            ),
            Event(
                type="sandbox.denied",
                pid=7,
                ts=1_300_000_000,
                syscall="openat",
                path="/etc/shadow",
                reason="EACCES",
                ok=False,
                errno="EACCES",
            ),
        ],
        [
            Alert(
                rule_id="egress-denied",
                title="Connection to a host nobody allowed",
                level="medium",
                event_seqs=[3],
                pid=7,
            )
        ],
        sandbox=True,
    )
    html = render_html(reader, tmp_path / "r.html").read_text()
    net = html.split('id="network"', 1)[1].split('id="evidence"', 1)[0]
    assert "evil.example" in net and "dec-deny" in net and "not in network.allow" in net
    assert "pypi.org" in net and "dec-allow" in net
    # the denied host is marked in the graph
    graph = html.split('id="graph"', 1)[1].split('id="files"', 1)[0]
    assert "evil.example" in graph
    assert "/etc/shadow" in html


def test_workspace_diff_is_shown_when_the_evidence_has_it(tmp_path: Path) -> None:
    from spyglass.evidence.changes import Change, WorkspaceChanges, encode_changes

    store = Store(tmp_path / "s", create=True)
    reader = _record(store, [Event(type="process.start", pid=1, ts=1_000_000_000)])
    diff = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-print('old')\n+print('new')\n"
    changes = WorkspaceChanges(
        roots=["/w"],
        modified=[
            Change(path="app.py", abs_path="/w/app.py", status="modified", what=["content"], diff=diff)
        ],
        added=[Change(path="new.txt", abs_path="/w/new.txt", status="added", diff_note="binary file")],
    )
    (reader.dir / "evidence" / "changes.json").write_bytes(encode_changes(changes))
    html = render_html(reader, tmp_path / "r.html").read_text()
    files = html.split('id="files"', 1)[1].split('id="network"', 1)[0]
    assert "1 added, 1 modified, 0 removed" in files
    assert "print(&#39;new&#39;)" in files and 'class="add"' in files and 'class="del"' in files
    assert "binary file" in files


def test_compare_report_has_heat_map_and_task_margins(tmp_path: Path, sample_module: ModuleType) -> None:
    store = Store(tmp_path / "s", create=True)
    ids = [
        sample_module.build_sample_run(store, tmp_path / "d", task="t1"),
        sample_module.build_sample_run(store, tmp_path / "d", task="t1", scale=2),
        sample_module.build_sample_run(store, tmp_path / "e", task="t2", scale=5),
        sample_module.build_sample_run(store, tmp_path / "e", task="t2", scale=6),
    ]
    html = render_compare_html([RunReader(store, i) for i in ids], tmp_path / "c.html").read_text()
    combined = html.split('data-kind="combined"', 1)[1].split("</table>", 1)[0]
    assert combined.count('class="cell"') == 16
    assert combined.count("1.00") >= 4  # the diagonal
    assert "same-task mean" in combined
    tasks = html.split('id="tasks"', 1)[1]
    assert "<b>t1</b>" in tasks and "<b>t2</b>" in tasks
    assert "<script" not in html


def test_test_runs_after_the_last_edit_are_shown(tmp_path: Path) -> None:
    store = Store(tmp_path / "s", create=True)
    reader = _record(
        store,
        [
            Event(type="process.start", pid=1, ts=1_000_000_000, cwd="/w"),
            Event(type="file.write", pid=1, ts=1_100_000_000, path="/w/app.py"),
            Event(type="process.start", pid=2, ppid=1, ts=1_200_000_000),
            Event(
                type="process.exec",
                pid=2,
                ts=1_300_000_000,
                exe="/usr/bin/python3",
                argv=["python3", "-m", "pytest", "-q"],
                cwd="/w",
            ),
            Event(type="process.exit", pid=2, ts=1_400_000_000, exit_code=0),
        ],
        workspace=["/w"],
        cwd="/w",
    )
    html = render_html(reader, tmp_path / "r.html").read_text()
    ev = html.split('id="evidence"', 1)[1]
    tests = ev.split("<h3>Test runs</h3>", 1)[1].split("<h3>", 1)[0]
    assert "python3 -m pytest -q" in tests and "passed" in tests and "<td>yes</td>" in tests
    assert "/w/app.py" in tests
