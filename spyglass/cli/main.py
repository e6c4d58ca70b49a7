"""The ``spyglass`` command's click group.

The entry point is :func:`spyglass.cli.launch.main` (also importable from here): it starts what
a run can start before click loads, then calls :func:`run_cli`.

Subcommands live in ``spyglass/cli/cmd_*.py`` modules; each exposes ``COMMANDS`` (a list of
click commands).  Only the module of the command
invoked is imported (``COMMAND_MODULES`` says which one holds which command;
a name not listed there, and ``--help``, load them all, so a new module works
before it is listed; tests/cli/test_main.py checks the table is complete).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from spyglass import __version__, phases
from spyglass.cli.launch import _invoked, _preload, configure_output, leave, main
from spyglass.errors import EXIT_USAGE, SpyglassError

# the entry point and what it does before click loads (spyglass/cli/launch.py), under their old names too
__all__ = ["COMMAND_MODULES", "_invoked", "_preload", "cli", "leave", "main", "run_cli"]

#: a group called without a subcommand: click prints its help (no mistake to put on one line)
_HELP_ERRORS: tuple[type[Exception], ...] = tuple(
    e for e in (getattr(click.exceptions, "NoArgsIsHelpError", None),) if isinstance(e, type)
)


def _usage_line(exc: click.UsageError, fallback: str) -> None:
    """An unknown command or option, a missing argument: one line with the remedy, not click's
    usage block (the help is one command away)."""
    if isinstance(exc, _HELP_ERRORS):
        raise exc
    where = exc.ctx.command_path if exc.ctx is not None else fallback
    message = " ".join(exc.format_message().split()).rstrip(".")
    click.echo(f"spyglass: error: {message} (see `{where} --help`)", err=True)


class SpyglassGroup(click.Group):
    """A click group that prints spyglass errors and usage mistakes as one line with their exit code."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:  # the group's own options (`spyglass --colr`)
            _usage_line(exc, info_name or "spyglass")
            sys.exit(exc.exit_code)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            _usage_line(exc, ctx.command_path)
            ctx.exit(exc.exit_code)
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
    configure_output(verbose, color)


#: command name -> the modules that define it (cmd_sigma adds ``rules import-sigma``)
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "agents": ("cmd_agents",), "model-stub": ("cmd_agents",),
    "profile": ("cmd_analysis",), "compare": ("cmd_analysis",), "diff": ("cmd_analysis",),
    "coverage": ("cmd_analysis",), "unexplained": ("cmd_analysis",),
    "bench": ("cmd_bench",),
    "verify": ("cmd_evidence",), "gate": ("cmd_evidence",), "changes": ("cmd_evidence",), "keys": ("cmd_evidence",),
    "export": ("cmd_otel",),
    "prune": ("cmd_retention",),
    "check": ("cmd_rules",), "alerts": ("cmd_rules",), "rules": ("cmd_rules", "cmd_sigma"),
    "policy": ("cmd_rules",), "report": ("cmd_rules",),
    "run": ("cmd_run",), "demo": ("cmd_run",),
    "ls": ("cmd_runs",), "show": ("cmd_runs",), "events": ("cmd_runs",), "doctor": ("cmd_runs",),
    "sandbox": ("cmd_sandbox",),
    "skill": ("cmd_skill",),
    "terminal": ("cmd_terminal",),
    "ui": ("cmd_ui",),
}  # fmt: skip
_LOADED: set[str] = set()


def _load_module(name: str) -> None:
    if name in _LOADED:
        return
    _LOADED.add(name)
    module = importlib.import_module(f"spyglass.cli.{name}")
    for command in getattr(module, "COMMANDS", []):
        cli.add_command(command)


def all_command_modules() -> list[str]:
    import pkgutil

    import spyglass.cli as pkg

    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name.startswith("cmd_"))


def _load_commands(only: str | None = None) -> None:
    """Import the modules of command ``only`` (every module when None or not listed)."""
    mods = COMMAND_MODULES.get(only) if only is not None else None
    for name in mods if mods is not None else all_command_modules():
        _load_module(name)


def run_cli(argv: list[str] | None, command: str | None) -> None:
    """The command line through click, with the modules of ``command`` loaded (the run's
    collector pause and eBPF load were started by :mod:`spyglass.cli.launch`)."""
    _load_commands(command)
    phases.mark("cli")
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
