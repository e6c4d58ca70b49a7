"""Looking at stored runs: ``ls``, ``show``, ``events``; and ``doctor``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from spyglass.cli.common import echo_json, format_option, open_reader, open_store, store_option
from spyglass.safetext import visible


@click.command("ls")
@store_option
@format_option("json")
@click.option("--task", help="Only runs of this task.")
@click.option("--agent", "agent", metavar="ID", help="Only runs of this agent (its agent.id, or a prefix of it).")
def ls_cmd(store_path: Path | None, fmt: str, task: str | None, agent: str | None) -> None:
    """List recorded runs, newest last, with the agent identity of each."""
    from spyglass.errors import StoreError
    from spyglass.report.describe import format_ts
    from spyglass.store.store import default_store_path

    try:
        store = open_store(store_path)
    except StoreError:
        if (store_path or default_store_path()).is_dir():
            raise  # a store that cannot be read is not an empty one
        if fmt == "json":
            echo_json([])
        else:
            click.echo("no runs yet: record one with `spyglass run -- CMD`", err=True)
        return
    where: list[str] = []
    params: list[str] = []
    if task:
        where.append("task = ?")
        params.append(task)
    if agent:
        where.append("(agent_id = ? OR agent_id LIKE ? ESCAPE '\\')")
        esc = agent.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        params += [agent, esc + "%"]
    rows = store.index.rows(("WHERE " + " AND ".join(where)) if where else "", tuple(params))
    if fmt == "json":
        echo_json(
            [
                {
                    "id": r["id"],
                    "task": r["task"],
                    "agent_id": r["agent_id"],
                    "status": r["status"],
                    "exit_code": r["exit_code"],
                    "signal": r["signal"],
                    "start": r["started"],
                    "end": r["ended"],
                    "counts": {"events": r["events"], "alerts": r["alerts"]},
                    "max_level": r["max_level"],
                    "command": r["command"],
                }
                for r in rows
            ]
        )
        return
    if not rows:
        click.echo("no runs yet: record one with `spyglass run -- CMD`", err=True)
        return
    for r in rows:
        ex = r["exit_code"] if r["exit_code"] is not None else (r["signal"] or "-")
        alerts = f"{r['alerts']} alerts" + (f" (max {r['max_level']})" if r["max_level"] else "")
        click.echo(visible(
            f"{r['id']}  {r['status']:<11} exit {ex!s:<4} {format_ts(r['started'])}  "
            f"{r['events']:>7} events  {alerts:<20}  {r['agent_id'] or '-'}  {r['task'] or '-'}  {r['command']}"
        ))


@click.command("show")
@store_option
@format_option("json")
@click.option("--full", is_flag=True, help="The whole process tree with every command line unshortened (no folding).")
@click.argument("run", default="latest")
def show_cmd(store_path: Path | None, fmt: str, full: bool, run: str) -> None:
    """Summarise a run: header, alerts, process tree, files changed, hosts.

    For a recognised agent (codex, Claude Code, mini-swe-agent) the process
    tree becomes the Agent section (its own processes folded into a line) and
    the Tool calls section (each command the model asked for, with its exit
    status and programs).  Long command lines are elided and repeated helpers
    counted; `--full` prints everything.

    RUN is a run id, a unique prefix of one, or `latest` (the default).
    """
    from spyglass.report.digest import digest_run
    from spyglass.report.terminal import print_run_summary

    reader = open_reader(store_path, run)
    if fmt == "json":
        doc = digest_run(reader).to_json()
        # the anchor kept outside the run directory, and the policy the run used
        doc["anchor"] = reader.store.index.anchor(reader.id)
        from spyglass.evidence.anchorcheck import anchor_mismatch

        # why the run's files no longer match that anchor (rewritten after the run), else null
        doc["anchor_problem"] = anchor_mismatch(reader)
        doc["policy"] = reader.meta.extra.get("policy")
        echo_json(doc)
        return
    data = print_run_summary(reader, sys.stdout, full=full)
    for n, why in data.digest.bad_lines:
        click.echo(f"spyglass: warning: {reader.events_path}:{n}: unreadable record skipped ({why})", err=True)


@click.command("events")
@store_option
@format_option("json")
@click.option("--type", "types", multiple=True, help="Only these event types (repeatable; prefix like `file.` works).")
@click.option("--pid", "pids", multiple=True, type=int, help="Only these process ids (repeatable).")
@click.option("--path", "path_sub", help="Only events whose file.path contains this text.")
@click.option("--noise", is_flag=True,
              help="Also the failed probes (opens of files that are not there: loaders and interpreters "
                   "trying paths), folded by default.")
@click.argument("run", default="latest")
def events_cmd(
    store_path: Path | None,
    fmt: str,
    types: tuple[str, ...],
    pids: tuple[int, ...],
    path_sub: str | None,
    noise: bool,
    run: str,
) -> None:
    """Print a run's events: time, event number, pid, type, what (JSON lines with --format json,
    each with the run id and the process's `process.entity_id`)."""
    import json
    import shlex
    import time

    from spyglass.events.codec import encode
    from spyglass.events.identity import EntityIds, is_failed_probe

    reader = open_reader(store_path, run)
    entities = EntityIds(reader.id)
    run_field = json.dumps(reader.id).encode()
    folded = 0

    def bad(p: Path, n: int, why: str) -> None:
        click.echo(f"spyglass: warning: {p}:{n}: unreadable record skipped ({why})", err=True)

    out = sys.stdout.buffer if fmt == "json" else None
    for ev in reader.events(on_bad_line=bad):
        entity = entities.of(ev)
        if not noise and is_failed_probe(ev):
            folded += 1
            continue
        if types and not any(ev.type == t or (t.endswith(".") and ev.type.startswith(t)) for t in types):
            continue
        if pids and ev.pid not in pids:
            continue
        if path_sub and (ev.path is None or path_sub not in ev.path):
            continue
        if out is not None:
            line = encode(ev)
            out.write(b'{"run.id":' + run_field + b',"process.entity_id":"' + entity.encode() + b'",'
                      + line[1:] + b"\n")
            continue
        what = ""
        if ev.type.startswith("process."):
            if ev.argv:
                what = shlex.join(ev.argv)
            elif ev.ppid is not None:
                what = f"parent {ev.ppid}"
            elif ev.exit_code is not None or ev.signal:
                what = f"exit {ev.exit_code}" if ev.exit_code is not None else str(ev.signal)
        elif ev.path:
            what = ev.path + (f" -> {ev.target}" if ev.target else "")
        elif ev.address:
            what = f"{ev.domain + ' ' if ev.domain else ''}{ev.address}:{ev.port}"
        elif ev.dns_name:
            what = f"{ev.dns_name} = {', '.join(ev.dns_answers or [])}"
        elif ev.detail:
            what = ev.detail
        fail = f"  [{ev.errno}]" if not ev.ok else ""
        stamp = time.strftime("%H:%M:%S", time.gmtime(ev.ts / 1e9)) + f".{ev.ts // 1_000_000 % 1000:03d}"
        click.echo(visible(f"{stamp} {ev.seq:>7} {ev.pid:>7} {ev.type:<15} {what}{fail}"))
    if folded:
        click.echo(f"spyglass: {folded} failed probe(s) folded (files not there; --noise shows them)", err=True)


@click.command("doctor")
@format_option("json")
def doctor_cmd(fmt: str) -> None:
    """Say which capture backends (and the sandbox) work on this machine, and how to fix what does not."""
    from spyglass.doctor import run_checks

    checks = run_checks()
    if fmt == "json":
        import msgspec

        echo_json([msgspec.to_builtins(c) for c in checks])
    else:
        width = max((len(c.name) for c in checks), default=10)
        for c in checks:
            mark = "ok " if c.available else "NO "
            click.echo(f"{mark} {c.name:<{width}}  {c.detail or c.problem}")
            if not c.available and c.fix:
                click.echo(f"    fix: {c.fix}")
    if not any(c.available for c in checks if c.name in ("strace", "ebpf")):
        sys.exit(5)


COMMANDS = [ls_cmd, show_cmd, events_cmd, doctor_cmd]
