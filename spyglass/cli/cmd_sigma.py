"""`spyglass rules import-sigma`: Sigma rules into spyglass rules (spyglass/rules/sigma.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from spyglass.cli.cmd_rules import rules_group
from spyglass.cli.common import echo_json, format_option, write_output


@click.command("import-sigma")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the spyglass rules to FILE (default: stdout).")
@format_option("json")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
def rules_import_sigma(output: Path | None, fmt: str, paths: tuple[Path, ...]) -> None:
    """Convert Sigma rules (files or directories of *.yml) into spyglass rules.

    Linux process_creation, file_event and network_connection rules are
    converted with pySigma's parser and a pipeline mapping Sigma's fields to
    spyglass's (docs/rules.md, Sigma).  Every rule that cannot be converted is
    listed on stderr with the reason.  The output lints clean; name it in the
    policy's rules.paths.  Exit code 1 when no rule could be converted.
    """
    import yaml

    from spyglass.errors import EXIT_FINDINGS
    from spyglass.rules.ruleset import parse_files
    from spyglass.rules.sigma import convert_text
    from spyglass.rules.sources import rule_files

    results = []
    for p in paths:
        for f in (sorted(x for x in p.rglob("*") if x.suffix in (".yml", ".yaml")) if p.is_dir() else rule_files(p)):
            try:
                text = f.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                from spyglass.errors import SourceError

                raise SourceError(f"cannot read: {exc}", str(f)) from None
            results += convert_text(text, str(f))
    import tempfile

    ok = [r for r in results if r.rule is not None]
    with tempfile.TemporaryDirectory() as tmp:  # what is written must lint: check each rule as spyglass loads it
        for r in ok:
            probe = Path(tmp) / "probe.yaml"
            probe.write_text(yaml.safe_dump(r.rule, sort_keys=False, allow_unicode=True), encoding="utf-8")
            _, errors = parse_files([probe])
            if errors:
                r.reason, r.rule = f"converted rule does not load: {errors[0].message}", None
    ok = [r for r in results if r.rule is not None]
    text = "\n---\n".join(yaml.safe_dump(r.rule, sort_keys=False, allow_unicode=True, width=200) for r in ok)
    if ok:
        text = ("# Converted from Sigma rules by `spyglass rules import-sigma` (pySigma).  Rules from the\n"
                "# SigmaHQ repository are under the Detection Rule License 1.1: keep their author and\n"
                "# references (attribution).\n" + text)
    if fmt == "json":
        echo_json({"rules": [r.rule for r in ok],
                   "not_converted": [{"source": r.source, "title": r.title, "reason": r.reason}
                                     for r in results if r.rule is None]})
    elif output is not None:
        write_output(output, text)
    else:
        click.echo(text, nl=False)
    for r in results:
        if r.rule is None:
            click.echo(f"{r.source}: {r.title}: not converted: {r.reason}", err=True)
    click.echo(f"{len(ok)} rule(s) converted, {len(results) - len(ok)} not"
               + (f"; wrote {output}" if output is not None and fmt != "json" else ""), err=True)
    if not ok:
        sys.exit(EXIT_FINDINGS)


rules_group.add_command(rules_import_sigma)
COMMANDS: list[click.Command] = []
