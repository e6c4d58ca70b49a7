"""Agent awareness: which processes are the agent's own, and which ran a tool call.

Real agent CLIs start many processes that the model never asked for: a node
launcher that re-executes a native binary, start-up probes (``lsb_release``,
``getconf``, ``uname``), a login shell that snapshots the user's environment,
a re-execution of the agent binary that sets up each command.  The commands
the model asked for run beside them.  This module sorts every process of a
run into one of these roles:

``agent``
    the agent itself (``codex``, its node launcher and re-executions;
    mini-swe-agent's Python process), and processes it forked that never ran
    anything else;
``internal``
    a program the agent ran for itself, with everything under it;
``tool``
    a command the model asked for (a tool call) with everything under it;
``other``
    anything outside the agent (a wrapper script around it, say).

A child of the agent becomes a tool call when its command matches the next
unlinked call of the agent's log (codex ``--json`` output or session
rollout, mini-swe-agent trajectory; see :mod:`spyglass.agents.agent_logs`),
or, without a log entry for it, when it is a shell running a command string
(``sh -c CMD``, ``bash -lc CMD``) that is not one of the agent's known
internal scripts.  Everything else the agent starts is internal to it.

The core, :class:`Linker`, is fed events one by one and knows nothing of
files, so the same code serves a live run (:class:`AgentAwareness`, a
pipeline sink that keeps ``ctx.tool_calls`` = pid -> "tool call N:
CMD" current for alert lineages) and a stored run (:func:`link_tool_calls`).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from spyglass.agents.adapters import AgentAdapter, adapter_named, all_adapters, recognise
from spyglass.agents.agent_logs import (
    ToolCall,
    looks_like_agent_log,
    read_agent_log,
    unwrap_shell,
)
from spyglass.agents.compact import Compact, PidStats, compact, expand
from spyglass.agents.mcp import label as mcp_label
from spyglass.agents.mcp import match_server
from spyglass.agents.view import (
    AGENT,
    INTERNAL,
    MCP,
    OTHER,
    PENDING,
    TOOL,
    AgentView,
    ToolCallLink,
    hook_calls,
    mark_hooks,
)
from spyglass.events.schema import Event
from spyglass.pipeline import RunContext, Sink

if TYPE_CHECKING:  # only with --ask or the agent's hooks (session/agent.py imports them then)
    from spyglass.agents.ask import PolicyAsk
    from spyglass.agents.hooks import HookServer

__all__ = [
    "AGENT",
    "INTERNAL",
    "OTHER",
    "PENDING",
    "TOOL",
    "AgentAwareness",
    "AgentView",
    "Linker",
    "ToolCallLink",
    "agent_signature",
    "command_text",
    "find_agent_log",
    "hook_calls",
    "link_tool_calls",
    "mark_hooks",
]


def _base(s: str | None) -> str:
    return s.rsplit("/", 1)[-1] if s else ""


def agent_signature(exe: str | None, argv: Sequence[str] | None) -> str | None:
    """The adapter name (``"codex"``, ``"claude"``, ``"mini"``) if this exec is the agent itself, else None."""
    adapter = recognise(exe, argv)
    return adapter.name if adapter is not None else None


def _adapter(name: str | None) -> AgentAdapter:
    try:
        return adapter_named(name or "generic")
    except KeyError:
        return adapter_named("generic")


def command_text(argv: Sequence[str] | None, exe: str | None = None) -> str:
    """What a person would call the command: ``CMD`` of ``sh -c CMD``, else the argv joined."""
    args = list(argv or [])
    inner = unwrap_shell(args)
    if inner is not None:
        return inner
    if args:
        return shlex.join(args)
    return exe or ""


def _norm(s: str) -> str:
    return " ".join(s.split())


class _Proc(msgspec.Struct):
    """What awareness keeps of one process of the run: its role, its agent, the tool call it serves."""

    pid: int
    role: str
    agent: str | None = None
    link: ToolCallLink | None = None
    argv: list[str] | None = None
    exe: str | None = None
    mcp: str | None = None  # the MCP server this process is (or is under)


class Linker:
    """Sorts processes into roles as events arrive, and links tool calls to subtrees.

    ``calls`` are the tool calls from the agent's log (may be empty).  When
    ``log_complete`` is false (a live run whose log is still being written), a
    shell command with no log entry yet is still taken for a tool call; when
    true, only calls found in the log are (a shell the agent runs for itself is
    internal).  ``refresh`` is called, if given, before a new child of the
    agent is classified, and may return newer calls (a live log re-read).
    """

    def __init__(
        self,
        calls: Sequence[ToolCall] = (),
        *,
        log_complete: bool = False,
        refresh: Callable[[], Sequence[ToolCall] | None] | None = None,
        mcp_servers: Callable[[str, Sequence[str]], Mapping[str, Sequence[str]]] | None = None,
        evict_other: bool = False,
    ) -> None:
        #: forget a process outside the agent once it exited (the live sink: memory stays bounded)
        self.evict_other = evict_other
        self.calls: list[ToolCall] = list(calls)
        self.mcp_servers = mcp_servers
        self._mcp: Mapping[str, Sequence[str]] = {}
        self.mcp_pids: dict[str, list[int]] = {}  # MCP server name -> its processes
        self.log_complete = log_complete and bool(calls)
        self.refresh = refresh
        self.procs: dict[int, _Proc] = {}
        self.roles: dict[int, str] = {}
        self.links: dict[int, ToolCallLink] = {}  # n -> link
        self.internal: dict[int, str] = {}
        self.agent: str | None = None
        self.labels: dict[int, str] = {}  # pid -> label, kept current (live lineage)
        self.pid_stats = PidStats()
        self._next_heuristic = 0

    # -- classification ---------------------------------------------------
    def _set(self, p: _Proc, role: str, link: ToolCallLink | None = None) -> None:
        p.role = role
        p.link = link
        self.roles[p.pid] = AGENT if role == PENDING else role
        if role == MCP and p.mcp:
            self.labels[p.pid] = mcp_label(p.mcp)
            self.mcp_pids.setdefault(p.mcp, []).append(p.pid)
        elif link is not None:
            if p.pid not in link.pids:
                link.pids.append(p.pid)
            self.labels[p.pid] = link.label
        else:
            self.labels.pop(p.pid, None)

    def _match(self, argv: list[str], text: str) -> ToolCall | None:
        linked = self.links
        want = _norm(text)
        for c in self.calls:
            if c.n in linked and linked[c.n].call is c:
                continue
            if (c.argv and c.argv == argv) or _norm(c.command) == want:
                return c
        return None

    def _classify(self, p: _Proc, ev: Event) -> None:
        argv = list(ev.argv or [])
        adapter = _adapter(p.agent or self.agent)
        text = adapter.model_command(command_text(argv, ev.exe))
        if any(m in text for a in all_adapters() for m in a.wrapper_markers):
            self._set(p, PENDING)  # the command follows in this process
            return
        server = match_server(self._mcp, argv, text) if self._mcp else None
        if server is not None:
            p.mcp = server
            self._set(p, MCP)
            return
        if self.refresh is not None:
            newer = self.refresh()
            if newer is not None:
                self.calls = list(newer)
        call = self._match(argv, text)
        if call is not None:
            link = self.links.get(call.n)
            if link is None or link.call is not call:
                link = ToolCallLink(n=call.n, command=call.command, source="log", call=call)
                self.links[call.n] = link
            link.root_pid = p.pid
            self._set(p, TOOL, link)
            return
        is_shell = unwrap_shell(argv) is not None
        internal = text in adapter.internal_commands or any(
            m in text for a in all_adapters() for m in a.internal_markers
        )
        if is_shell and not internal and not self.log_complete:
            used = set(self.links)
            n = max([*used, *(c.n for c in self.calls), self._next_heuristic]) + 1
            self._next_heuristic = n
            link = ToolCallLink(n=n, command=text, source="process tree", root_pid=p.pid)
            self.links[n] = link
            self._set(p, TOOL, link)
            return
        self.internal[p.pid] = text if len(text) <= 200 else text[:199] + "…"
        self._set(p, INTERNAL)

    # -- feeding ----------------------------------------------------------
    def feed(self, ev: Event) -> None:
        t = ev.type
        pid = ev.pid
        if t == "process.start":
            parent = self.procs.get(ev.ppid) if ev.ppid is not None else None
            if parent is None:
                p = _Proc(pid, OTHER)
            elif parent.role in (AGENT, PENDING):
                p = _Proc(pid, PENDING, parent.agent, argv=parent.argv, exe=parent.exe)
            elif parent.role == MCP:
                p = _Proc(pid, MCP, parent.agent, mcp=parent.mcp)
            else:
                p = _Proc(pid, parent.role, parent.agent, argv=parent.argv, exe=parent.exe)
            self.procs[pid] = p
            self._set(p, p.role, parent.link if parent is not None and parent.role in (TOOL, INTERNAL) else None)
        elif t == "process.exec" and ev.ok:
            known = self.procs.get(pid)
            if known is None:
                p = self.procs[pid] = _Proc(pid, OTHER)
                self._set(p, OTHER)
            else:
                p = known
            p.argv, p.exe = list(ev.argv or []), ev.exe
            kind = agent_signature(ev.exe, ev.argv)
            if p.role == OTHER:
                if kind is not None:
                    p.agent = kind
                    if self.agent is None and self.mcp_servers is not None:
                        self._mcp = self.mcp_servers(kind, p.argv or [])
                    self.agent = self.agent or kind
                    self._set(p, AGENT)
            elif p.role in (AGENT, PENDING):
                if _adapter(p.agent).is_setup_reexec(ev.argv):
                    self._set(p, PENDING)
                elif kind is not None and kind == (p.agent or kind):
                    p.agent = kind
                    self._set(p, AGENT)
                else:
                    self._classify(p, ev)
        elif t == "process.exit":
            ended = self.procs.get(pid)
            if ended is not None and ended.link is not None and ended.link.root_pid == pid:
                ended.link.exit_code, ended.link.signal = ev.exit_code, ev.signal
            if self.evict_other and ended is not None and ended.role == OTHER:
                del self.procs[pid]
                self.roles.pop(pid, None)
                return
        if self.roles.get(pid, OTHER) != OTHER:  # only the agent's processes make tool calls
            self.pid_stats.note(pid, ev.seq)

    def view(self, log_source: str | None = None) -> AgentView:
        """The roles and links so far (event ranges and counts filled in from every event fed)."""
        linked = {id(link.call) for link in self.links.values() if link.call is not None}
        for link in self.links.values():
            stats = [st for p in link.pids if (st := self.pid_stats.get(p)) is not None]
            if stats:
                link.first_seq = min(s[0] for s in stats)
                link.last_seq = max(s[1] for s in stats)
                link.events = sum(s[2] for s in stats)
        return AgentView(
            agent=self.agent,
            roles=dict(self.roles),
            links=sorted(self.links.values(), key=lambda link: link.n),
            unlinked=[c for c in self.calls if id(c) not in linked],
            internal=dict(self.internal),
            log_source=log_source,
            mcp={name: list(pids) for name, pids in self.mcp_pids.items()},
        )


def link_tool_calls(
    events: Iterable[Event], calls: Sequence[ToolCall] | None = None, log_source: str | None = None
) -> AgentView:
    """Offline: roles and tool-call subtrees of a whole run; ``calls`` from its agent log, if any."""
    linker = Linker(calls or (), log_complete=bool(calls))
    for ev in events:
        linker.feed(ev)
    return linker.view(log_source)


def find_agent_log(events: Iterable[Event]) -> str | None:
    """The path of a session log an agent wrote during the run: a codex rollout, a
    mini-swe-agent trajectory (``*.traj.json``, or the ``-o`` file of its command line)."""
    named: str | None = None
    found: str | None = None
    for ev in events:
        if ev.type == "process.exec" and ev.ok and named is None:
            adapter = recognise(ev.exe, ev.argv)
            named = adapter.log_from_argv(ev.argv, ev.cwd) if adapter is not None else None
        elif (
            ev.type in ("file.create", "file.write")
            and ev.ok
            and ev.path
            and found is None
            and (looks_like_agent_log(ev.path) or ev.path == named)
        ):
            found = ev.path
    return found or named


class AgentAwareness(Sink):
    """Pipeline sink: keeps ``ctx.tool_calls`` (pid -> "tool call N: CMD") current,
    and at the end stores the linked tool calls in the run's metadata
    (``run.json`` ``extra.agent``).

    Put it before the rule engine in the sink list, so that a tool call's
    processes are labelled before rules look at their events.  The agent log
    is ``agent_log`` if given, else the session log the agent is seen writing
    (codex rollout, mini trajectory); it is re-read when it grew, before each
    new command of the agent is classified, and read whole at the end, when the
    tool calls are linked again from every process event kept.
    """

    name = "agent-awareness"

    def __init__(
        self,
        agent_log: str | Path | None = None,
        *,
        auto_detect: bool = True,
        hooks: HookServer | None = None,
        asker: PolicyAsk | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> None:
        self.agent_log = str(agent_log) if agent_log else None
        self.env, self.cwd = dict(env or {}), cwd
        self.hooks = hooks
        self.asker = asker
        self.auto_detect = auto_detect
        self._log_stat: tuple[float, int] | None = None
        self._calls: list[ToolCall] | None = None
        self.linker = Linker(refresh=self._refresh, mcp_servers=self._mcp_servers, evict_other=True)
        #: process events, compact, to link tool calls again from the whole agent log at the end
        self._proc_events: list[Compact] = []
        self._strings: dict[str, str] = {}
        self.ctx: RunContext | None = None
        self.final: AgentView | None = None

    def _mcp_servers(self, agent: str, argv: Sequence[str]) -> Mapping[str, Sequence[str]]:
        cwd = self.cwd or (self.ctx.root_cwd if self.ctx is not None else "") or os.getcwd()
        try:
            return _adapter(agent).mcp_servers(cwd, self.env or dict(os.environ), argv)
        except Exception:  # a configuration we cannot read names no server
            return {}

    def _refresh(self) -> list[ToolCall] | None:
        if self.hooks is not None:
            from_hooks = hook_calls(self.hooks.snapshot())
            if from_hooks:  # reported before each tool ran: always current
                return from_hooks
        path = self.agent_log
        if not path:
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        key = (st.st_mtime, st.st_size)
        if key != self._log_stat:
            self._log_stat = key
            try:
                self._calls = read_agent_log(path).tool_calls
            except Exception:  # a log half-written or of an unknown shape: keep what we had
                return self._calls
        return self._calls

    def start(self, ctx: RunContext) -> None:
        self.ctx = ctx
        ctx.tool_calls = self.linker.labels

    def event(self, ev: Event) -> None:
        t = ev.type
        if self.asker is not None and self.ctx is not None and self.ctx.pipeline is not None:
            for iv in self.asker.take_pending():  # decided in the hook server's thread: recorded here
                self.ctx.pipeline.feed(iv.to_event())
        if t.startswith("process."):
            adapter = (
                recognise(ev.exe, ev.argv)
                if t == "process.exec" and self.auto_detect and self.agent_log is None and ev.ok
                else None
            )
            if adapter is not None:
                info = self.ctx.procs.get(ev.pid) if self.ctx is not None else None
                cwd = ev.cwd or (info.cwd if info is not None else None)
                self.agent_log = adapter.log_from_argv(ev.argv, cwd)
        elif (
            self.auto_detect
            and self.agent_log is None
            and t in ("file.create", "file.write")
            and ev.ok
            and ev.path
            and looks_like_agent_log(ev.path)
            and self.linker.roles.get(ev.pid) in (AGENT, None)
        ):
            self.agent_log = ev.path
        self.linker.feed(ev)
        if t.startswith("process.") and self.linker.roles.get(ev.pid, OTHER) != OTHER:
            # kept (compact) to link again from the whole log at the end; a process outside the
            # agent stays outside it whatever the log says, and is not kept
            kept = compact(ev, self._strings)
            if kept is not None:
                self._proc_events.append(kept)

    def done(self, ctx: RunContext) -> None:
        calls: list[ToolCall] = []
        if self.agent_log:
            try:
                calls = read_agent_log(self.agent_log).tool_calls
            except Exception:
                calls = []
        if self.hooks is not None:  # calls the hooks saw that the log lacks (a sub-agent's own transcript)
            known = {c.call_id for c in calls if c.call_id}
            extra = [c for c in hook_calls(self.hooks.snapshot()) if c.call_id not in known]
            for i, c in enumerate(extra, start=len(calls) + 1):
                c.n = i
            calls = [*calls, *extra]
        if calls:
            linker = Linker(calls, log_complete=True, mcp_servers=self._mcp_servers)
            for kept in self._proc_events:
                linker.feed(expand(kept))
            linker.pid_stats = self.linker.pid_stats
            view = linker.view(self.agent_log)
        else:
            view = self.linker.view(self.agent_log)
        if self.hooks is not None:
            mark_hooks(view, self.hooks.snapshot())
        if self.asker is not None:
            view.interventions = [iv.to_json() for iv in self.asker.interventions]
        self.final = view
        ctx.tool_calls.clear()
        ctx.tool_calls.update(view.labels())
        if view.agent or view.links:
            ctx.note_fact("agent", view.to_json())
