"""`spyglass model-stub` and `spyglass agents ...` as a user calls them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spyglass.capture.replay import ReplayBackend
from spyglass.events import Event
from spyglass.session.record import RunRequest, record
from spyglass.store import Store


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_model_stub_serves_until_interrupted(tmp_path: Path, sig: signal.Signals) -> None:
    """Started with SIGINT ignored, as a shell starts a background job (and as CI may start the tests):
    Ctrl-C and SIGTERM still end it with its summary."""
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"model": "m1", "steps": [{"say": "hi"}]}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "spyglass", "model-stub", str(script), "--log", str(tmp_path / "req.jsonl")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        with urllib.request.urlopen(f"{url}/models", timeout=10) as resp:
            assert json.loads(resp.read())["data"][0]["id"] == "m1"
    finally:
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert "1 request(s) served" in err
    assert json.loads((tmp_path / "req.jsonl").read_text())["path"] == "/v1/models"


def test_model_stub_reports_a_bad_script_with_its_line(spy: Any, tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text('{"steps": [\n  {"say": 1}\n]}')
    result = spy("model-stub", str(script))
    assert result.exit_code == 2
    assert f"{script}:2: steps[0].say: must be a string" in result.output


def test_script_from_log(spy: Any, tmp_path: Path) -> None:
    traj = tmp_path / "mini.traj.json"
    traj.write_text(
        json.dumps(
            {
                "messages": [
                    {"role": "assistant", "content": "Listing.", "extra": {"actions": [{"command": "ls"}]}},
                ]
            }
        )
    )
    out = tmp_path / "replay.json"
    result = spy("agents", "script-from-log", str(traj), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["steps"] == [{"say": "Listing.", "run": "ls"}]
    printed = spy("agents", "script-from-log", str(traj))
    assert json.loads(printed.stdout)["steps"][0]["run"] == "ls"


def test_env_prints_exports_for_a_manual_run(spy: Any, tmp_path: Path) -> None:
    result = spy("agents", "env", "codex", "--stub-url", "http://127.0.0.1:9/v1", "--dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert f"export CODEX_HOME={tmp_path / 'codex-home'}" in lines
    assert "export OPENAI_BASE_URL=http://127.0.0.1:9/v1" in lines
    assert (tmp_path / "codex-home" / "config.toml").is_file()


def test_tool_calls_of_a_stored_run(
    spy: Any, store_dir: Path, tmp_path: Path, codex_events: Callable[[list[str]], list[Event]]
) -> None:
    events = codex_events(["cat SKILL.md", "pytest -q"])
    for ev in events:
        ev.seq = 0
    record(
        RunRequest(argv=["codex", "exec", "task"], cwd=str(tmp_path)),
        ReplayBackend(events),
        Store(store_dir, create=True),
    )
    text = spy("agents", "tool-calls", "latest")
    assert text.exit_code == 0, text.output
    assert "agent codex" in text.stdout
    assert "tool call 1: cat SKILL.md" in text.stdout and "tool call 2: pytest -q" in text.stdout
    assert "from the process tree" in text.stdout
    log = tmp_path / "codex.jsonl"
    log.write_text(
        "".join(
            json.dumps(x) + "\n"
            for x in [
                {
                    "type": "item.completed",
                    "item": {
                        "id": "i1",
                        "type": "command_execution",
                        "command": "/bin/bash -lc 'pytest -q'",
                        "exit_code": 0,
                    },
                },
            ]
        )
    )
    data = json.loads(spy("agents", "tool-calls", "latest", "--agent-log", str(log), "--format", "json").stdout)
    assert [(c["n"], c["command"], c["source"]) for c in data["tool_calls"]] == [(1, "pytest -q", "log")]
    assert data["log"] == str(log)
    assert os.path.basename(data["run"]).startswith("2")
