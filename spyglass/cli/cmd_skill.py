"""``spyglass skill spec|verify|scan``: does a third-party skill do only what it declares?"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from spyglass.cli.common import echo_json, is_tty, open_store, store_option
from spyglass.errors import UsageError


@click.group("skill")
def skill() -> None:
    """Verify Agent Skills (a directory with SKILL.md) by running them in the sandbox.

    \b
      spyglass skill spec DIR           the skill's declared behaviour (editable YAML)
      spyglass skill verify DIR         run it, compare with the spec: compliant / violations / uncertain
      spyglass skill scan DIR...        many skills in parallel, one report

    Exit codes of verify and scan: 0 compliant, 1 violations, 3 uncertain (see docs/skills.md).
    """


def _skill_dir(path: Path) -> Path:
    if not (path / "SKILL.md").is_file():
        raise UsageError(f"{path}: no SKILL.md here", hint="a skill is a directory holding SKILL.md")
    return path


@skill.command("spec")
@click.argument("skill_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--format", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True, help="Output format."
)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file.")
def spec_cmd(skill_dir: Path, fmt: str, output: Path | None) -> None:
    """Print the spec derived from SKILL_DIR/SKILL.md: front matter, `capabilities:`, and what
    its text and code blocks state (hosts, paths, commands), each entry with its file:line.

    Edit it and pass it to `skill verify --spec`."""
    from spyglass.skills.spec import derive_spec

    spec = derive_spec(_skill_dir(skill_dir))
    text = spec.to_yaml() if fmt == "yaml" else json.dumps(spec.to_dict(), indent=2) + "\n"
    if output is not None:
        output.write_text(text)
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)


@skill.command("verify")
@click.argument("skill_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--spec",
    "spec_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A spec file (from `skill spec`, perhaps edited); default: derived from SKILL.md.",
)
@click.option(
    "--agent",
    default="compliant",
    show_default=True,
    help="Who follows SKILL.md in the agent runs: `compliant` (a program that runs every code block in order), "
    "`mini`, `codex`, or a command line with {task} (a real agent CLI driven by the scripted model stub).",
)
@click.option(
    "--inputs",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Sample inputs to copy into the workspace (default: generated from the kinds the skill names).",
)
@click.option("--repeat", type=click.IntRange(1, 20), default=1, show_default=True, help="Runs of each kind.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "sarif"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--html-dir", type=click.Path(file_okay=False, path_type=Path), help="Write the HTML report of each run here."
)
@click.option("--keep", is_flag=True, help="Keep the workspaces (their paths are in the JSON report's runs).")
@store_option
def verify_cmd(
    skill_dir: Path,
    spec_file: Path | None,
    agent: str,
    inputs: Path | None,
    repeat: int,
    fmt: str,
    html_dir: Path | None,
    keep: bool,
    store_path: Path | None,
) -> None:
    """Run SKILL_DIR in the sandbox (its scripts directly, and a compliant agent following SKILL.md),
    with sample inputs, a decoy home and an egress proxy that serves only declared hosts; compare with
    the spec and the rule pack. Exit 0 compliant, 1 violations, 3 uncertain."""
    from spyglass.skills.report import to_json, to_sarif, to_text
    from spyglass.skills.spec import load_spec
    from spyglass.skills.verify import verify_skill

    spec = load_spec(spec_file) if spec_file is not None else None
    store = open_store(store_path, create=True)
    result = verify_skill(
        _skill_dir(skill_dir), store, spec=spec, inputs=inputs, repeat=repeat, agent=agent, html_dir=html_dir, keep=keep
    )
    if fmt == "json":
        echo_json(to_json([result]))
    elif fmt == "sarif":
        echo_json(to_sarif(to_json([result])))
    else:
        click.echo(to_text(result))
    sys.exit(result.exit_code)


def _summary_table(results: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="skill scan")
    for col in ("skill", "verdict", "violations", "why", "seconds"):
        table.add_column(col)
    colour = {"compliant": "green", "violations": "red", "uncertain": "yellow"}
    for r in results:
        why = "; ".join(v["message"] for v in r["violations"][:2]) or "; ".join(r["uncertain_because"][:1])
        table.add_row(
            r["skill"],
            f"[{colour.get(r['verdict'], 'white')}]{r['verdict']}[/]",
            str(len(r["violations"])),
            why[:80],
            f"{r['seconds']:.1f}",
        )
    Console(stderr=not is_tty(), force_terminal=None).print(table)


@skill.command("scan")
@click.argument("dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("-j", "--jobs", type=click.IntRange(1, 64), default=None, help="Parallel skills (default: cores).")
@click.option("--agent", default="compliant", show_default=True, help="As for `skill verify`.")
@click.option("--repeat", type=click.IntRange(1, 20), default=1, show_default=True, help="Runs of each kind.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "sarif"]),
    default="text",
    show_default=True,
    help="text: a progress bar and a summary table; json: the one report on stdout; sarif: SARIF 2.1.0.",
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Also write the JSON report here."
)
@click.option("--html-dir", type=click.Path(file_okay=False, path_type=Path), help="HTML report of each run here.")
@click.option(
    "--html", "html_file", type=click.Path(dir_okay=False, path_type=Path), help="One HTML summary page here."
)
@store_option
def scan_cmd(
    dirs: tuple[Path, ...],
    jobs: int | None,
    agent: str,
    repeat: int,
    fmt: str,
    output: Path | None,
    html_dir: Path | None,
    html_file: Path | None,
    store_path: Path | None,
) -> None:
    """Verify every skill found in DIRS (a directory with SKILL.md, or a tree of them such as a
    marketplace checkout) in parallel. Exit 1 if any has violations, else 3 if any is uncertain, else 0."""
    from rich.progress import Progress

    from spyglass import __version__
    from spyglass.skills.scan import find_skills, scan
    from spyglass.skills.verify import check_agent

    check_agent(agent)
    skills = find_skills(dirs)
    if not skills:
        raise UsageError("no SKILL.md found under the given directories")
    store = open_store(store_path, create=True)
    if fmt == "text":
        with Progress(transient=True, disable=not is_tty(sys.stderr)) as bar:
            task = bar.add_task(f"verifying {len(skills)} skill(s)", total=len(skills))
            results = scan(
                skills,
                store.root,
                repeat=repeat,
                jobs=jobs,
                html_dir=html_dir,
                agent=agent,
                progress=lambda r: bar.advance(task),
            )
        _summary_table(results)
    else:
        results = scan(skills, store.root, repeat=repeat, jobs=jobs, html_dir=html_dir, agent=agent)
    counts = {v: sum(1 for r in results if r["verdict"] == v) for v in ("compliant", "violations", "uncertain")}
    report = {"tool": "spyglass", "version": __version__, "summary": counts, "skills": results}
    if output is not None:
        output.write_text(json.dumps(report, indent=2, default=str) + "\n")
    if html_file is not None:
        from spyglass.skills.report import to_html

        html_file.write_text(to_html(report))
    if fmt == "json":
        echo_json(report)
    elif fmt == "sarif":
        from spyglass.skills.report import to_sarif

        echo_json(to_sarif(report))
    else:
        click.echo(
            f"{counts['compliant']} compliant, {counts['violations']} with violations, {counts['uncertain']} uncertain"
        )
    sys.exit(1 if counts["violations"] else 3 if counts["uncertain"] else 0)


COMMANDS = [skill]
