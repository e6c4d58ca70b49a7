"""``LongFlags`` (cli/common.py): one-letter flags reach click by their long names, the parse unchanged."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from spyglass.cli.cmd_run import run_cmd
from spyglass.cli.common import LongFlags, long_flags


@click.command(cls=LongFlags)
@click.option("-q", "--quiet", is_flag=True)
@click.option("-v", "--verbose", count=True)
@click.option("--task")
@click.option("-p", "--pair", nargs=2)
@click.option("--on/--off", "-y/-n", default=None)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def cmd(quiet: bool, verbose: int, task: str | None, pair: tuple[str, str] | None, on: bool | None,
        command: tuple[str, ...]) -> None:
    click.echo(repr((quiet, verbose, task, pair, on, command)))


def _parsed(args: list[str]) -> str:
    res = CliRunner().invoke(cmd, args)
    assert res.exit_code == 0, res.output
    return res.output.strip()


@pytest.mark.parametrize(
    "args",
    [
        ["-q", "--", "true"],
        ["-q", "-v", "-v", "--task", "-q", "--", "-q"],  # a value and what follows -- are kept
        ["--pair", "-q", "-v", "-q", "x"],  # both values of --pair
        ["x", "-q"],  # after a word: still an option (click allows options between arguments)
        ["-y", "-q"],
        ["-n"],
        ["-qv", "--task=-q", "--", "-q"],  # grouped flags are left to click
    ],
)
def test_same_parse_as_click(args: list[str]) -> None:
    plain = click.Command("plain", params=cmd.params, callback=cmd.callback)
    res = CliRunner().invoke(plain, args)
    assert res.exit_code == 0, res.output
    assert _parsed(args) == res.output.strip()


def test_words_given_by_long_names() -> None:
    ctx = cmd.make_context("cmd", ["--"], resilient_parsing=True)
    assert long_flags(cmd, ctx, ["-q", "--task", "-q", "-y", "--", "-q"]) == [
        "--quiet", "--task", "-q", "--on", "--", "-q"]
    assert long_flags(cmd, ctx, ["--pair", "-q", "-n", "-n"]) == ["--pair", "-q", "-n", "--off"]


def test_run_q_does_not_import_difflib() -> None:
    """click's "did you mean" for a one-letter flag tried as a long one loads difflib: not at a run's start."""
    code = (
        "import sys\n"
        "from spyglass.cli.common import long_flags\n"
        "from spyglass.cli.cmd_run import run_cmd\n"
        "ctx = run_cmd.make_context('run', ['-q', '--', 'true'], resilient_parsing=True)\n"
        "print('difflib' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    ctx = run_cmd.make_context("run", ["-q", "--task", "-q", "--", "true", "-q"])
    assert ctx.params["quiet"] is True and ctx.params["task"] == "-q"
    assert ctx.params["command"] == ("true", "-q")
