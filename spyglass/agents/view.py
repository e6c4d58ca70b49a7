"""What agent awareness finds: tool calls linked to their process subtrees, and the roles of processes.

:class:`ToolCallLink` and :class:`AgentView` are what
:mod:`spyglass.agents.awareness` produces and ``run.json`` (``extra.agent``)
stores; :func:`hook_calls` and :func:`mark_hooks` fold in the reports of the
agent's own hooks (:mod:`spyglass.agents.hooks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from spyglass.agents.agent_logs import ToolCall

if TYPE_CHECKING:  # reports exist only in a run with the agent's hooks
    from spyglass.agents.hooks import HookReport

AGENT, INTERNAL, TOOL, OTHER, PENDING, MCP = "agent", "internal", "tool", "other", "pending", "mcp"


class ToolCallLink(msgspec.Struct):
    """A tool call and the process subtree it caused."""

    n: int
    command: str
    source: str  # "log" (matched to the agent's log) or "process tree" (recognised without one)
    call: ToolCall | None = None
    root_pid: int | None = None
    pids: list[int] = msgspec.field(default_factory=list)
    first_seq: int | None = None
    last_seq: int | None = None
    events: int = 0
    exit_code: int | None = None
    signal: str | None = None
    hook: bool | None = None  # reported by the agent's hook (None: no hooks in this run)

    @property
    def label(self) -> str:
        return f"tool call {self.n}: {self.command}"

    def to_json(self) -> dict[str, Any]:
        return {
            "hook": self.hook,
            "n": self.n,
            "command": self.command,
            "label": self.label,
            "source": self.source,
            "call_id": self.call.call_id if self.call else None,
            "tool": self.call.tool if self.call else "shell",
            "root_pid": self.root_pid,
            "pids": self.pids,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "events": self.events,
            "exit_code": self.exit_code,
            "signal": self.signal,
        }


class AgentView(msgspec.Struct):
    """The outcome: roles of processes and the tool calls with their subtrees."""

    agent: str | None
    roles: dict[int, str]
    links: list[ToolCallLink]
    unlinked: list[ToolCall]  # calls in the log with no process found for them
    internal: dict[int, str]  # root pid of an internal command -> the command
    log_source: str | None = None
    hook_reports: list[dict[str, Any]] | None = None  # None: no hooks in this run
    hooks_unmatched: list[dict[str, Any]] = msgspec.field(default_factory=list)
    interventions: list[dict[str, Any]] | None = None  # None: not asked (no --ask)
    mcp: dict[str, list[int]] = msgspec.field(default_factory=dict)  # MCP server name -> its processes

    def tool_call_of(self, pid: int) -> ToolCallLink | None:
        for link in self.links:
            if pid in link.pids:
                return link
        return None

    def labels(self) -> dict[int, str]:
        """pid -> "tool call N: CMD" for every process in a tool call's subtree."""
        return {pid: link.label for link in self.links for pid in link.pids}

    def pids_with_role(self, role: str) -> list[int]:
        return [p for p, r in self.roles.items() if r == role]

    def to_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "log": self.log_source,
            "tool_calls": [link.to_json() for link in self.links],
            "unlinked_calls": [{"n": c.n, "command": c.command, "call_id": c.call_id} for c in self.unlinked],
            "agent_pids": sorted(self.pids_with_role(AGENT)),
            "internal_pids": sorted(self.pids_with_role(INTERNAL)),
            "internal_commands": [{"pid": p, "command": c} for p, c in self.internal.items()],
            "hook_reports": self.hook_reports,
            "hooks_unmatched": self.hooks_unmatched,
            "interventions": self.interventions,
            "mcp_servers": [{"name": n, "label": f"MCP server {n}", "pids": p} for n, p in self.mcp.items()],
        }


def hook_calls(reports: Sequence[HookReport]) -> list[ToolCall]:
    """The shell tool calls the agent's PreToolUse hooks reported and were let run, in order."""
    out: list[ToolCall] = []
    for r in reports:
        if r.phase == "pre" and r.command is not None and r.decision != "deny":
            out.append(ToolCall(n=len(out) + 1, command=r.command, tool=r.tool_name, call_id=r.tool_use_id))
    return out


def mark_hooks(view: AgentView, reports: Sequence[HookReport]) -> None:
    """Which tool calls a hook reported (``hook``), and hook reports no call of the log matches."""
    pre = {r.tool_use_id: r for r in reports if r.phase == "pre" and r.tool_use_id}
    for link in view.links:
        cid = link.call.call_id if link.call is not None else None
        link.hook = cid in pre if cid else False
    known = {link.call.call_id for link in view.links if link.call is not None}
    known |= {c.call_id for c in view.unlinked}
    view.hook_reports = [r.to_json() for r in reports]
    view.hooks_unmatched = [r.to_json() for r in pre.values() if r.tool_use_id not in known]
