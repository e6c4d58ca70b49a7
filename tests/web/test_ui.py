"""`spyglass ui` in headless Chromium, offline: a run started after the page is open appears,
its alerts show live, and its page turns into the final report when it ends."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from spyglass.store import Store
from spyglass.web.server import UiServer, start_ui

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")

WAIT_MS = 60_000  # generous: the machine may be loaded; nothing here measures time


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[UiServer]:
    store = Store(tmp_path / "store", create=True)
    store.index.close()
    server = start_ui(store.root)
    yield server
    server.stop()


def _agent(tmp_path: Path) -> tuple[list[str], dict[str, str], Path]:
    """An agent that reads a decoy key, waits for `go`, reads decoy cloud credentials, waits for `stop`."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\ndecoy\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("[default]\naws_access_key_id = AKIADECOY\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    script = (
        "cat $HOME/.ssh/id_rsa > /dev/null; "
        "while [ ! -e go ]; do sleep 0.1; done; "
        "cat $HOME/.aws/credentials > /dev/null; "
        "while [ ! -e stop ]; do sleep 0.1; done"
    )
    env = {**os.environ, "HOME": str(home), "SPYGLASS_STORE": str(tmp_path / "store")}
    return [sys.executable, "-m", "spyglass", "run", "-q", "--task", "ui-test", "--", "sh", "-c", script], env, ws


def test_token_is_required(ui: UiServer) -> None:
    bare = ui.url.split("?")[0]
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(bare, timeout=30)
    assert err.value.code == 403
    with urllib.request.urlopen(ui.url, timeout=30) as resp:
        assert resp.status == 200 and b"Runs" in resp.read()


def test_a_run_started_after_the_page_opens_shows_up_live(
    ui: UiServer, tmp_path: Path, browser: Callable[..., Any]
) -> None:
    argv, env, ws = _agent(tmp_path)
    origin = ui.url.split("/?")[0]
    proc: subprocess.Popen[bytes] | None = None
    try:
        with browser() as (context, log):
            page = context.new_page()
            page.goto(ui.url)
            page.wait_for_selector("body[data-ready='1']")
            page.wait_for_selector("#live-dot.on", timeout=WAIT_MS)
            assert page.locator("#runs-body tr").count() == 0

            proc = subprocess.Popen(argv, cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            row = page.locator("#runs-body tr[data-status='running']")
            row.wait_for(timeout=WAIT_MS)
            page.locator("#runs-body tr td.alerts:has-text('cred-secret-read')").wait_for(timeout=WAIT_MS)
            assert "ui-test" in row.inner_text()

            # the run's page: the report, live
            row.locator("a").click()
            page.wait_for_selector("#live-bar")
            page.wait_for_selector("body[data-ready='1']")
            assert "cred-secret-read" in page.locator("#alerts").inner_text()
            (ws / "go").write_text("")
            live = page.locator("#live-alerts article.alert").first
            live.wait_for(timeout=WAIT_MS)
            assert ".aws/credentials" in live.inner_text()
            (ws / "stop").write_text("")
            page.wait_for_selector("#live-bar", state="detached", timeout=WAIT_MS)  # reloaded: the final report
            page.wait_for_selector("body[data-ready='1']")
            assert "complete" in page.locator("#summary .status-line").inner_text()
            assert page.locator("#alerts article.alert").count() >= 2

            assert all(u.startswith(origin) for u in log.requests), log.requests
            assert log.console_errors == [] and log.page_errors == []
        assert proc.wait(timeout=60) == 0
    finally:
        (ws / "go").write_text("")
        (ws / "stop").write_text("")
        if proc is not None and proc.poll() is None:
            deadline = time.monotonic() + 30
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            if proc.poll() is None:
                proc.kill()


def test_run_list_filters(spy: Callable[..., Any], store_dir: Path, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.chdir(tmp_path)
    assert spy("run", "-q", "--task", "a", "--agent-id", "bot-1", "--", "true").exit_code == 0
    assert spy("run", "-q", "--task", "b", "--agent-id", "bot-2", "--", "true").exit_code == 0
    server = start_ui(store_dir)
    try:
        base = server.url.replace("/?", "/api/runs?")

        def ids(query: str) -> list[str]:
            with urllib.request.urlopen(base + query, timeout=30) as resp:
                return [r["agent_id"] for r in json.loads(resp.read())]

        assert ids("") == ["bot-2", "bot-1"]  # newest first
        assert ids("&agent=bot-1") == ["bot-1"] and ids("&agent=bot") == ["bot-2", "bot-1"]
        assert ids("&task=b") == ["bot-2"] and ids("&status=complete&task=a") == ["bot-1"]
        assert ids("&level=high") == [] and ids("&status=running") == []
        with urllib.request.urlopen(server.url + "&task=a", timeout=30) as resp:
            page = resp.read().decode()
        assert "bot-1" in page and "bot-2" not in page
    finally:
        server.stop()
