"""The ``spyglass`` command.

Subcommands live in ``spyglass/cli/cmd_*.py`` modules; each exposes
``COMMANDS`` (a list of click commands).  They are found by name and
imported only when the CLI starts, so each area of the tool adds its
commands without touching this file.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import sys
from typing import Any

import click

from spyglass import __version__
from spyglass.errors import EXIT_USAGE, SpyglassError


class SpyglassGroup(click.Group):
    """A click group that prints spyglass errors as one line with their exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SpyglassError as exc:
            click.echo(f"spyglass: error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except BrokenPipeError:
            sys.stderr.close()
            ctx.exit(0)
        except OSError as exc:
            # a path (store, output, input) that cannot be used: one line, never a traceback; an
            # OSError without a path is no user mistake and keeps its traceback
            if exc.filename is None:
                raise
            from spyglass.errors import PathError

            err = PathError.from_os_error(exc)
            click.echo(f"spyglass: error: {err}", err=True)
            ctx.exit(err.exit_code)


@click.group(cls=SpyglassGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__, prog_name="spyglass",
    message="%(prog)s (the agent monitor from the operating-system boundary), version %(version)s",
)
@click.option("-v", "--verbose", count=True, help="More log output on stderr (-vv for debug).")
@click.option("--color", "color", type=click.Choice(["auto", "always", "never"]), default=None,
              envvar="SPYGLASS_COLOR", show_envvar=True,
              help="Colour the output: auto (a terminal, unless NO_COLOR is set), always, never.")
def cli(verbose: int, color: str | None) -> None:
    """Watch AI agents from the operating-system boundary.

    spyglass runs an agent and every process it starts under a kernel-level
    capture backend, records what they really did (programs, files, hosts,
    privileges), alerts on what a policy forbids, and keeps the record as
    tamper-evident evidence.

    \b
    Start here:
      spyglass demo                  record the bundled demo agent
      spyglass run -- CMD [ARGS...]  record any command
      spyglass show latest           what the last run did
      spyglass doctor                what works on this machine
    """
    from spyglass import termcolor

    termcolor.set_mode(color)
    level = logging.WARNING - 10 * verbose
    logging.basicConfig(level=max(level, logging.DEBUG), format="spyglass: %(levelname)s: %(message)s")


def _load_commands() -> None:
    import spyglass.cli as pkg

    for mod in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if not mod.name.startswith("cmd_"):
            continue
        module = importlib.import_module(f"spyglass.cli.{mod.name}")
        for command in getattr(module, "COMMANDS", []):
            cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    _load_commands()
    try:
        cli.main(args=argv, prog_name="spyglass", standalone_mode=True)
    except SpyglassError as exc:  # raised outside a command (should not happen)
        click.echo(f"spyglass: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("spyglass: interrupted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as exc:  # pragma: no cover - click handles it
        sys.exit(exc.exit_code or EXIT_USAGE)
