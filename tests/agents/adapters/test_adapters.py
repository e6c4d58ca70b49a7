"""Agent adapters: recognising agents by package, reading Claude Code transcripts, state globs, MCP servers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spyglass.agents.adapters import adapter_for, adapter_named, agent_state_globs, all_adapters, recognise
from spyglass.agents.adapters.base import npm_package, python_dist
from spyglass.agents.agent_logs import parse_agent_log
from spyglass.agents.awareness import Linker, link_tool_calls
from spyglass.evidence.claims import claims_from_log


def _npm(root: Path, name: str, binary: str) -> Path:
    pkg = root / "node_modules" / name
    (pkg / "bin").mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({"name": name, "version": "1.0.0"}))
    exe = pkg / "bin" / binary
    exe.write_text("")
    exe.chmod(0o755)
    return exe


def test_recognised_by_the_package_the_executable_belongs_to(tmp_path: Path) -> None:
    claude = _npm(tmp_path, "@anthropic-ai/claude-code", "claude.exe")
    link = tmp_path / "node_modules" / ".bin" / "claude"
    link.parent.mkdir()
    link.symlink_to(claude)
    assert npm_package(str(link)) == ("@anthropic-ai/claude-code", str(claude.parent.parent))
    assert adapter_for(None, [str(link), "-p", "x"]).name == "claude"
    assert recognise(str(claude), [str(link)]) is adapter_named("claude")
    # a program that only borrows the name, in a package of its own, is not the agent
    fake = _npm(tmp_path / "other", "not-claude", "claude.exe")
    assert recognise(str(fake), [str(fake)]) is None
    assert adapter_named("claude").install_root(str(claude)) == str(claude.parent.parent)


def test_recognised_by_name_where_the_path_is_not_here() -> None:
    assert recognise("/gone/claude.exe", ["claude", "-p"]) is adapter_named("claude")
    assert recognise("/gone/codex", ["codex", "exec"]) is adapter_named("codex")
    assert recognise("/usr/bin/python3", ["python3", "-m", "minisweagent.run.mini"]) is adapter_named("mini")
    assert recognise("/usr/bin/bash", ["bash", "-c", "claude"]) is None
    assert adapter_for(None, ["timeout", "60", "claude", "-p", "x"]).name == "claude"
    assert adapter_for(None, ["python3", "agent.py"]).name == "generic"
    assert [a.name for a in all_adapters()][-1] == "generic"


def test_mini_recognised_by_its_dist_info(tmp_path: Path) -> None:
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "mini_swe_agent-2.4.6.dist-info").mkdir(parents=True)
    script = tmp_path / "venv" / "bin" / "mini"
    script.parent.mkdir(parents=True)
    script.write_text("#!/usr/bin/env python\n")
    assert python_dist(str(script), "mini-swe-agent") == str(site)
    assert recognise("/usr/bin/python3", ["python3", str(script), "--yolo"]) is adapter_named("mini")
    assert adapter_named("mini").install_root(None, ["python3", str(script)]) == str(tmp_path / "venv")


BASH_WRAPPED = (
    "source /c/shell-snapshots/snapshot-bash-1-x.sh 2>/dev/null || true && "
    "{ \\builtin unalias -- 'which'; } >/dev/null 2>&1 || true && "
    "eval 'cat '\"'\"'a b.txt'\"'\"' && echo hi' < /dev/null && pwd -P >| /tmp/claude-ab-cwd"
)


def test_claude_code_model_command_is_the_eval_argument() -> None:
    claude = adapter_named("claude")
    assert claude.model_command(BASH_WRAPPED) == "cat 'a b.txt' && echo hi"
    assert claude.model_command("ls -la") == "ls -la"


def _transcript() -> str:
    def line(**kw: object) -> str:
        return json.dumps({"sessionId": "s1", "uuid": "u", **kw})

    asst = {"id": "msg_1", "role": "assistant", "type": "message"}
    return "\n".join(
        [
            line(type="user", message={"role": "user", "content": "the task"}),
            line(type="assistant", message={**asst, "content": [{"type": "text", "text": "Looking."}]}),
            line(
                type="assistant",
                message={
                    **asst,
                    "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}],
                },
            ),
            line(
                type="user",
                message={
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a\nb", "is_error": False}
                    ],
                },
            ),
            line(
                type="assistant",
                message={
                    "id": "msg_2",
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "toolu_2",
                            "name": "Write",
                            "input": {"file_path": "/w/new.py", "content": "x"},
                        },
                        {"type": "tool_use", "id": "toolu_3", "name": "Bash", "input": {"command": "pytest -q"}},
                    ],
                },
            ),
            line(
                type="user",
                message={
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "ok"}],
                },
                toolUseResult={"type": "create", "filePath": "/w/new.py"},
            ),
            line(
                type="user",
                message={
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_3",
                            "content": "Exit code 1\nFAILED",
                            "is_error": True,
                        }
                    ],
                },
            ),
            line(
                type="assistant",
                message={"id": "msg_3", "role": "assistant", "content": [{"type": "text", "text": "All tests pass."}]},
            ),
        ]
    )


def test_claude_code_transcript_tool_calls_and_claims() -> None:
    log = parse_agent_log(_transcript(), "s1.jsonl")
    assert (log.agent, log.format) == ("claude", "claude-transcript")
    calls = log.tool_calls
    assert [(c.n, c.command, c.call_id, c.exit_code) for c in calls] == [
        (1, "ls", "toolu_1", 0),
        (2, "pytest -q", "toolu_3", 1),
    ]
    assert calls[0].output == "a\nb"
    assert log.turns[0].text == "Looking." and len(log.turns) == 3
    assert log.turns[1].other_calls[0][0] == "Write"
    assert log.files == [("/w/new.py", "added")]
    claims = claims_from_log(log, "s1.jsonl")
    assert [(c.command, c.exit_code) for c in claims.commands] == [("ls", 0), ("pytest -q", 1)]
    assert claims.tests_passed is True and claims.final_message == "All tests pass."


def test_claude_code_tool_calls_linked_to_processes(events: Any) -> None:
    """claude.exe -> its env probe and shell snapshot (its own) -> bash -c '... eval CMD ...' per call."""
    e = events
    exe = "/x/node_modules/@anthropic-ai/claude-code/bin/claude.exe"
    e.start(10, None)
    e.exec(10, exe, "/x/node_modules/.bin/claude", "-p", "task")
    e.start(11, 10)
    e.exec(11, "/usr/bin/bash", "/bin/bash", "-c", "env")
    e.exit(11)
    e.start(12, 10)
    e.exec(
        12, "/usr/bin/bash", "/bin/bash", "-c", "-l", "SNAPSHOT_FILE=/c/s.sh\nsource ~/.bashrc\necho '# Snapshot file'"
    )
    e.exit(12)
    for pid, cmd in ((20, "ls"), (30, "pytest -q")):
        e.start(pid, 10)
        e.exec(
            pid, "/usr/bin/bash", "/bin/bash", "-c", BASH_WRAPPED.replace("cat '\"'\"'a b.txt'\"'\"' && echo hi", cmd)
        )
        e.start(pid + 1, pid)
        e.exec(pid + 1, f"/usr/bin/{cmd.split()[0]}", *cmd.split())
        e.exit(pid + 1)
        e.exit(pid, 0 if pid == 20 else 1)
    view = link_tool_calls(e.out, parse_agent_log(_transcript()).tool_calls)
    assert view.agent == "claude"
    assert [(link.n, link.root_pid, link.pids, link.exit_code) for link in view.links] == [
        (1, 20, [20, 21], 0),
        (2, 30, [30, 31], 1),
    ]
    assert sorted(view.internal) == [11, 12]
    # without the transcript, live: the same two calls from the process tree, its own shells internal
    live = link_tool_calls(e.out)
    assert [(link.command, link.root_pid) for link in live.links] == [("ls", 20), ("pytest -q", 30)]


def test_state_globs_and_mcp_servers(tmp_path: Path) -> None:
    globs = agent_state_globs("/h")
    assert "/h/.claude/projects/**" in globs and "/h/.codex/sessions/**" in globs
    assert not any(g.endswith("settings.json") or g.endswith("CLAUDE.md") for g in globs)  # config stays watched
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "files": {"command": "npx", "args": ["-y", "srv"]},
                    "web": {"type": "http", "url": "http://x"},
                }
            }
        )
    )
    assert adapter_named("claude").mcp_servers(str(ws), {"HOME": str(tmp_path)}) == {"files": ["npx", "-y", "srv"]}
    codex_home = tmp_path / "ch"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text('[mcp_servers.docs]\ncommand = "docs-mcp"\nargs = ["--stdio"]\n')
    assert adapter_named("codex").mcp_servers(str(ws), {"CODEX_HOME": str(codex_home)}) == {
        "docs": ["docs-mcp", "--stdio"]
    }


def test_mcp_servers_are_labelled_not_tool_calls(events: Any) -> None:
    """A process the agent starts with a configured MCP server's command is that server, with its children."""
    e = events
    e.start(10, None)
    e.exec(10, "/gone/claude.exe", "claude", "-p", "task")
    e.start(11, 10)
    e.exec(11, "/usr/bin/npx", "npx", "-y", "files-mcp")
    e.start(12, 11)
    e.exec(12, "/usr/bin/node", "node", "/cache/files-mcp/index.js")
    e.start(13, 10)
    e.exec(13, "/usr/bin/bash", "/bin/bash", "-c", "ls")
    linker = Linker(mcp_servers=lambda agent, _argv: {"files": ["npx", "-y", "files-mcp"]} if agent == "claude" else {})
    for ev in e.out:
        linker.feed(ev)
    view = linker.view()
    assert view.mcp == {"files": [11, 12]}
    assert linker.labels[12] == "MCP server files"
    assert [(link.command, link.root_pid) for link in view.links] == [("ls", 13)]
    assert view.to_json()["mcp_servers"] == [{"name": "files", "label": "MCP server files", "pids": [11, 12]}]


def test_gate_claims_read_a_claude_code_transcript() -> None:
    from spyglass.evidence.claims import parse_claims

    claims = parse_claims(_transcript(), "s1.jsonl")
    assert claims.format == "claude-transcript"
    assert [c.command for c in claims.commands] == ["ls", "pytest -q"]
    assert [(f.path, f.kind) for f in claims.files] == [("/w/new.py", "added")]
    assert claims.tests_passed is True


def test_the_install_of_the_agent_a_run_starts_is_trusted(tmp_path: Path) -> None:
    from spyglass.session.agent import agent_install

    claude = _npm(tmp_path, "@anthropic-ai/claude-code", "claude.exe")
    link = tmp_path / "node_modules" / ".bin" / "claude"
    link.parent.mkdir()
    link.symlink_to(claude)
    assert agent_install([str(link), "-p", "x"], {"PATH": "/usr/bin"}, "/") == [str(claude.parent.parent)]
    assert agent_install(["claude", "-p"], {"PATH": str(link.parent)}, "/") == [str(claude.parent.parent)]
    fake = _npm(tmp_path / "elsewhere", "left-pad", "claude.exe")
    assert agent_install([str(fake)], {}, "/") == []  # the name alone earns no trust
    assert agent_install(["true"], {"PATH": "/usr/bin:/bin"}, "/") == []
