"""``spyglass bench SUITE``: run an agent over a task suite, repeated and injected, and print the tables."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import click

from spyglass.cli.common import echo_json, format_option
from spyglass.errors import SpyglassError


class BenchFailed(SpyglassError):
    exit_code = 1


EXAMPLE = Path(__file__).resolve().parent.parent / "bench" / "example"


@click.command("bench")
@format_option("json")
@click.argument("suite", type=click.Path(path_type=Path), required=False)
@click.option("--agent", "agent_text", default="codex", show_default=True,
              help="codex, claude-code, mini, or a command (quoted) that takes the instruction from "
                   "$SPYGLASS_TASK_INSTRUCTION.")
@click.option("--agent-bin", type=click.Path(dir_okay=False, path_type=Path),
              help="The agent's executable when it is not on PATH.")
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True, help="Clean trials per task.")
@click.option("--inject", "inject_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Injection spec (YAML); default: the suite's inject.yaml if --inject-default.")
@click.option("--inject-default", is_flag=True, help="Use the suite's own inject.yaml.")
@click.option("--task", "tasks", multiple=True, help="Only this task (repeatable).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), help="Trials at once (default: cores).")
@click.option("--sandbox", is_flag=True, help="Run each trial in the sandbox.")
@click.option("--policy", "policy_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Policy for every trial (default: built-in rules, egress only to the model stub).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Bench directory: trials, store, tables (default: ./spyglass-bench/SUITE_NAME). "
                   "Running again on it resumes.")
@click.option("--measure-overhead", is_flag=True,
              help="Also run each task's agent once without spyglass: the tables then give the capture overhead.")
@click.option("--fresh", is_flag=True, help="Delete the bench directory's trials and start over.")
@click.option("--html/--no-html", default=True, show_default=True,
              help="Write bench.html, the heat map and a report per run into the bench directory.")
def bench_cmd(fmt: str, suite: Path | None, agent_text: str, agent_bin: Path | None, repeat: int,
              inject_file: Path | None, inject_default: bool, tasks: tuple[str, ...], jobs: int | None,
              sandbox: bool, policy_file: Path | None, out_dir: Path | None, measure_overhead: bool, fresh: bool,
              html: bool) -> None:
    """Run an agent over a task suite and measure reliability and detection.

    \b
    SUITE is a folder of tasks (instruction.md, task.toml, environment/,
    skills/, solution/solve.sh, tests/test.sh writing $REWARD_FILE, and
    optionally model/script.json for a scripted model); without SUITE the
    bundled example suite runs.  Each trial gets a fresh workspace and home,
    the skills where the agent looks for them, runs the agent under
    `spyglass run`, then the task's tests as the verifier, all recorded.
    \b
    Tables: per task (runs, success rate, similarity of same-task runs,
    separation margin, skill coverage, unused skills, unexplained activity,
    grading-file reads, false alarms); per injected variant (alerts, level,
    detected); overall precision/recall per category.  Finished trials are
    kept in the bench directory: running the same command again resumes.
    \b
    Exit 0; 1 when a trial failed to run or a clean run raised an alert at
    medium or above; 2 for bad input.
    \b
    Examples:
      spyglass bench                                   # the bundled example, codex, 3 repeats
      spyglass bench tasks/ --agent mini --repeat 5 --inject attacks.yaml
    """
    from spyglass.bench.inject import load_injections
    from spyglass.bench.render import text_lines, write_html
    from spyglass.bench.runner import BenchConfig, Eta, failed_trials, run_bench
    from spyglass.bench.suite import load_suite
    from spyglass.bench.tables import compute
    from spyglass.bench.trial import AgentSpec

    the_suite = load_suite(suite or EXAMPLE, list(tasks) or None)
    agent = AgentSpec.parse(agent_text, str(agent_bin) if agent_bin else None)
    spec = inject_file or (the_suite.inject_file if inject_default else None)
    injections = load_injections(spec) if spec else []
    out = (out_dir or Path("spyglass-bench") / the_suite.name).resolve()
    if fresh and out.exists():
        import shutil

        for name in ("trials", "store", "reports", "trials.jsonl", "bench.json", "tables.json", "bench.html",
                     "compare.html"):
            p = out / name
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            elif p.exists() or p.is_symlink():
                p.unlink()
    cfg = BenchConfig(suite=the_suite, agent=agent, out=out, repeat=repeat, injections=injections,
                      jobs=jobs or 0, sandbox=sandbox, policy=policy_file.resolve() if policy_file else None,
                      measure_overhead=measure_overhead)
    stop = threading.Event()
    results = _run_with_progress(cfg, run_bench, Eta(), stop)
    if not results:
        failed = failed_trials(out)
        for f in failed:
            click.echo(f"failed: {f['id']}: {f.get('error') or 'no run recorded'} "
                       f"(see {out}/trials/{f['id'].replace('/', '--')}/agent.log)", err=True)
        raise BenchFailed(f"no trial recorded a run ({len(failed)} failed)",
                          hint=f"see the trial logs under {out}/trials")
    tables = compute(results, out / "store", {t.name: str(t.dir) for t in the_suite.tasks})
    (out / "tables.json").write_text(json.dumps(tables.to_json(), indent=2) + "\n")
    page = write_html(tables, out, out / "store", f"spyglass bench: {the_suite.name} ({agent.kind})") \
        if html and results else None
    failed = failed_trials(out)
    if fmt == "json":
        echo_json({**tables.to_json(), "dir": str(out), "failed": failed,
                   "html": str(page) if page else None})
    else:
        for line in text_lines(tables):
            click.echo(line)
        for f in failed:
            click.echo(f"failed: {f['id']}: {f.get('error') or 'no run recorded'} "
                       f"(see {out}/trials/{f['id'].replace('/', '--')}/agent.log)", err=True)
        click.echo(f"\nbench directory: {out}" + (f"; open {page}" if page else ""), err=True)
    bad = failed or any(t.false_alarms for t in tables.tasks)
    sys.exit(1 if bad else 0)


def _run_with_progress(cfg: Any, run: Any, eta: Any, stop: threading.Event) -> Any:
    """Run the bench with a progress bar (on a terminal) or a line per trial (elsewhere)."""
    tty = sys.stderr.isatty() and not os.environ.get("NO_COLOR")
    if not tty:
        def line(done: int, total: int, res: Any) -> None:
            if res is not None:
                state = res.error or f"reward {res.reward}" if res.reward is not None else (res.error or "done")
                left = eta.left(done, total)
                click.echo(f"[{done}/{total}] {res.id}: {state} ({res.seconds:.1f} s)"
                           + (f", about {left:.0f} s left" if left else ""), err=True)
            else:
                eta.left(done, total)
        return run(cfg, line, stop)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("[bold]bench"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  TextColumn("{task.description}"), transient=False) as bar:
        tid = bar.add_task("", total=None)

        def update(done: int, total: int, res: Any) -> None:
            bar.update(tid, completed=done, total=total, description=res.id if res else "")
        try:
            return run(cfg, update, stop)
        except KeyboardInterrupt:
            stop.set()
            raise


COMMANDS = [bench_cmd]
