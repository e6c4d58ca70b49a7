"""ls / show / events on stored runs, through the CLI in-process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spyglass.events import Alert, Event, LineageEntry
from spyglass.pipeline import Pipeline, RunContext
from spyglass.store import RunMeta, RunWriter, Store, new_run_id


def make_run(store_dir: Path, *, task: str = "t") -> str:
    store = Store(store_dir, create=True)
    meta = RunMeta(
        id=new_run_id(),
        command=["python3", "agent.py"],
        cwd="/w",
        workspace=["/w"],
        task=task,
        backend="strace",
    )
    w = RunWriter(store, meta)
    p = Pipeline([w], RunContext(run_id=meta.id))
    for ev in [
        Event(type="process.start", pid=10, ts=1),
        Event(type="process.exec", pid=10, exe="/usr/bin/python3", argv=["python3", "agent.py"], cwd="/w"),
        Event(type="process.start", pid=11, ppid=10),
        Event(type="process.exec", pid=11, exe="/usr/bin/cat", argv=["cat", "/home/u/.ssh/id_rsa"], cwd="/w"),
        Event(type="file.read", pid=11, path="/home/u/.ssh/id_rsa"),
        Event(type="process.exit", pid=11, exit_code=0),
        Event(type="file.create", pid=10, path="/w/out.txt", flags="O_WRONLY|O_CREAT|O_TRUNC"),
        Event(type="file.rename", pid=10, path="/w/out.txt", target="/w/final.txt"),
        Event(
            type="net.connect", pid=10, address="127.0.0.1", port=8080, domain="localhost", transport="tcp"
        ),
        Event(type="file.read", pid=10, path="/missing", ok=False, errno="ENOENT"),
        Event(type="process.exit", pid=10, exit_code=0),
    ]:
        p.feed(ev)
    p.ctx.raise_alert(
        Alert(
            rule_id="secret-read",
            title="Secret file read",
            level="high",
            message="read /home/u/.ssh/id_rsa",
            event_seqs=[5],
            pid=11,
            argv=["cat", "/home/u/.ssh/id_rsa"],
            lineage=[
                LineageEntry(pid=11, argv=["cat", "x"]),
                LineageEntry(pid=10, argv=["python3", "agent.py"]),
            ],
        )
    )
    w.finish("complete", exit_code=0)
    return meta.id


def test_ls_json_lists_runs(spy: Any, store_dir: Path) -> None:
    rid = make_run(store_dir)
    res = spy("ls", "--format", "json")
    assert res.exit_code == 0
    rows = json.loads(res.stdout)
    assert rows[0]["id"] == rid and rows[0]["status"] == "complete" and rows[0]["counts"]["alerts"] == 1


def test_ls_without_store_says_so(spy: Any) -> None:
    res = spy("ls")
    assert res.exit_code == 0 and "no runs yet" in res.stderr


def test_show_text_has_alerts_tree_files_hosts(spy: Any, store_dir: Path) -> None:
    make_run(store_dir)
    res = spy("show", "latest")
    assert res.exit_code == 0
    out = res.stdout
    assert "\x1b[" not in out  # not a terminal: no escape codes
    assert "HIGH (1)" in out and "secret-read: Secret file read" in out
    assert out.index("Alerts") < out.index("Processes")  # alerts first
    assert "10 python3 agent.py" in out and "11 cat /home/u/.ssh/id_rsa" in out
    assert "/w/out.txt -> /w/final.txt" in out
    assert "localhost (127.0.0.1):8080" in out


def test_show_json_and_events_filters(spy: Any, store_dir: Path) -> None:
    rid = make_run(store_dir)
    data = json.loads(spy("show", rid[:12], "--format", "json").stdout)
    assert data["counts"]["file.read"] == 2
    assert data["files_written"]["file.rename"] == ["/w/out.txt -> /w/final.txt"]
    res = spy("events", "latest", "--type", "file.", "--format", "json", "--noise")
    types = [json.loads(line)["type"] for line in res.stdout.splitlines()]
    assert types == ["file.read", "file.create", "file.rename", "file.read"]
    res = spy("events", "latest", "--type", "file.", "--format", "json")  # the failed open is folded
    assert [json.loads(line)["type"] for line in res.stdout.splitlines()] == ["file.read", "file.create",
                                                                               "file.rename"]
    res = spy("events", "latest", "--pid", "11")
    assert "cat /home/u/.ssh/id_rsa" in res.stdout and "/w/out.txt" not in res.stdout


def test_unknown_run_is_one_line(spy: Any, store_dir: Path) -> None:
    make_run(store_dir)
    res = spy("show", "zzz")
    assert res.exit_code == 2
    assert res.stderr.strip().count("\n") == 0 and "no run matches 'zzz'" in res.stderr


def test_corrupt_line_named_and_show_carries_on(spy: Any, store_dir: Path) -> None:
    rid = make_run(store_dir)
    path = store_dir / "runs" / rid / "events.jsonl"
    lines = path.read_bytes().splitlines()
    lines[3] = b"{not json"
    path.write_bytes(b"\n".join(lines) + b"\n")
    res = spy("show", "latest")
    assert res.exit_code == 0
    assert f"{path}:4" in res.stderr


def test_run_without_command_is_usage(spy: Any) -> None:
    res = spy("run")
    assert res.exit_code == 2 and "Missing argument" in res.stderr
