"""Permission and memory changes: real writes to agent settings and memory files by a real process."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spyglass.agents.config_watch import classify, diff_memory, diff_settings, parse_settings
from spyglass.store import RunReader, Store


def test_classify_and_diff() -> None:
    assert classify("/w/.claude/settings.local.json") == "claude-settings"
    assert classify("/h/.codex/config.toml") == "codex-config"
    assert classify("/w/pkg/config.toml") is None
    assert classify("/w/.cursor/rules/style.mdc") == "memory"
    assert classify("/w/sub/AGENTS.md") == "memory"
    changes, widened = diff_settings(
        "claude-settings",
        {"permissions": {"allow": ["Read"], "deny": ["Bash(rm:*)"]}},
        {"permissions": {"allow": ["Read", "Bash(curl:*)"], "deny": [], "defaultMode": "bypassPermissions"}},
    )
    assert "+permissions.allow[]=Bash(curl:*)" in changes and "-permissions.deny[]=Bash(rm:*)" in changes
    assert set(widened) == {"allowed: Bash(curl:*)", "no longer deny: Bash(rm:*)", "permission mode bypassPermissions"}
    changes, widened = diff_settings(
        "codex-config", {"approval_policy": "on-request"}, {"approval_policy": "never", "mcp_servers": {"x": {}}}
    )
    assert "~approval_policy: on-request -> never" in changes
    assert widened == ["approval_policy = never", "MCP server added: x"]
    assert diff_settings("claude-settings", {"permissions": {"deny": []}}, {"permissions": {"deny": ["X"]}})[1] == []
    assert diff_memory("a\nb\n", "a\nc\n") == ["-b", "+c"]
    # ~/.claude.json: only its MCP servers count (the rest is the CLI's own state, rewritten all the time)
    before = parse_settings("claude-state", json.dumps({"numStartups": 1, "projects": {"/w": {"history": []}}}))
    after = parse_settings("claude-state", json.dumps(
        {"numStartups": 2, "projects": {"/w": {"history": ["x"], "mcpServers": {"db": {"command": "pg-mcp"}}}}}
    ))
    assert before is not None and after is not None
    changes, widened = diff_settings("claude-state", before, after)
    assert changes == ["+projects./w.mcpServers.db.command: pg-mcp"] and widened == ["MCP server added: db"]


_WRITER = r"""
import json, os, sys
ws, codex = sys.argv[1], sys.argv[2]
widen = sys.argv[3] == "widen"
p = os.path.join(ws, ".claude", "settings.local.json")
data = json.load(open(p))
if widen:
    data["permissions"]["allow"].append("Bash(curl:*)")
else:
    data["permissions"]["deny"].append("Bash(curl:*)")
json.dump(data, open(p, "w"))
if widen:
    with open(os.path.join(codex, "config.toml"), "w") as f:
        f.write('approval_policy = "never"\nsandbox_mode = "danger-full-access"\n')
    json.dump({"mcpServers": {"fetcher": {"command": "npx", "args": ["fetch-mcp"]}}},
              open(os.path.join(ws, ".mcp.json"), "w"))
with open(os.path.join(ws, "CLAUDE.md"), "a") as f:
    f.write("Always run the tests before committing.\n")
"""


def _setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    ws = tmp_path / "ws"
    (ws / ".claude").mkdir(parents=True)
    (ws / ".claude" / "settings.local.json").write_text(json.dumps({"permissions": {"allow": ["Read"], "deny": []}}))
    (ws / "CLAUDE.md").write_text("# Project notes\n")
    codex = tmp_path / "codex-home"
    codex.mkdir()
    (codex / "config.toml").write_text('approval_policy = "on-request"\nsandbox_mode = "workspace-write"\n')
    monkeypatch.setenv("CODEX_HOME", str(codex))
    monkeypatch.chdir(ws)
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    return ws, codex, script


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
@pytest.mark.parametrize("mode", ["widen", "narrow"])
def test_real_config_writes_become_events_and_widening_alerts(
    spy: Callable[..., Any], store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    ws, codex, script = _setup(tmp_path, monkeypatch)
    res = spy("run", "-q", "--", sys.executable, str(script), str(ws), str(codex), mode)
    assert res.exit_code == 0, res.output
    st = Store(store_dir)
    reader = RunReader(st, st.resolve("latest"))
    evs = [e for e in reader.events() if e.type.startswith("agent.")]
    by_path = {e.path: e for e in evs}
    settings = by_path[str(ws / ".claude" / "settings.local.json")]
    assert settings.type == "agent.permission_change" and settings.config_kind == "claude-settings"
    memory = by_path[str(ws / "CLAUDE.md")]
    assert memory.type == "agent.memory_change" and memory.changes == ["+Always run the tests before committing."]
    widened_alerts = [a for a in reader.alerts() if a.rule_id == "agent-permission-widened"]
    if mode == "widen":
        assert settings.changes == ["+permissions.allow[]=Bash(curl:*)"]
        assert settings.widened == ["allowed: Bash(curl:*)"]
        toml = by_path[str(codex / "config.toml")]
        assert toml.config_kind == "codex-config"
        assert set(toml.widened or []) == {"approval_policy = never", "sandbox_mode = danger-full-access"}
        assert by_path[str(ws / ".mcp.json")].widened == ["MCP server added: fetcher"]
        assert {a.event_seqs[-1] for a in widened_alerts} == {
            e.seq for e in evs if e.widened
        }
        assert all(a.level == "high" for a in widened_alerts)
    else:  # the benign twin: a new deny rule and a memory line change things but widen nothing
        assert settings.changes == ["+permissions.deny[]=Bash(curl:*)"] and not settings.widened
        assert widened_alerts == []
