"""The terminal summary of a run (``spyglass show RUN``), built from the report data.

Order: the header (agent, task, command, duration, exit, mode, backend);
alerts first, grouped by level, each with its process, lineage and the
event that fired it; the process tree with command lines (routine helpers
such as ``uname`` or ``ldconfig`` folded into one line); files written,
deleted and renamed; hosts with the proxy's allow/deny; skill coverage and
gate results where the run has them.

On a terminal: colour, and long lines wrapped at word boundaries with a
hanging indent.  Piped: plain text, no escape codes, no line ever cut or
wrapped, so ``grep`` sees whole command lines.
"""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Mapping, Sequence
from typing import IO, Any

from spyglass.events import LEVELS
from spyglass.events.proctree import ProcInfo
from spyglass.report.collect import ReportData, collect_run
from spyglass.report.describe import (
    command_text,
    describe_event,
    exit_text,
    host_role,
    is_routine_program,
    lineage_root_first,
)
from spyglass.report.verdict import lineage_view
from spyglass.safetext import visible
from spyglass.store import RunReader

Line = tuple[str, str]  # (rich style, text); style "" is plain

LEVEL_STYLE = {
    "critical": "bold white on red",
    "high": "bold red",
    "medium": "yellow",
    "low": "cyan",
    "info": "dim",
}
#: the heading of each kind of write in `show`
WRITE_LABELS = (
    ("file.create", "Files created or opened for writing"),
    ("file.write", "Files written"),
    ("file.delete", "Files deleted"),
    ("file.rename", "Files renamed"),
    ("file.truncate", "Files truncated"),
    ("file.chmod", "Mode changed"),
    ("file.mkdir", "Directories made"),
    ("file.link", "Files hard-linked"),
    ("file.symlink", "Symlinks made"),
    ("file.chown", "Owner changed"),
)


def _header(data: ReportData) -> list[Line]:
    m = data.meta
    d = data.digest
    if m.exit_code is not None:
        ex = f"exit {m.exit_code}"
    elif m.signal:
        ex = f"killed by {m.signal}"
    else:
        ex = "no exit status"
    dur = f"{m.duration_s:.2f}s" if m.duration_s is not None else "-"
    out: list[Line] = [("bold", f"run {m.id}  [{m.status}]")]
    if data.anchor_problem:
        out.append(("bold red", f"  EVIDENCE DOES NOT MATCH ITS ANCHOR: {data.anchor_problem} "
                                f"(`spyglass verify {m.id}`)"))
    out.append(("", f"  agent     {m.agent_id or '-'}    task {m.task or '-'}"))
    out.append(("", f"  command   {shlex.join(m.command) if m.command else '-'}"))
    out.append(
        (
            "",
            f"  duration  {dur}    {ex}    mode {m.mode}    backend {m.backend or '-'}"
            + ("    sandboxed" if m.sandbox else ""),
        )
    )
    reason = m.extra.get("backend_reason")
    if reason:
        out.append(("dim", f"  capture   {reason}"))
    lost = (m.capture or {}).get("lost") or 0
    if lost:
        kinds = [str(n) for n in (m.capture or {}).get("notes") or [] if "lost" in str(n)]
        out.append(
            ("bold red", f"  LOST      {lost} kernel record(s) did not fit: {kinds[0] if kinds else 'see run.json'}")
        )
    if m.stopped_by:
        out.append(("bold red", f"  stopped by rule {m.stopped_by}"))
    following = m.extra.get("following")
    if m.status == "running" and isinstance(following, dict):
        out.append(("yellow", f"  still recording: the agent exited ({following.get('agent_exit')}); "
                              f"following the {len(following.get('pids') or [])} process(es) it left"))
    if m.status == "incomplete":
        out.append(("yellow", "  the monitor stopped before the run ended: the record holds every event up to then"))
    elif m.status == "monitor-lost":
        out.append(("bold red", "  the tracer stopped while the run went on: later actions are unrecorded"))
        lost = m.extra.get("monitor_lost")
        if isinstance(lost, dict) and lost.get("detail"):  # spyglass died; its watchdog said what it saw
            out.append(("bold red", f"  {lost['detail']} (noted by the watchdog)"))
    elif m.status == "failed" and not m.extra.get("failure"):
        out.append(("bold red", "  the agent never ran (see the capture notes for why)"))
    out.extend(_witness_lines(m.extra))
    counts = ", ".join(f"{k} {v}" for k, v in sorted(d.counts.items()))
    out.append(("", f"  events    {d.events}" + (f" ({counts})" if counts else "")))
    return out


def _witness_lines(extra: Mapping[str, Any]) -> list[Line]:
    """The policy the run used, its anchor, and anything that kept its evidence from being whole."""
    out: list[Line] = []
    if extra.get("failure"):
        out.append(("bold red", f"  not started: {extra['failure']}"))
    pol = extra.get("policy")
    if isinstance(pol, dict):
        src = pol.get("source") or "built-in defaults"
        out.append(("", f"  policy    {src} ({pol.get('origin')}), sha256 {str(pol.get('digest'))[:16]}"))
    if extra.get("anchor"):
        out.append(("", f"  anchor    {extra['anchor']}"))
    run_dir = extra.get("run_dir")
    if isinstance(run_dir, dict):
        out.append(("bold red", f"  {run_dir.get('problem')}: restored {run_dir.get('restored')}; "
                                f"lost {run_dir.get('lost')}"))
    for line in extra.get("evidence_failures") or []:
        out.append(("bold red", f"  not saved: {line}"))
    for a in extra.get("unsaved_alerts") or []:
        out.append(("bold red", f"  alert NOT SAVED in alerts.jsonl: {str(a.get('level')).upper()} "
                                f"{a.get('rule_id')}: {a.get('message')}"))
    return out


def _alerts(data: ReportData, max_items: int, full: bool = False) -> list[Line]:
    alerts = data.alerts
    head: list[Line] = []
    if data.anchor_problem:
        row = data.anchored_alerts
        said = (f"; the index recorded {row.count} alert(s)" + (f" (max {row.max_level})" if row.max_level else "")
                if row is not None else "")
        head = [("bold red", f"Alerts: the record does not match its anchor{said}; "
                                         f"alerts.jsonl now holds {len(alerts)}, which cannot be trusted")]
        if not alerts:
            return head
    if not alerts and data.meta.extra.get("unsaved_alerts"):
        return [("bold red", "Alerts: none saved (see NOT SAVED above)")]
    if not alerts:
        return [("green", "Alerts: none")]
    out: list[Line] = [*head, ("bold", f"Alerts ({len(alerts)})")]
    for level in reversed(LEVELS):
        group = [a for a in alerts if a.level == level]
        if not group:
            continue
        out.append((LEVEL_STYLE[level], f"  {level.upper()} ({len(group)})"))
        for a in group[:max_items]:
            out.append((LEVEL_STYLE[level], f"    {a.rule_id}: {a.title}"))
            if a.message and a.message != a.title:
                out.append(("", f"      {a.message}"))
            if a.argv or a.exe:
                out.append(("", f"      process  {a.pid} {command_text(a.argv, a.exe)}"))
            chain = lineage_root_first(a)
            if len(chain) > 1:
                out.append(("dim", "      lineage"))
                view = lineage_view([{"pid": e.pid, "tool_call": e.tool_call,
                                      "cmd": command_text(e.argv, e.exe, limit=0 if full else ARGV_LIMIT)}
                                     for e in chain], [e.argv for e in chain])
                for depth, v in enumerate(view):
                    tool = f"  ({v['tool_call']})" if v["tool_call"] else ""
                    what = f"[{v['label']}]" if v["label"] else " ".join(v["cmd"].split())
                    out.append(("dim", f"        {'  ' * depth}{v['pid']} {what}{tool}"))
            for s in a.event_seqs[:3]:
                ev = data.alert_events.get(s)
                if ev is not None:
                    out.append(("", f"      event    #{s} {ev.type} {describe_event(ev)}"))
            if len(a.event_seqs) > 3:
                out.append(("dim", f"      … {len(a.event_seqs) - 3} more events"))
        if len(group) > max_items:
            out.append(
                (
                    "dim",
                    f"    … {len(group) - max_items} more {level} alerts (spyglass show RUN --format json)",
                )
            )
    return out


#: Command lines longer than this are elided in ``show`` (``show --full`` prints them whole).
ARGV_LIMIT = 160


def _proc_line(data: ReportData, p: ProcInfo, depth: int, full: bool = False) -> Line:
    counts: Mapping[str, int] = data.proc_counts.get(p.pid, {})
    bits = [exit_text(p)]
    if counts.get("file-change"):
        n = counts["file-change"]
        bits.append(f"{n} file change{'s' if n > 1 else ''}")
    if counts.get("net"):
        bits.append(f"{counts['net']} network")
    n_alerts = data.proc_alerts.get(p.pid, 0)
    if n_alerts:
        bits.append(f"{n_alerts} alert{'s' if n_alerts > 1 else ''}")
    style = "red" if n_alerts else ""
    cmd = command_text(p.argv, p.exe) if full else " ".join(command_text(p.argv, p.exe, limit=ARGV_LIMIT).split())
    return style, f"  {'  ' * depth}{p.pid} {cmd}  ({', '.join(bits)})"


def _routine(data: ReportData, p: ProcInfo) -> bool:
    c: Mapping[str, int] = data.proc_counts.get(p.pid, {})
    return (
        is_routine_program(p.exe, p.argv)
        and not p.children
        and not data.proc_alerts.get(p.pid)
        and not c.get("file-change")
        and not c.get("net")
    )


def _quiet(data: ReportData, p: ProcInfo) -> bool:
    c: Mapping[str, int] = data.proc_counts.get(p.pid, {})
    return not p.children and not data.proc_alerts.get(p.pid) and not c.get("file-change") and not c.get("net")


def _processes(data: ReportData, max_items: int, full: bool = False) -> list[Line]:
    procs = data.digest.procs
    out: list[Line] = [("bold", f"Processes ({len(procs.procs)})")]
    roots = sorted(
        (p for p in procs.procs.values() if p.ppid is None or p.ppid not in procs.procs),
        key=lambda p: p.start_ts,
    )
    shown = 0
    limit = len(procs.procs) + 1 if full else max_items * 3
    stack: list[tuple[ProcInfo, int]] = [(p, 0) for p in reversed(roots)]
    seen: set[int] = set()
    while stack and shown < limit:
        p, depth = stack.pop()
        if p.pid in seen:
            continue
        seen.add(p.pid)
        out.append(_proc_line(data, p, depth, full))
        shown += 1
        kids = [procs.procs[c] for c in p.children if c in procs.procs]
        routine = [] if full else [k for k in kids if _routine(data, k)]
        if routine:
            names = sorted({(k.exe or command_text(k.argv)).rsplit("/", 1)[-1] for k in routine})
            out.append(
                (
                    "dim",
                    f"  {'  ' * (depth + 1)}+ {len(routine)} routine helper"
                    f"{'s' if len(routine) > 1 else ''} folded ({', '.join(names)})",
                )
            )
            seen.update(k.pid for k in routine)
        if not full:  # quiet children running the same command: the first, then a count
            groups: dict[str, list[ProcInfo]] = {}
            for k in kids:
                if k.pid not in seen and _quiet(data, k):
                    groups.setdefault(command_text(k.argv, k.exe), []).append(k)
            for same in groups.values():
                if len(same) > 2:
                    seen.update(k.pid for k in same[1:])
                    out_cmd = " ".join(command_text(same[0].argv, same[0].exe, limit=60).split())
                    out.append(("dim", f"  {'  ' * (depth + 1)}+ {len(same) - 1} more like {out_cmd}"))
        stack.extend((k, depth + 1) for k in reversed(kids) if k.pid not in seen)
    rest = len(procs.procs) - len(seen)
    if rest > 0:
        out.append(("dim", f"  … {rest} more (spyglass show --full RUN, spyglass events RUN --type process.exec)"))
    return out


def _agent_dir(data: ReportData) -> str | None:
    """The agent's per-run directory (config, transcript) of a ``--model-script`` run."""
    extra = data.meta.extra if isinstance(data.meta.extra, dict) else {}
    stub = extra.get("model_stub")
    d = stub.get("agent_dir") if isinstance(stub, dict) else None
    return d.rstrip("/") + "/" if isinstance(d, str) and d else None


def _files(data: ReportData, max_items: int, full: bool = False) -> list[Line]:
    out: list[Line] = []
    own = None if full else _agent_dir(data)
    for t, label in WRITE_LABELS:
        paths = data.digest.writes.get(t)
        if not paths:
            continue
        folded = [p for p in paths if own and p.startswith(own)]
        shown = [p for p in paths if not (own and p.startswith(own))]
        out.append(("", ""))
        out.append(("bold", f"{label} ({len(paths)})"))
        if folded:
            out.append(("dim", f"  + {len(folded)} in the agent's own per-run directory {own} (show --full)"))
        paths = shown
        out.extend(("", f"  {p}") for p in paths[:max_items])
        if len(paths) > max_items:
            out.append(("dim", f"  … {len(paths) - max_items} more (spyglass events RUN --type {t})"))
    if data.digest.probes:
        out.append(("", ""))
        out.append(("dim", f"{data.digest.probes} failed probe(s) folded: opens of files that are not there "
                           "(spyglass events RUN --noise)"))
    return out


def _hosts(data: ReportData, max_items: int) -> list[Line]:
    d = data.digest
    if not d.hosts and not data.proxy:
        return []
    out: list[Line] = [("", ""), ("bold", f"Hosts ({len(d.hosts)})")]
    route = "bypassed proxy" if data.meta.sandbox else "direct"
    for h in list(d.hosts.values())[: max_items * 2]:
        name = f"{h.domain} ({h.address})" if h.domain else h.address
        port = f":{h.port}" if h.port is not None else ""
        fail = f", {h.failed} failed" if h.failed else ""
        style = "red" if h.decision == "deny" else ""
        role = host_role(h.address, h.port, data.meta)
        if role != "host":
            style = "dim"
            route = "spyglass plumbing (the sandbox's proxy relay)" if role == "plumbing" else "local IPC"
        else:
            route = "bypassed proxy" if data.meta.sandbox else "direct"
        out.append(
            (
                style,
                f"  {h.transport or '?':5} {name}{port}  x{h.count}{fail}  {h.decision or route}",
            )
        )
    for pd in data.proxy[: max_items * 2]:
        if pd.decision == "deny" or pd.rule:
            port = f":{pd.port}" if pd.port is not None else ""
            style = "red" if pd.decision == "deny" else ""
            out.append(
                (
                    style,
                    f"  proxy {pd.method or 'CONNECT'} {pd.host}{port} {pd.decision or '?'}"
                    + (f" by {pd.rule}" if pd.rule else "")
                    + f"  x{pd.count}",
                )
            )
    return out


def _coverage(data: ReportData) -> list[Line]:
    if not data.coverage:
        return []
    out: list[Line] = [("", ""), ("bold", "Skill coverage")]
    for c in data.coverage:
        cov = c.coverage
        files = len(c.skill.files)
        shown = "n/a (no files)" if cov is None else f"{cov:.0%} ({len(c.touched)}/{files} files)"
        out.append(("", f"  {c.skill.name}: {shown}"))
        for f in c.findings:
            out.append((LEVEL_STYLE.get(f.level, ""), f"    {f.level}: {f.message}"))
    return out


def _gate(data: ReportData) -> list[Line]:
    extra = data.meta.extra if isinstance(data.meta.extra, dict) else {}
    gate: Any = extra.get("gate")
    if not gate:
        return []
    out: list[Line] = [("", ""), ("bold", "Gate")]
    if isinstance(gate, dict):
        if "passed" in gate:
            out.append(("green" if gate["passed"] else "bold red", f"  {'passed' if gate['passed'] else 'FAILED'}"))
        for chk in gate.get("checks") or gate.get("requirements") or []:
            if isinstance(chk, dict):
                ok = chk.get("passed", chk.get("ok"))
                mark = "ok  " if ok else "FAIL"
                out.append(
                    (
                        "" if ok else "red",
                        f"  {mark} {chk.get('name') or chk.get('id')}: "
                        f"{chk.get('message') or chk.get('detail') or ''}".rstrip(": "),
                    )
                )
    else:
        out.append(("", f"  {gate}"))
    return out


def _agent(data: ReportData, max_items: int) -> list[Line] | None:
    """The Agent and Tool calls sections, for a run of a recognised agent (``run.json`` ``extra.agent``)."""
    extra = data.meta.extra if isinstance(data.meta.extra, dict) else {}
    agent = extra.get("agent")
    if not isinstance(agent, dict) or not agent.get("agent"):
        return None
    from spyglass.agents.render import agent_summary_lines

    return agent_summary_lines(agent, data.digest.procs, max_items=max_items)


def summary_lines(data: ReportData, *, max_items: int = 15, full: bool = False) -> list[Line]:
    """The summary as (style, text) lines, none of them cut.  An agent run gets the Agent and
    Tool calls sections instead of the process tree; ``full``: the whole tree, argv unshortened."""
    out = _header(data)
    evidence = data.meta.extra.get("evidence")
    if isinstance(evidence, dict) and evidence.get("partial"):
        failed = ", ".join(f"{k} ({v}x)" for k, v in sorted((evidence.get("sink_errors") or {}).items()))
        out.append(("yellow", f"Evidence is partial: {failed or 'a component'} failed during the run"))
    out.append(("", ""))
    out.extend(_alerts(data, max_items, full))
    out.append(("", ""))
    agent = None if full else _agent(data, max_items)
    out.extend(agent if agent is not None else _processes(data, max_items, full))
    out.extend(_files(data, max_items, full))
    out.extend(_hosts(data, max_items))
    out.extend(_coverage(data))
    out.extend(_gate(data))
    m = data.meta
    term = m.extra.get("terminal")
    if isinstance(term, dict):
        cut = " (cut at its size limit)" if term.get("cut") else ""
        out.append(("", ""))
        out.append(("bold", f"Terminal recorded: {term.get('seconds', 0):.1f} s, {term.get('output_chars', 0)} "
                            f"characters of output, {term.get('input_chars', 0)} typed{cut}"))
        out.append(("", f"  spyglass terminal {m.id}   (--play to replay, --format cast for asciinema)"))
    if m.still_running:
        out.append(("", ""))
        out.append(("yellow", f"Still running when recording stopped ({len(m.still_running)})"))
        out.extend(("", f"  {s.get('pid')} {command_text(s.get('argv'))}") for s in m.still_running[:max_items])
    return out


def wrap_line(text: str, width: int) -> list[str]:
    """``text`` wrapped at spaces to ``width`` with a hanging indent; words are never split."""
    if width <= 0 or len(text) <= width:
        return [text]
    indent = len(text) - len(text.lstrip(" "))
    hang = " " * min(indent + 4, width // 2)
    return textwrap.wrap(
        text,
        width=width,
        subsequent_indent=hang,
        break_long_words=False,
        break_on_hyphens=False,
        drop_whitespace=True,
        initial_indent="",
    ) or [text]


def print_lines(lines: Sequence[Line], stream: IO[str], *, color: bool | None = None) -> None:
    """Plain text when ``stream`` is not a terminal (or ``color`` is False); else colour and wrapping."""
    from spyglass.termcolor import use_color

    if not use_color(stream, color):
        for _style, text in lines:
            stream.write(visible(text) + "\n")
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(file=stream, highlight=False, soft_wrap=True, force_terminal=True, no_color=False)
    width = console.width
    for style, text in lines:
        for part in wrap_line(visible(text), width):
            console.print(Text(part, style=style))


def print_run_summary(
    reader: RunReader, stream: IO[str], *, color: bool | None = None, full: bool = False
) -> ReportData:
    """What ``spyglass show RUN`` prints; returns the data it was drawn from."""
    data = collect_run(reader, max_events=0, context=0, with_verify=False)
    try:
        from spyglass.evidence.anchorcheck import anchor_mismatch

        data.anchor_problem = anchor_mismatch(reader) or ""
        if data.anchor_problem:
            from spyglass.evidence.anchorcheck import anchored_alerts

            data.anchored_alerts = anchored_alerts(reader)
    except ImportError:  # an installation without the evidence component
        pass
    print_lines(summary_lines(data, full=full), stream, color=color)
    return data
