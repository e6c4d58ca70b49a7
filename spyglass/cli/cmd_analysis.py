"""Reliability analysis commands: ``profile``, ``compare``, ``diff``, ``coverage``, ``unexplained``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from spyglass.cli.common import format_option, store_option
from spyglass.safetext import visible_lines

if TYPE_CHECKING:
    from spyglass.analysis import NormalizeRules
    from spyglass.store import RunReader

_NOISE_CHOICES = ("drop", "fold", "keep")


def policy_option(f: Any) -> Any:
    return click.option(
        "--policy", "policy_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
        help="Policy file (default: $SPYGLASS_POLICY, ~/.config/spyglass/policy.yaml, "
             "/etc/spyglass/policy.yaml); analysis.ignore_paths and "
             "analysis.grading_paths apply.",
    )(f)


def noise_option(f: Any) -> Any:
    return click.option(
        "--noise", type=click.Choice(_NOISE_CHOICES), default="drop", show_default=True,
        help="Loader, locale, interpreter-cache and runtime-library accesses: drop them, fold each class "
             "into one resource, or keep them as they are.",
    )(f)


def _policy_analysis(policy_path: Path | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(grading_paths, ignore_paths) from the policy."""
    from spyglass.policy import load_policy

    pol = load_policy(policy_path, Path.cwd())
    return tuple(pol.analysis.grading_paths), tuple(pol.analysis.ignore_paths)


def _rules(policy_path: Path | None, noise: str = "drop") -> NormalizeRules:
    from spyglass.analysis import NOISE_CLASSES, NormalizeRules

    _, ignore = _policy_analysis(policy_path)
    noise_map = dict.fromkeys(NOISE_CLASSES, noise)
    noise_map["ignored"] = "drop"
    return NormalizeRules(ignore_paths=ignore, noise=noise_map)


def _jobs_option(f: Any) -> Any:
    return click.option(
        "-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True,
        help="Profile runs in this many processes.",
    )(f)


def _short(run_id: str) -> str:
    return run_id[-6:] if len(run_id) > 6 else run_id


# -- profile -----------------------------------------------------------------------------------------


@click.command("profile")
@store_option
@format_option("json", "dot")
@policy_option
@noise_option
@click.option("--top", type=click.IntRange(min=0), default=None,
              help="Keep the N heaviest edges per kind (default: 15 in text, all in json and dot).")
@click.argument("run", default="latest")
def profile_cmd(store_path: Path | None, fmt: str, policy_path: Path | None, noise: str, top: int | None,
                run: str) -> None:
    """The profile of RUN: commands, files and hosts it touched, with access counts.

    \b
    The run is the centre of a star graph; each leaf is a resource and each
    edge an op (exec, read, list, write, create, delete, rename, rename-to,
    mkdir, chmod, connect, send, dns ...) weighted by the number of accesses.
    Names are normalized (workspace, home, temp dirs become <WS>, <HOME>,
    <TMP>; pids, timestamps, hashes and random temp names are folded), and
    loader/locale/cache noise is left out; see docs/analysis.md.

    \b
    Examples:
      spyglass profile latest
      spyglass profile latest --format dot | dot -Tsvg > run.svg
    """
    from spyglass.analysis import load_profile
    from spyglass.analysis.profile import format_profile_text
    from spyglass.cli.common import echo_json, open_reader

    reader = open_reader(store_path, run)
    prof = load_profile(reader, rules=_rules(policy_path, noise))
    if fmt == "json":
        echo_json(prof.to_dict(limit=top or 0))
    elif fmt == "dot":
        click.echo(prof.to_dot(limit=top or 0), nl=False)
    else:
        click.echo(visible_lines(format_profile_text(prof, top=15 if top is None else (top or 10**9))))


# -- compare -----------------------------------------------------------------------------------------


def _select_runs(store_path: Path | None, refs: tuple[str, ...], tasks: tuple[str, ...],
                 all_runs: bool) -> list[RunReader]:
    from spyglass.analysis import labelled_runs, open_runs, runs_of_task
    from spyglass.cli.common import open_store
    from spyglass.errors import UsageError

    store = open_store(store_path)
    readers = open_runs(refs, store)
    for t in tasks:
        found = runs_of_task(t, store)
        if not found:
            raise UsageError(f"no runs with task {t!r}", hint="`spyglass ls` lists runs and their tasks")
        readers.extend(found)
    if all_runs:
        readers.extend(labelled_runs(store))
    return open_runs(readers)


@click.command("compare")
@store_option
@format_option("json")
@policy_option
@click.option("--task", "tasks", multiple=True, metavar="TASK", help="Add every run of TASK (repeatable).")
@click.option("--all", "all_runs", is_flag=True, help="Add every run that has a task label.")
@click.option("--by", type=click.Choice(["task"]), default=None,
              help="Group by task label: homogeneous vs heterogeneous similarity and the margin per task.")
@_jobs_option
@click.argument("runs", nargs=-1)
def compare_cmd(store_path: Path | None, fmt: str, policy_path: Path | None, tasks: tuple[str, ...],
                all_runs: bool, by: str | None, jobs: int, runs: tuple[str, ...]) -> None:
    """How alike RUNS are: weighted Jaccard similarity per resource kind.

    \b
    Prints the similarity matrix (combined and per kind: command, file,
    host).  With --by task, for each task: the similarity of its runs
    (homogeneous), of the same set with one run replaced by a run of the most
    different other task (heterogeneous), the margin between them, the same
    against the nearest other task, and the fraction of tasks with a positive
    margin.

    \b
    Examples:
      spyglass compare RUN1 RUN2 RUN3
      spyglass compare --task fix-bug-12
      spyglass compare --all --by task --format json
    """
    from spyglass.analysis import compare, profile_runs
    from spyglass.cli.common import echo_json
    from spyglass.errors import UsageError

    readers = _select_runs(store_path, runs, tasks, all_runs)
    if len(readers) < 2:
        raise UsageError("compare needs at least two runs", hint="give run ids, --task TASK or --all")
    if by == "task":
        unlabelled = [r.id for r in readers if not r.meta.task]
        if unlabelled:
            raise UsageError(
                f"{len(unlabelled)} run(s) have no task label ({', '.join(unlabelled[:3])})",
                hint="record runs with `run --task NAME`, or compare without --by task",
            )
    profiles = profile_runs(readers, _rules(policy_path), jobs=jobs)
    result = compare(profiles, by_task=by == "task")
    if fmt == "json":
        echo_json(result)
        return
    click.echo(visible_lines(_format_compare(result)))


_MAX_MATRIX = 16


def _fmt(x: float | None) -> str:
    return "  -  " if x is None else f"{x:5.2f}"


def _format_compare(result: dict[str, Any]) -> str:
    m = result["matrix"]
    runs: list[str] = m["runs"]
    tasks: list[str | None] = m["tasks"]
    out: list[str] = []
    if len(runs) <= _MAX_MATRIX:
        out.append("similarity (combined; per kind in --format json):")
        labels = [_short(r) for r in runs]
        width = max(len(lab) for lab in labels)
        out.append(" " * (width + 2) + " ".join(f"{lab:>6}" for lab in labels))
        for i, lab in enumerate(labels):
            row = " ".join(f"{_fmt(v):>6}" for v in m["combined"][i])
            out.append(f"{lab:<{width}}  {row}   {tasks[i] or ''}")
    else:
        out.append(f"{len(runs)} runs (the similarity matrix is in --format json)")
    s = result["set_similarity"]
    out.append(f"\nset similarity: combined {_fmt(s['combined'])}  command {_fmt(s['command'])}  "
               f"file {_fmt(s['file'])}  host {_fmt(s['host'])}")
    sep = result.get("separation")
    if sep:
        out.append("\nper task: homogeneous  heterogeneous  margin   (vs most different task | vs nearest)")
        for t in sep["tasks"]:
            out.append(
                f"  {t['task']:<24} {_fmt(t['homogeneous']['combined'])}"
                f"  {_fmt(t['heterogeneous']['combined'])}"
                f"  {_fmt(t['margin']['combined'])} ({t['most_different_task']})"
                f"  | {_fmt(t['margin_nearest']['combined'])} ({t['nearest_task']})"
            )
        fp, fpn = sep["fraction_positive"], sep["fraction_positive_nearest"]
        out.append(
            f"tasks with a positive margin: {'-' if fp is None else f'{fp:.0%}'}"
            f" (against the nearest task: {'-' if fpn is None else f'{fpn:.0%}'})"
        )
        if sep["singleton_tasks"]:
            out.append(f"tasks with one run (no margin): {', '.join(sep['singleton_tasks'])}")
    return "\n".join(out)


# -- diff ----------------------------------------------------------------------------------------------


@click.command("diff")
@store_option
@format_option("json")
@policy_option
@noise_option
@click.argument("run_a")
@click.argument("run_b")
def diff_cmd(store_path: Path | None, fmt: str, policy_path: Path | None, noise: str, run_a: str,
             run_b: str) -> None:
    """Resources only RUN_A touched, only RUN_B touched, and changes in access counts.

    \b
    Example:
      spyglass diff 20250101T1200 latest
    """
    from spyglass.analysis import diff_profiles, open_runs, profile_runs
    from spyglass.analysis.diff import format_diff_text
    from spyglass.cli.common import echo_json, open_store

    store = open_store(store_path)
    readers = [open_runs([ref], store)[0] for ref in (run_a, run_b)]
    pa, pb = profile_runs(readers, _rules(policy_path, noise))
    d = diff_profiles(pa, pb)
    if fmt == "json":
        echo_json(d.to_dict())
    else:
        click.echo(visible_lines(format_diff_text(d)))


# -- coverage ------------------------------------------------------------------------------------------


@click.command("coverage")
@store_option
@format_option("json")
@policy_option
@click.option("--skills", "skills", multiple=True, type=click.Path(exists=True, file_okay=False),
              help="Skill directory (repeatable); added to those recorded with `run --skills`.")
@click.argument("run", default="latest")
def coverage_cmd(store_path: Path | None, fmt: str, policy_path: Path | None, skills: tuple[str, ...],
                 run: str) -> None:
    """Which files of each skill RUN read, executed or wrote.

    \b
    coverage = files touched / files of the skill.  A skill whose coverage is
    0 is reported as `skill-not-used`.  A directory with a SKILL.md is one
    skill (named by its front matter); a directory of such directories is a
    collection of skills.

    \b
    Examples:
      spyglass coverage latest
      spyglass coverage latest --skills ~/.claude/skills/pdf
    """
    from spyglass.analysis.coverage import coverage_run, format_coverage_text
    from spyglass.cli.common import echo_json, open_reader

    reader = open_reader(store_path, run)
    items = coverage_run(reader, list(skills), _rules(policy_path), home=str(Path.home()))
    if fmt == "json":
        echo_json({
            "run": reader.id,
            "skills": [c.to_dict() for c in items],
            "findings": [f.to_dict() for c in items for f in c.findings],
        })
    else:
        click.echo(visible_lines(format_coverage_text(items)))


# -- unexplained ---------------------------------------------------------------------------------------


@click.command("unexplained")
@store_option
@format_option("json")
@policy_option
@click.option("--baseline", "baseline", multiple=True, metavar="RUN",
              help="Baseline run (repeatable; default: the other runs of the same task).")
@click.option("--expect", "expected", multiple=True, metavar="PATTERN",
              help="Resources declared as expected: KIND:GLOB (file:, command:, host:) or a file glob.")
@click.option("--grading", "grading", multiple=True, metavar="PATTERN",
              help="Grading/oracle paths (repeatable; default: the policy's analysis.grading_paths, "
                   "else tests/** and solution/**).")
@_jobs_option
@click.argument("run", default="latest")
def unexplained_cmd(store_path: Path | None, fmt: str, policy_path: Path | None, baseline: tuple[str, ...],
                    expected: tuple[str, ...], grading: tuple[str, ...], jobs: int, run: str) -> None:
    """What RUN did that its baseline never did: the task-unrelated activity to review.

    \b
    Lists each command, file and host no baseline run touched, most unusual
    first, and reads of grading paths as scoring-file access.

    \b
    Examples:
      spyglass unexplained latest
      spyglass unexplained latest --baseline RUN1 --baseline RUN2 --grading '/tests/**'
    """
    from spyglass.analysis import DEFAULT_GRADING_PATHS, unexplained_run
    from spyglass.analysis.unexplained import format_unexplained_text
    from spyglass.cli.common import echo_json, open_store

    policy_grading, _ = _policy_analysis(policy_path)
    grading_paths = grading or policy_grading or DEFAULT_GRADING_PATHS
    store = open_store(store_path)
    report = unexplained_run(
        run,
        list(baseline) if baseline else None,
        store,
        expected=expected,
        grading_paths=grading_paths,
        rules=_rules(policy_path),
        jobs=jobs,
    )
    if fmt == "json":
        echo_json(report.to_dict())
    else:
        click.echo(visible_lines(format_unexplained_text(report)))


COMMANDS = [profile_cmd, compare_cmd, diff_cmd, coverage_cmd, unexplained_cmd]
