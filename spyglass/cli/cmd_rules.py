"""Security rules and policy commands: check, alerts, rules, policy, report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from spyglass.cli.common import check_output_path, echo_json, format_option, store_option, write_output
from spyglass.safetext import visible

# ---------------------------------------------------------------- helpers


def _load_policy(policy_file: Path | None, cwd: str | Path) -> Any:
    from spyglass.policy import load_policy

    return load_policy(policy_file, cwd)


def _policy_for_run(policy_file: Path | None, reader: Any) -> Any:
    """The explicit --policy, else the policy recorded with the run (its stored text)."""
    from spyglass.policy import load_policy
    from spyglass.policy.loader import policy_for_run

    if policy_file is not None:
        return load_policy(policy_file, Path.cwd())
    meta = reader.meta
    return policy_for_run(meta.extra, meta.policy_digest, meta.cwd or Path.cwd())


def _alert_lines(alerts: list[Any]) -> None:
    from spyglass.cli.common import is_tty
    from spyglass.rules.printer import format_alert_line

    color = is_tty()
    for a in alerts:  # format_alert_line makes every field's control characters visible
        line = format_alert_line(a, color).removeprefix("spyglass: ") + f"  [events {_seqs(a.event_seqs)}]"
        click.echo(line, color=color)


def _seqs(seqs: list[int]) -> str:
    text = ",".join(str(s) for s in seqs[:8])
    return text + (",…" if len(seqs) > 8 else "")


def _alert_key(a: Any) -> tuple[Any, ...]:
    return (a.rule_id, a.level, a.action, a.message, tuple(a.event_seqs), a.pid, a.ts)


def _replay_sinks(reader: Any) -> list[object]:
    """Sinks that ran ahead of the rule engine live: the agent-awareness sink, so
    the lineage of an alert names the agent's tool call offline too."""
    from spyglass.agents.awareness import AgentAwareness

    agent = reader.meta.extra.get("agent") or {}
    log = agent.get("log") if isinstance(agent, dict) else None
    return [AgentAwareness(log if log and Path(log).is_file() else None)]


policy_option = click.option(
    "--policy", "policy_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help="Policy file (default: the policy recorded with the run; without a run: $SPYGLASS_POLICY, "
    "~/.config/spyglass/policy.yaml, /etc/spyglass/policy.yaml, else built-in defaults).",
)

# ---------------------------------------------------------------- check / alerts


@click.command("check")
@store_option
@policy_option
@click.option("--rules", "extra_rules", multiple=True, type=click.Path(exists=True, path_type=Path),
              help="Extra rule file or directory (repeatable).")
@click.option("--fail-on", type=click.Choice(["info", "low", "medium", "high", "critical"]), default=None,
              help="Exit 6 if an alert at or above this level fires.")
@format_option("json")
@click.argument("run", default="latest")
def check_cmd(store_path: Path | None, policy_file: Path | None, extra_rules: tuple[Path, ...],
              fail_on: str | None, fmt: str, run: str) -> None:
    """Re-evaluate a stored RUN under a policy; the same alerts as live.

    Says whether the alerts equal the ones recorded live (they do for the same
    policy and rules).  Exit code 6 with --fail-on when an alert at or above
    that level fires.
    """
    from spyglass.cli.common import open_reader
    from spyglass.errors import EXIT_ALERT
    from spyglass.rules.replay import check_run
    from spyglass.rules.ruleset import load_ruleset
    from spyglass.rules.sinks import fail_on_exceeded, max_level

    reader = open_reader(store_path, run)
    policy = _policy_for_run(policy_file, reader)
    rs = load_ruleset(policy, extra_rules)
    alerts = check_run(reader, rs, policy, before=_replay_sinks(reader))
    # the witness guard's alerts (store, policy, key touched) depend on the live file system: kept as recorded
    recorded = [a for a in reader.alerts() if not a.rule_id.startswith("witness-")]
    same = [_alert_key(a) for a in alerts] == [_alert_key(a) for a in recorded]
    if fmt == "json":
        echo_json({"run": reader.id, "matches_recorded": same, "recorded": len(recorded), "alerts": alerts})
    else:
        _alert_lines(alerts)
        note = "same as recorded live" if same else f"recorded live: {len(recorded)} alert(s), which differ"
        click.echo(f"{len(alerts)} alert(s) for run {reader.id} ({note})", err=True)
    level = fail_on or policy.fail_on
    if fail_on_exceeded(max_level(a.level for a in alerts), level):
        sys.exit(EXIT_ALERT)


@click.command("alerts")
@store_option
@format_option("json")
@click.option("--min-level", type=click.Choice(["info", "low", "medium", "high", "critical"]), default="info",
              show_default=True, help="Only alerts at or above this level.")
@click.argument("run", default="latest")
def alerts_cmd(store_path: Path | None, fmt: str, min_level: str, run: str) -> None:
    """The alerts recorded for RUN (JSON: an array of alerts).

    When the run's files no longer match the anchor the store's index kept at the end
    of the run (rewritten after it), says so and exits 3.
    """
    from spyglass.cli.common import open_reader
    from spyglass.events import level_rank

    reader = open_reader(store_path, run)
    alerts = [a for a in reader.alerts() if level_rank(a.level) >= level_rank(min_level)]
    m = reader.meta
    for a in alerts:  # runs recorded before alerts carried where they came from
        a.run_id, a.host = a.run_id or m.id, a.host or m.host or None
        a.agent_id, a.task = a.agent_id or m.agent_id, a.task or m.task
        a.policy_digest = a.policy_digest or m.policy_digest
    from spyglass.errors import EXIT_TAMPERED
    from spyglass.evidence.anchorcheck import anchor_mismatch, anchored_alerts

    problem = anchor_mismatch(reader)
    if problem:
        said = anchored_alerts(reader)
        kept = (f"; the index recorded {said.count} alert(s)" + (f", max {said.max_level}" if said.max_level else "")
                if said is not None else "")
        click.echo(visible(f"spyglass: run {reader.id}: the evidence does not match its anchor: {problem}{kept}; "
                           f"the alerts below cannot be trusted (`spyglass verify {reader.id}`)"), err=True)
    # alerts that fired but could not be stored (a full disk): run.json keeps them
    unsaved = [u for u in m.extra.get("unsaved_alerts") or []
               if isinstance(u, dict) and level_rank(str(u.get("level"))) >= level_rank(min_level)]
    for u in unsaved:
        click.echo(visible(f"spyglass: NOT SAVED in alerts.jsonl: {str(u.get('level')).upper()} {u.get('rule_id')} "
                           f"pid {u.get('pid')}: {u.get('message')}"), err=True)
    if fmt == "json":
        echo_json(alerts)
    elif not alerts:
        if unsaved:
            click.echo(f"{len(unsaved)} alert(s) of run {reader.id} fired but could not be saved (above)", err=True)
        else:
            click.echo(f"no alerts {'left in the files of' if problem else 'for'} run {reader.id}", err=True)
    else:
        _alert_lines(alerts)
    if problem:
        sys.exit(EXIT_TAMPERED)


# ---------------------------------------------------------------- rules


@click.group("rules")
def rules_group() -> None:
    """List, show, lint and test security rules."""


@rules_group.command("list")
@policy_option
@format_option("json")
def rules_list(policy_file: Path | None, fmt: str) -> None:
    """The rules in effect: built-in pack plus the policy's rule paths."""
    from spyglass.rules.ruleset import load_ruleset

    policy = _load_policy(policy_file, Path.cwd())
    rs = load_ruleset(policy)
    if fmt == "json":
        echo_json([
            {"id": r.id, "title": r.title, "level": r.level, "action": r.action, "kind": r.kind,
             "enabled": r.enabled, "tags": r.tags, "source": r.source}
            for r in rs.rules
        ])
        return
    for r in rs.rules:
        off = "" if r.enabled else "  (disabled)"
        click.echo(visible(f"{r.id:<34} {r.level:<8} {r.action:<5} {r.kind:<9} {r.title}{off}"))


@rules_group.command("show")
@policy_option
@format_option("json")
@click.option("--effective", is_flag=True,
              help="The rule as finally applied (exceptions, append, override, the policy) and where each "
                   "part came from.")
@click.argument("rule_id")
def rules_show(policy_file: Path | None, fmt: str, effective: bool, rule_id: str) -> None:
    """Show one rule: its metadata and its YAML source (--effective: as applied)."""
    from spyglass.errors import UsageError
    from spyglass.rules.ruleset import load_ruleset

    policy = _load_policy(policy_file, Path.cwd())
    rs = load_ruleset(policy)
    rule = rs.get(rule_id)
    if rule is None:
        raise UsageError(f"no rule {rule_id!r}", hint="`spyglass rules list` lists them")
    if effective:
        from spyglass.rules.effective import effective as effective_data
        from spyglass.rules.effective import effective_text

        data = effective_data(rule, rs)
        echo_json(data) if fmt == "json" else click.echo(effective_text(data))
        return
    source = _rule_source(rule)
    if fmt == "json":
        echo_json({"id": rule.id, "title": rule.title, "level": rule.level, "action": rule.action,
                   "kind": rule.kind, "enabled": rule.enabled, "tags": rule.tags,
                   "description": rule.description, "source": rule.source, "line": rule.pos.line,
                   "yaml": source})
        return
    click.echo(f"# {rule.source}:{rule.pos.line}")
    click.echo("\n".join(visible(line) for line in source.splitlines()))


def _rule_source(rule: Any) -> str:
    from spyglass.rules.ruleset import pack_dir

    path = Path(rule.source)
    if rule.source.startswith("spyglass/rules/pack/"):
        path = pack_dir() / path.name
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    start = (rule.pos.line or 1) - 1
    out = []
    for line in lines[start:]:
        if line.strip() == "---":
            break
        out.append(line)
    return "\n".join(out).rstrip()


@rules_group.command("lint")
@format_option("json")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
def rules_lint(fmt: str, paths: tuple[Path, ...]) -> None:
    """Check rule files (or directories of them); list every error as file:line:col.

    The built-in lists and macros are available to the files checked.  Exit
    code 2 if anything is wrong.
    """
    from spyglass.errors import EXIT_USAGE
    from spyglass.rules.ruleset import pack_dir, parse_files

    rs, errors = parse_files(list(paths), pack=True)
    own = [r for r in rs.rules if not r.source.startswith("spyglass/rules/pack/")]
    if any(p.resolve() == pack_dir() for p in paths):
        own = rs.rules
    if fmt == "json":
        echo_json({"errors": [{"path": e.path, "line": e.line, "col": e.col, "message": e.message}
                              for e in errors], "rules": [r.id for r in own]})
    else:
        for e in errors:
            click.echo(str(e))
        if not errors:
            changes = [c for c in rs.changes if not getattr(c, "path", "").startswith("spyglass/rules/pack/")]
            click.echo(f"ok: {len(own)} rule(s)" + (f", {len(changes)} change(s)" if changes else ""), err=True)
        else:
            click.echo(f"{len(errors)} error(s)", err=True)
    if errors:
        sys.exit(EXIT_USAGE)


@rules_group.command("test")
@policy_option
@click.option("--home", default=None, help="HOME to expand ~ in globs against (default: $HOME).")
@click.option("--workspace", "workspaces", multiple=True, help="Workspace root (repeatable; default: cwd).")
@click.option("--all-rules", is_flag=True, help="Evaluate the built-in pack too, not only RULE_FILE.")
@format_option("json")
@click.argument("rule_file", type=click.Path(exists=True, path_type=Path))
@click.argument("events_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def rules_test(policy_file: Path | None, home: str | None, workspaces: tuple[str, ...], all_rules: bool,
               fmt: str, rule_file: Path, events_file: Path) -> None:
    """Evaluate RULE_FILE over the events in EVENTS_FILE (JSONL) and print the alerts.

    Exit code 1 when no alert fired (so a test of a rule can assert it fires).
    """
    from spyglass.errors import EXIT_FINDINGS
    from spyglass.rules.replay import evaluate, read_events_file
    from spyglass.rules.ruleset import RuleSetError, parse_files

    policy = _load_policy(policy_file, Path.cwd())
    rs, errors = parse_files([rule_file], pack=True)
    if errors:
        raise RuleSetError(errors)
    if not all_rules:
        rs.rules = [r for r in rs.rules if not r.source.startswith("spyglass/rules/pack/")]
    events = read_events_file(events_file)
    ws = list(workspaces) or [str(Path.cwd())]
    alerts = evaluate(events, rs, policy, workspace=ws, cwd=ws[0], home=home, renumber=not any(e.seq for e in events))
    if fmt == "json":
        echo_json(alerts)
    else:
        _alert_lines(alerts)
        click.echo(f"{len(alerts)} alert(s) from {len(events)} event(s)", err=True)
    if not alerts:
        sys.exit(EXIT_FINDINGS)


# ---------------------------------------------------------------- policy


@click.group("policy")
def policy_group() -> None:
    """Write, show and check the policy file (spyglass.yaml)."""


@policy_group.command("init")
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path), default="spyglass.yaml")
def policy_init(force: bool, path: Path) -> None:
    """Write a commented starter policy to PATH (default: ./spyglass.yaml)."""
    from spyglass.errors import UsageError
    from spyglass.policy.starter import STARTER

    if path.exists() and not force:
        raise UsageError(f"{path} already exists", hint="use --force to overwrite it")
    write_output(path, STARTER)
    click.echo(f"wrote {path}", err=True)


@policy_group.command("show")
@policy_option
@format_option("json")
def policy_show(policy_file: Path | None, fmt: str) -> None:
    """The effective policy (the file's values over the defaults)."""
    import msgspec

    from spyglass.policy import defaults

    policy = _load_policy(policy_file, Path.cwd())
    data = msgspec.to_builtins(policy)
    data["effective"] = {
        "secrets": list(policy.secret_globs),
        "network_allow": list(policy.network.effective_allow),
        "exec_trusted": list(policy.exec.effective_trusted),
        "writable_temp": list(defaults.WRITABLE_TEMP),
    }
    if fmt == "json":
        echo_json(data)
        return
    click.echo(f"# policy: {policy.source or 'built-in defaults'}  (digest {policy.digest[:12]})")
    import yaml

    yaml.safe_dump(_plain(data), sys.stdout, default_flow_style=False, sort_keys=False)


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


@policy_group.command("lint")
@format_option("json")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path), required=False)
def policy_lint(fmt: str, path: Path | None) -> None:
    """Check a policy file; list every error as file:line:col (exit 2 if any).  Without PATH:
    ./spyglass.yaml if there is one, else the policy `run` would use ($SPYGLASS_POLICY,
    ~/.config/spyglass/policy.yaml, /etc/spyglass/policy.yaml)."""
    from spyglass.errors import EXIT_USAGE, SourceError, UsageError
    from spyglass.policy import lint_policy
    from spyglass.policy.loader import read_source

    if path is None:
        from spyglass.policy.locate import locate_policy

        path = Path("spyglass.yaml")
        if not path.exists():
            found = locate_policy(None, Path.cwd()).path
            if found is None:
                raise UsageError("no policy file to check (no ./spyglass.yaml, $SPYGLASS_POLICY, "
                                 "~/.config/spyglass/policy.yaml or /etc/spyglass/policy.yaml)",
                                 hint="name one: spyglass policy lint FILE; `spyglass policy init` writes one")
            path = found

    try:
        text = read_source(path, str(path))
        errors = lint_policy(text, str(path), str(path.resolve().parent))
    except SourceError as exc:
        text, errors = "", [exc]
    if not errors:
        from spyglass.policy import parse_policy
        from spyglass.rules.ruleset import RuleSetError, load_ruleset

        try:
            load_ruleset(parse_policy(text, str(path), base_dir=str(path.resolve().parent)))
        except RuleSetError as exc:
            errors = exc.errors
    if fmt == "json":
        echo_json({"errors": [{"path": e.path, "line": e.line, "col": e.col, "message": e.message}
                              for e in errors]})
    else:
        for e in errors:
            click.echo(str(e))
        click.echo("ok" if not errors else f"{len(errors)} error(s)", err=True)
    if errors:
        sys.exit(EXIT_USAGE)


# ---------------------------------------------------------------- report


def _format_names() -> list[str]:
    from spyglass.report.formats import FORMATS

    return sorted(FORMATS)


def _default_format(output: Path | None, compare: bool) -> str:
    """The report format without --format: html for --compare, else the format whose suffix the -o
    file has (r.html, r.sarif, r.json, r.xml), else terminal."""
    if compare:
        return "html"
    if output is not None:
        from spyglass.report.formats import FORMATS

        by_suffix = {f.suffix: name for name, f in sorted(FORMATS.items()) if name != "terminal"}
        return by_suffix.get(output.suffix.lower(), "terminal")
    return "terminal"


@click.command("report")
@store_option
@policy_option
@click.option("--format", "fmt", type=click.Choice(_format_names()), default=None,
              help="Report format (spyglass/report/formats.py: terminal, json, html, sarif, junit ...); "
                   "default: from the -o file's suffix (.html, .json, .sarif, .xml), html with --compare, "
                   "else terminal.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write to FILE (default: stdout).")
@click.option("--compare", is_flag=True, help="Similarity heat map of several runs (html).")
@click.argument("runs", nargs=-1)
def report_cmd(store_path: Path | None, policy_file: Path | None, fmt: str | None, output: Path | None,
               compare: bool, runs: tuple[str, ...]) -> None:
    """Write a report of RUN (default: latest): SARIF 2.1.0 (GitHub code scanning),
    JSON, a self-contained HTML page, JUnit XML of the gate, or plain text.  With --compare, an HTML heat map of how
    similar RUNS (two or more) are."""
    from spyglass.cli.common import open_reader
    from spyglass.errors import UsageError

    if fmt is None:
        fmt = _default_format(output, compare)
    if compare:
        if fmt != "html":
            raise UsageError("--compare writes an HTML page", hint="use --format html")
        if len(runs) < 2:
            raise UsageError("--compare needs at least two runs", hint="spyglass report --compare RUN RUN ...")
        if output is None:
            raise UsageError("--compare needs an output file", hint="add -o compare.html")
        from spyglass.report.html import render_compare_html

        check_output_path(output)
        render_compare_html([open_reader(store_path, r) for r in runs], output)
        click.echo(f"wrote {output}", err=True)
        return
    if len(runs) > 1:
        raise UsageError("report takes one RUN", hint="to compare runs: --compare --format html -o FILE")
    if output is not None:
        check_output_path(output)
    reader = open_reader(store_path, runs[0] if runs else "latest")
    from spyglass.report.formats import get

    data = get(fmt).render(reader, _policy_for_run(policy_file, reader))
    if output is None:
        sys.stdout.buffer.write(data) if hasattr(sys.stdout, "buffer") else click.echo(data.decode(), nl=False)
        return
    write_output(output, data)
    click.echo(f"wrote {output}", err=True)


COMMANDS = [check_cmd, alerts_cmd, rules_group, policy_group, report_cmd]
