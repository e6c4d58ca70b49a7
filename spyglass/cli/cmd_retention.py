"""``spyglass prune``: keep a store within limits of age, size and runs per task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from spyglass.cli.common import echo_json, format_option, open_store, store_option
from spyglass.errors import UsageError


def limits_from(policy: Any, max_age: str | None, max_size: str | None, per_task: int | None,
                keep_level: str | None, include_alerts: bool) -> Any:
    """The limits to apply: the command line's where given, else the policy's ``retention`` block."""
    from spyglass.store.retention import Limits

    rt = policy.retention if policy is not None else None
    try:
        limits = Limits.parse(
            max_age if max_age is not None else (rt.max_age if rt else None),
            max_size if max_size is not None else (rt.max_size if rt else None),
            per_task if per_task is not None else (rt.max_runs_per_task if rt else None),
            None if include_alerts else (keep_level or (rt.keep_level if rt else "high")),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return limits


@click.command("prune")
@store_option
@format_option("json")
@click.option("--max-age", help="Delete runs older than this (30d, 12h, 2w).")
@click.option("--max-size", help="Delete the oldest runs until the store is at most this big (500M, 5G).")
@click.option("--max-runs-per-task", "per_task", type=click.IntRange(min=1),
              help="Keep at most this many runs of each task (the newest).")
@click.option("--keep-level", type=click.Choice(["info", "low", "medium", "high", "critical"]),
              help="Never delete runs with an alert at or above this level (default: high, or the policy's).")
@click.option("--include-alerts", is_flag=True, help="Delete runs with alerts too (no level protection).")
@click.option("--dry-run", "-n", is_flag=True, help="List what would be deleted; delete nothing.")
@click.option("--policy", "policy_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Policy whose `retention` block gives the limits (flags override it).")
def prune_cmd(store_path: Path | None, fmt: str, max_age: str | None, max_size: str | None,
              per_task: int | None, keep_level: str | None, include_alerts: bool, dry_run: bool,
              policy_file: Path | None) -> None:
    """Delete old runs so that the store stays within limits.

    \b
    Limits come from the flags, or else the policy's `retention` block:
      retention: {max_age: 30d, max_size: 5G, max_runs_per_task: 20, keep_level: high}
    Runs still recording, the newest run, and runs with an alert at or above
    the keep level (default high) are never deleted unless --include-alerts.
    The oldest runs go first.  Exit 0; 2 when no limit is set.

    \b
    Examples:
      spyglass prune --max-age 30d --dry-run
      spyglass prune --max-size 2G --max-runs-per-task 10
    """
    from spyglass.policy import load_policy
    from spyglass.store import retention

    flags_given = max_age is not None or max_size is not None or per_task is not None
    # the policy's limits apply when named with --policy, or when no limit flag is given
    policy = load_policy(policy_file, Path.cwd()) if policy_file is not None or not flags_given else None
    limits = limits_from(policy, max_age, max_size, per_task, keep_level, include_alerts)
    if limits.empty:
        raise UsageError("no retention limit given",
                         hint="pass --max-age, --max-size or --max-runs-per-task, or set `retention:` in the policy")
    store = open_store(store_path, write=not dry_run)
    the_plan = retention.plan(retention.entries(store), limits)
    if not dry_run:
        retention.apply(store, the_plan)
    if fmt == "json":
        echo_json({"dry_run": dry_run, **the_plan.to_json()})
        return
    verb = "would delete" if dry_run else "deleted"
    for d in the_plan.delete:
        click.echo(f"{verb} {d.run.id}  {retention.fmt_size(d.run.size):>10}  {d.reason}")
    for d in the_plan.kept_protected:
        click.echo(f"kept    {d.run.id}  {d.reason}")
    click.echo(
        f"{verb} {len(the_plan.delete)} of {the_plan.runs_before} runs; store "
        f"{retention.fmt_size(the_plan.total_before)} -> {retention.fmt_size(the_plan.total_after)}"
    )


COMMANDS = [prune_cmd]
