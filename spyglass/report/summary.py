"""The terminal summary of a run (``spyglass show`` and the end of ``spyglass run``).

Plain text lines with light markup; colour only when the stream is a terminal,
and lines are never cut when piped.
"""

from __future__ import annotations

import datetime as _dt
import shlex
from typing import IO

from spyglass.events import LEVELS, level_rank
from spyglass.events.proctree import ProcInfo
from spyglass.report.digest import RunDigest

_LEVEL_STYLE = {"critical": "bold red", "high": "red", "medium": "yellow", "low": "cyan", "info": "dim"}
_LOADER_NOISE = ("/usr/bin/lsb_release", "/usr/bin/getconf", "/usr/bin/locale", "/usr/bin/uname")


def _fmt_ts(ns: int | None) -> str:
    if not ns:
        return "-"
    return _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _cmd(argv: list[str] | None, exe: str | None = None, limit: int = 0) -> str:
    if argv:
        text = shlex.join(argv)
    else:
        text = exe or "?"
    if limit and len(text) > limit:
        cut = text.rfind(" ", 0, limit)
        text = text[: cut if cut > limit // 2 else limit] + " …"
    return text


def _exit_text(p: ProcInfo) -> str:
    if p.detached:
        return "still running (detached)"
    if p.signal:
        return f"killed by {p.signal}"
    if p.exit_code is not None:
        return f"exit {p.exit_code}"
    return "no exit seen"


def summary_lines(d: RunDigest, *, max_items: int = 15, width: int = 0) -> list[tuple[str, str]]:
    """(style, text) pairs; style '' is plain."""
    m = d.meta
    out: list[tuple[str, str]] = []
    add = out.append
    status = m.status
    if m.exit_code is not None:
        ex = f"exit {m.exit_code}"
    elif m.signal:
        ex = f"killed by {m.signal}"
    else:
        ex = "no exit status"
    dur = f"{m.duration_s:.2f}s" if m.duration_s is not None else "-"
    add(("bold", f"run {m.id}  [{status}]"))
    add(("", f"  command   {_cmd(m.command, limit=width)}"))
    if m.task or m.agent_id:
        add(("", f"  task      {m.task or '-'}    agent {m.agent_id or '-'}"))
    add(("", f"  started   {_fmt_ts(m.started)}    duration {dur}    {ex}"))
    add(("", f"  backend   {m.backend}    mode {m.mode}{'    sandbox on' if m.sandbox else ''}"))
    if m.stopped_by:
        add(("bold red", f"  stopped by rule {m.stopped_by}"))
    if status == "incomplete":
        add(("yellow", "  the monitor stopped before the run ended: the record holds every event up to then"))
    if d.bad_lines:
        for n, why in d.bad_lines[:5]:
            add(("yellow", f"  events.jsonl line {n} unreadable, skipped: {why}"))
    counts = ", ".join(f"{k} {v}" for k, v in sorted(d.counts.items()))
    add(("", f"  events    {d.events}" + (f" ({counts})" if counts else "")))

    add(("", ""))
    if d.alerts:
        add(("bold", f"Alerts ({len(d.alerts)})"))
        for level in reversed(LEVELS):
            group = [a for a in d.alerts if a.level == level]
            for a in group[:max_items]:
                add((_LEVEL_STYLE[level], f"  {level.upper():8} {a.rule_id}: {a.message or a.title}"))
                add(("", f"           by pid {a.pid}: {_cmd(a.argv, a.exe, limit=width)}"))
                if len(a.lineage) > 1:
                    chain = " <- ".join(
                        e.tool_call or _cmd(e.argv, e.exe, limit=40) for e in a.lineage[1:4]
                    )
                    add(("dim", f"           via {chain}"))
            if len(group) > max_items:
                add(("dim", f"  … {len(group) - max_items} more {level} alerts"))
    else:
        add(("green", "Alerts: none"))

    add(("", ""))
    procs = d.procs
    add(("bold", f"Processes ({len(procs.procs)})"))
    if procs.root_pid is not None:
        shown = 0
        stack: list[tuple[int, int]] = [(procs.root_pid, 0)]
        visited: set[int] = set()
        while stack and shown < max_items * 3:
            pid, depth = stack.pop()
            if pid in visited:
                continue
            visited.add(pid)
            p = procs.get(pid)
            if p is None:
                continue
            if p.exe in _LOADER_NOISE:
                continue
            add(("", f"  {'  ' * depth}{p.pid} {_cmd(p.argv, p.exe, limit=width)}  ({_exit_text(p)})"))
            shown += 1
            for child in reversed(p.children):
                stack.append((child, depth + 1))
        rest = len(procs.procs) - shown
        if rest > 0:
            add(("dim", f"  … {rest} more (spyglass events RUN --type process.exec)"))

    labels = {
        "file.create": "created/opened for writing", "file.write": "written", "file.delete": "deleted",
        "file.rename": "renamed", "file.mkdir": "directories made", "file.chmod": "mode changed",
        "file.truncate": "truncated", "file.link": "hard-linked", "file.symlink": "symlinks made",
        "file.chown": "owner changed",
    }
    for t, label in labels.items():
        paths = d.writes.get(t)
        if not paths:
            continue
        add(("", ""))
        add(("bold", f"Files {label} ({len(paths)})"))
        for p in paths[:max_items]:
            add(("", f"  {p}"))
        if len(paths) > max_items:
            add(("dim", f"  … {len(paths) - max_items} more"))

    if d.hosts:
        add(("", ""))
        add(("bold", f"Hosts ({len(d.hosts)})"))
        for h in list(d.hosts.values())[: max_items * 2]:
            name = f"{h.domain} ({h.address})" if h.domain else h.address
            port = f":{h.port}" if h.port is not None else ""
            extra = f"  {h.decision}" if h.decision else ""
            fail = f", {h.failed} failed" if h.failed else ""
            add(("", f"  {h.transport or '?':5} {name}{port}  x{h.count}{fail}{extra}"))
    if m.still_running:
        add(("", ""))
        add(("yellow", f"Still running when recording stopped ({len(m.still_running)})"))
        for s in m.still_running[:max_items]:
            add(("", f"  {s.get('pid')} {_cmd(s.get('argv'))}"))
    return out


def print_summary(d: RunDigest, stream: IO[str], *, color: bool | None = None) -> None:
    is_tty = bool(getattr(stream, "isatty", lambda: False)())
    color = is_tty if color is None else color
    if not color:
        for _style, text in summary_lines(d):
            stream.write(text + "\n")
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(file=stream, highlight=False, soft_wrap=True)
    for style, text in summary_lines(d, width=max(40, console.width - 20)):
        console.print(Text(text, style=style))


def worst_level(d: RunDigest) -> str | None:
    ranks = [level_rank(a.level) for a in d.alerts]
    return LEVELS[max(ranks)] if ranks else None
