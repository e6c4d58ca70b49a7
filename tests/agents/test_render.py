"""The agent-aware process section of `spyglass show`."""

from __future__ import annotations

from collections.abc import Callable

from spyglass.agents.awareness import link_tool_calls
from spyglass.agents.render import agent_summary_lines
from spyglass.events import Event
from spyglass.events.proctree import ProcessTable


def test_agent_chatter_is_collapsed_and_tool_calls_stand_out(
    codex_events: Callable[[list[str]], list[Event]],
) -> None:
    events = codex_events(["cat SKILL.md", "pytest -q"])
    procs = ProcessTable()
    for ev in events:
        procs.update(ev)
    lines = agent_summary_lines(link_tool_calls(events).to_json(), procs)
    text = "\n".join(t for _, t in lines)
    assert "Agent: codex" in text
    internal = "lsb_release -a, getconf LONG_BIT, shell environment snapshot, shell snapshot check"
    assert f"agent's own commands: {internal}" in text
    assert "Tool calls (2)" in text
    styles = {t.strip(): s for s, t in lines}
    assert styles["1  cat SKILL.md"] == "bold cyan"
    assert "exit 0, pid 200, 3 processes: bash, id, python3" in text
    assert "getopt" not in text  # inside an internal command: collapsed


def test_hooks_and_interventions_are_shown() -> None:
    from spyglass.events.proctree import ProcessTable

    agent = {
        "agent": "claude",
        "tool_calls": [
            {"n": 1, "command": "ls", "pids": [], "root_pid": 5, "exit_code": 0, "hook": True},
            {"n": 2, "command": "make", "pids": [], "root_pid": 6, "exit_code": 0, "hook": False},
        ],
        "hooks_unmatched": [{"tool_use_id": "toolu_9", "tool_input": {"command": "curl x"}}],
        "interventions": [
            {"decision": "deny", "by": "policy", "what": "cat ~/.ssh/id_rsa", "finding": "secret /h/.ssh/id_rsa"}
        ],
    }
    text = "\n".join(t for _s, t in agent_summary_lines(agent, ProcessTable()))
    assert "Agent: Claude Code" in text
    assert "no hook report" in text.split("make")[1].splitlines()[1]
    assert "no hook report" not in text.split("ls")[1].splitlines()[1]
    assert "1 hook report(s) with no call in the agent log" in text and "toolu_9" in text
    assert "Interventions (1)" in text and "deny by policy: cat ~/.ssh/id_rsa" in text
