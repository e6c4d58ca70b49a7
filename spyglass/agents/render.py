"""The process section of ``spyglass show`` for an agent run: the agent's own
chatter collapsed to a line, the model's commands listed as tool calls.

Input is what :class:`~spyglass.agents.awareness.AgentAwareness` stores in
``run.json`` (``extra.agent``, the JSON of an :class:`AgentView`) and the run's
process table; output is ``(style, text)`` lines like the rest of the summary.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Mapping
from typing import Any

from spyglass.events.proctree import ProcessTable

_SNAPSHOT_MARK = "# Snapshot file"


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if limit and len(text) > limit:
        return text[: max(1, limit - 2)] + " …"
    return text


def _middle(text: str, limit: int) -> str:
    """Shortened in the middle, so the program and the last arguments both stay readable."""
    text = " ".join(text.split())
    if limit and len(text) > limit:
        head = max(1, limit * 2 // 5)
        tail = max(1, limit - head - 3)
        return f"{text[:head]} … {text[-tail:]}"
    return text


def _cmdline(argv: list[str] | None, exe: str | None) -> str:
    return shlex.join(argv) if argv else (exe or "?")


def _internal_name(command: str) -> str:
    if _SNAPSHOT_MARK in command or "SNAPSHOT_FILE=" in command:
        return "shell environment snapshot"
    if "spyglass-hook.py" in command:
        return "spyglass hook"
    if "/shell_snapshots/" in command:
        return "shell snapshot check"
    return _short(command, 40)


def _subtree(procs: ProcessTable, root: int) -> list[int]:
    out, stack, seen = [], [root], set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        out.append(pid)
        p = procs.get(pid)
        if p is not None:
            stack.extend(reversed(p.children))
    return out


def _exit(code: Any, signal: Any) -> str:
    if signal:
        return f"killed by {signal}"
    if code is None:
        return "no exit seen"
    return f"exit {code}"


def agent_summary_lines(
    agent: Mapping[str, Any], procs: ProcessTable, *, width: int = 0, max_items: int = 15
) -> list[tuple[str, str]]:
    """Lines for the "Agent" and "Tool calls" sections (replacing the plain process tree)."""
    out: list[tuple[str, str]] = []
    add = out.append
    limit = max(40, width - 10) if width else 100
    calls = list(agent.get("tool_calls") or [])
    agent_pids = [int(p) for p in agent.get("agent_pids") or []]
    internal = list(agent.get("internal_commands") or [])
    in_calls = {int(p) for c in calls for p in c.get("pids") or []}
    servers = [m for m in agent.get("mcp_servers") or [] if isinstance(m, dict)]
    in_calls |= {int(p) for m in servers for p in m.get("pids") or []}
    internal_procs = {p for h in internal for p in _subtree(procs, int(h["pid"]))}

    kind = str(agent.get("agent") or "agent")
    try:
        from spyglass.agents.adapters import adapter_named

        title = adapter_named(kind).title
    except KeyError:
        title = kind
    add(("bold", f"Agent: {title}"))
    for pid in agent_pids[:max_items]:
        p = procs.get(pid)
        if p is not None:
            add(("", f"  {pid} {_short(_cmdline(p.argv, p.exe), limit)}"))
    if internal:
        names = Counter(_internal_name(str(h.get("command") or "")) for h in internal)
        listed = ", ".join(f"{n} ×{k}" if k > 1 else n for n, k in names.most_common(8))
        add(("dim", f"  agent's own commands: {listed}  ({len(internal_procs)} processes, collapsed)"))
    if agent.get("log"):
        add(("dim", f"  agent log: {agent['log']}"))

    for m in servers:
        pids = [int(p) for p in m.get("pids") or []]
        root = procs.get(pids[0]) if pids else None
        cmd = _short(_cmdline(root.argv, root.exe), limit) if root is not None else ""
        add(("", f"  MCP server {m.get('name')}: pid {pids[0] if pids else '?'}, {len(pids)} processes  {cmd}"))

    add(("", ""))
    add(("bold", f"Tool calls ({len(calls)})"))
    for c in calls[: max_items * 2]:
        pids = [int(p) for p in c.get("pids") or []]
        programs: list[str] = []
        for pid in pids:
            p = procs.get(pid)
            if p is not None and p.argv and p.execs:
                name = (p.exe or p.argv[0]).rsplit("/", 1)[-1]
                if name not in programs:
                    programs.append(name)
        head = f"  {c.get('n'):>3}  {_middle(str(c.get('command')), limit)}"
        add(("bold cyan", head))
        detail = f"       {_exit(c.get('exit_code'), c.get('signal'))}, pid {c.get('root_pid')}"
        detail += f", {len(pids)} process{'es' if len(pids) != 1 else ''}"
        if programs:
            detail += f": {', '.join(programs[:8])}{' …' if len(programs) > 8 else ''}"
        if c.get("hook") is False:
            detail += "; no hook report"
        add(("yellow" if c.get("hook") is False else "dim", detail))
    if len(calls) > max_items * 2:
        add(("dim", f"  … {len(calls) - max_items * 2} more (spyglass agents tool-calls RUN)"))
    unlinked = agent.get("unlinked_calls") or []
    if unlinked:
        add(("yellow", f"  {len(unlinked)} call(s) in the agent log with no process seen:"))
        for u in unlinked[:max_items]:
            add(("yellow", f"  {u.get('n'):>3}  {_middle(str(u.get('command')), limit)}"))

    unmatched = agent.get("hooks_unmatched") or []
    if unmatched:
        add(("yellow", f"  {len(unmatched)} hook report(s) with no call in the agent log:"))
        for r in unmatched[:max_items]:
            what = (r.get("tool_input") or {}).get("command") or r.get("tool_name")
            add(("yellow", f"       {r.get('tool_use_id')}  {_middle(str(what), limit)}"))
    interventions = agent.get("interventions") or []
    if interventions:
        add(("", ""))
        add(("bold", f"Interventions ({len(interventions)})"))
        for iv in interventions[:max_items]:
            style = "red" if iv.get("decision") == "deny" else "yellow"
            add((style, f"  {iv.get('decision')} by {iv.get('by')}: {_middle(str(iv.get('what')), limit)}"))
            add(("dim", f"       {iv.get('finding')}"))

    others = [
        p
        for pid, p in procs.procs.items()
        if pid not in in_calls and pid not in internal_procs and pid not in agent_pids and p.execs
    ]
    if others:
        add(("", ""))
        add(("bold", f"Processes no tool call explains ({len(others)})"))
        for p in others[:max_items]:
            add(("", f"  {p.pid} {_short(_cmdline(p.argv, p.exe), limit)}"))
        if len(others) > max_items:
            add(("dim", f"  … {len(others) - max_items} more"))
    return out
