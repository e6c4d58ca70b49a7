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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spyglass.agents.agent_logs import (
    ToolCall,
    log_from_argv,
    looks_like_agent_log,
    read_agent_log,
    unwrap_shell,
)
from spyglass.events.schema import Event
from spyglass.pipeline import RunContext, Sink

AGENT, INTERNAL, TOOL, OTHER, PENDING = "agent", "internal", "tool", "other", "pending"

#: Markers of scripts that agents run for themselves through a shell.
_INTERNAL_SCRIPT_MARKERS = (
    "# Snapshot file",  # codex: snapshot of the user's shell environment
    "__codex_snapshot",
    "/shell_snapshots/",  # codex: checking a snapshot it wrote
)
#: Markers of agent wrapper scripts that set the environment up and then exec
#: the model's command in the same process (codex restores its shell snapshot).
_WRAPPER_SCRIPT_MARKERS = ("__CODEX_SNAPSHOT_OVERRIDE",)


def _base(s: str | None) -> str:
    return s.rsplit("/", 1)[-1] if s else ""


def agent_signature(exe: str | None, argv: Sequence[str] | None) -> str | None:
    """``"codex"``/``"mini"`` if this exec is the agent itself, else None."""
    args = list(argv or [])
    a0 = _base(args[0]) if args else ""
    exe_b = _base(exe)
    if any(a.startswith("--codex-run-as-") for a in args[1:3]):
        return "codex"
    if exe_b == "codex" or a0 in ("codex", "codex.js"):
        return "codex"
    node = a0 in ("node", "nodejs") or exe_b in ("node", "nodejs")
    if node and len(args) > 1 and _base(args[1]) in ("codex", "codex.js"):
        return "codex"
    if a0 in ("mini", "mini-extra", "mini-swe-agent") or exe_b in ("mini", "mini-extra"):
        return "mini"
    if a0.startswith("python") or exe_b.startswith("python"):
        if len(args) > 1 and _base(args[1]) in ("mini", "mini-extra", "mini-swe-agent"):
            return "mini"
        if "-m" in args[1:3]:
            i = args.index("-m")
            if i + 1 < len(args) and args[i + 1].startswith("minisweagent"):
                return "mini"
    return None


def _is_setup_reexec(argv: Sequence[str] | None) -> bool:
    """codex re-executes itself to set a command up, then execs the command."""
    return any(a.startswith("--codex-run-as-") for a in (argv or [])[1:3])


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


@dataclass(slots=True)
class ToolCallLink:
    """A tool call and the process subtree it caused."""

    n: int
    command: str
    source: str  # "log" (matched to the agent's log) or "process tree" (recognised without one)
    call: ToolCall | None = None
    root_pid: int | None = None
    pids: list[int] = field(default_factory=list)
    first_seq: int | None = None
    last_seq: int | None = None
    events: int = 0
    exit_code: int | None = None
    signal: str | None = None

    @property
    def label(self) -> str:
        return f"tool call {self.n}: {self.command}"

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "command": self.command,
            "label": self.label,
            "source": self.source,
            "call_id": self.call.call_id if self.call else None,
            "root_pid": self.root_pid,
            "pids": self.pids,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "events": self.events,
            "exit_code": self.exit_code,
            "signal": self.signal,
        }


@dataclass(slots=True)
class _Proc:
    pid: int
    role: str
    agent: str | None = None
    link: ToolCallLink | None = None
    argv: list[str] | None = None
    exe: str | None = None


@dataclass
class AgentView:
    """The outcome: roles of processes and the tool calls with their subtrees."""

    agent: str | None
    roles: dict[int, str]
    links: list[ToolCallLink]
    unlinked: list[ToolCall]  # calls in the log with no process found for them
    internal: dict[int, str]  # root pid of an internal command -> the command
    log_source: str | None = None

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
        }


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
    ) -> None:
        self.calls: list[ToolCall] = list(calls)
        self.log_complete = log_complete and bool(calls)
        self.refresh = refresh
        self.procs: dict[int, _Proc] = {}
        self.roles: dict[int, str] = {}
        self.links: dict[int, ToolCallLink] = {}  # n -> link
        self.internal: dict[int, str] = {}
        self.agent: str | None = None
        self.labels: dict[int, str] = {}  # pid -> label, kept current (live lineage)
        self.pid_stats: dict[int, list[int]] = {}  # pid -> [first seq, last seq, events]
        self._next_heuristic = 0

    # -- classification ---------------------------------------------------
    def _set(self, p: _Proc, role: str, link: ToolCallLink | None = None) -> None:
        p.role = role
        p.link = link
        self.roles[p.pid] = AGENT if role == PENDING else role
        if link is not None:
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
        text = command_text(argv, ev.exe)
        if any(m in text for m in _WRAPPER_SCRIPT_MARKERS):
            self._set(p, PENDING)  # the command follows in this process
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
        internal = any(m in text for m in _INTERNAL_SCRIPT_MARKERS)
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
            else:
                p = _Proc(pid, parent.role, parent.agent, argv=parent.argv, exe=parent.exe)
            self.procs[pid] = p
            self._set(
                p, p.role, parent.link if parent is not None and parent.role in (TOOL, INTERNAL) else None
            )
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
                    self.agent = self.agent or kind
                    self._set(p, AGENT)
            elif p.role in (AGENT, PENDING):
                if _is_setup_reexec(ev.argv):
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
        st = self.pid_stats.get(pid)
        if st is None:
            self.pid_stats[pid] = [ev.seq, ev.seq, 1]
        else:
            st[1] = ev.seq
            st[2] += 1

    def view(self, log_source: str | None = None) -> AgentView:
        """The roles and links so far (event ranges and counts filled in from every event fed)."""
        linked = {id(link.call) for link in self.links.values() if link.call is not None}
        for link in self.links.values():
            stats = [self.pid_stats[p] for p in link.pids if p in self.pid_stats]
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
        if (
            ev.type == "process.exec"
            and ev.ok
            and named is None
            and agent_signature(ev.exe, ev.argv) == "mini"
        ):
            named = log_from_argv(ev.argv, ev.cwd)
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

    def __init__(self, agent_log: str | Path | None = None, *, auto_detect: bool = True) -> None:
        self.agent_log = str(agent_log) if agent_log else None
        self.auto_detect = auto_detect
        self._log_stat: tuple[float, int] | None = None
        self._calls: list[ToolCall] | None = None
        self.linker = Linker(refresh=self._refresh)
        self._proc_events: list[Event] = []
        self.ctx: RunContext | None = None
        self.final: AgentView | None = None

    def _refresh(self) -> list[ToolCall] | None:
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
        if t.startswith("process."):
            self._proc_events.append(ev)
            if (
                t == "process.exec"
                and self.auto_detect
                and self.agent_log is None
                and ev.ok
                and agent_signature(ev.exe, ev.argv) == "mini"
            ):
                info = self.ctx.procs.get(ev.pid) if self.ctx is not None else None
                cwd = ev.cwd or (info.cwd if info is not None else None)
                self.agent_log = log_from_argv(ev.argv, cwd)
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

    def done(self, ctx: RunContext) -> None:
        calls: list[ToolCall] = []
        if self.agent_log:
            try:
                calls = read_agent_log(self.agent_log).tool_calls
            except Exception:
                calls = []
        if calls:
            linker = Linker(calls, log_complete=True)
            for ev in self._proc_events:
                linker.feed(ev)
            linker.pid_stats = self.linker.pid_stats
            view = linker.view(self.agent_log)
        else:
            view = self.linker.view(self.agent_log)
        self.final = view
        ctx.tool_calls.clear()
        ctx.tool_calls.update(view.labels())
        if view.agent or view.links:
            ctx.note_fact("agent", view.to_json())
