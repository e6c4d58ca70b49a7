"""The ``spyglass`` command.

Subcommands live in ``spyglass/cli/cmd_*.py`` modules; each exposes
``COMMANDS`` (a list of click commands).  Only the module of the command
invoked is imported (``COMMAND_MODULES`` says which one holds which command;
a name not listed there, and ``--help``, load them all, so a new module works
before it is listed; tests/cli/test_main.py checks the table is complete).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from spyglass import __version__, gcpause, logs, phases
from spyglass.errors import EXIT_USAGE, SpyglassError

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
    from spyglass import termcolor

    termcolor.set_mode(color)
    level = logs.WARNING - 10 * verbose
    # logging itself loads at the first record (spyglass/logs.py): a run that goes well logs nothing
    logs.configure(level=max(level, logs.DEBUG), format="spyglass: %(levelname)s: %(message)s")


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


def _invoked(argv: list[str]) -> str | None:
    """The subcommand named on the command line (None: none, or help)."""
    for i, arg in enumerate(argv):
        if arg in ("-h", "--help", "--version"):
            return None
        if arg == "--color":  # the group's only option with a value
            continue
        if arg.startswith("-"):
            continue
        if i > 0 and argv[i - 1] == "--color":
            continue
        return arg
    return None


def _preload(argv: list[str], command: str | None) -> None:
    """``spyglass run`` that may use eBPF: the program starts loading before the CLI's imports.

    The kernel's verifier takes most of a run's start and holds no interpreter lock, so the load
    overlaps everything until the launch.  A run that ends up not using it (an error in its
    options, a fallback to strace) closes it unused."""
    if command != "run":
        return
    opts = argv[: argv.index("--")] if "--" in argv else argv
    for i, arg in enumerate(opts):
        if arg in ("-h", "--help", "--backend=strace") or (arg == "--backend" and opts[i + 1 : i + 2] == ["strace"]):
            return
    from spyglass.capture.ebpf import preload

    preload.start()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    command = _invoked(args)
    if command == "run" and argv is None:  # spyglass's own process (a caller's main(argv) returns as always)
        try:
            _main(args, argv, command)
        except SystemExit as exc:
            leave(exc.code)  # returns when the interpreter's own exit is needed
            raise
        return
    _main(args, argv, command)


def leave(code: object) -> None:
    """The end of a ``spyglass run`` process, without the interpreter's teardown (its modules and
    objects freed one by one: about 5 ms of every run, after everything is written).

    What the interpreter's exit does that matters still happens: the ``atexit`` functions run
    (the phase marks, logging's and exporters' flushes) and stdout and stderr are flushed.
    Nothing is left unwritten: the run's files are closed when the run finishes (its checkpoint
    holds their digests), and the evidence never depends on an orderly exit (it is kept for a
    ``kill -9`` at any moment: docs/evidence.md).  Returns instead, for the interpreter's own exit,
    when a thread that is not a daemon still runs (the exit waits for it), when the code is not a
    number (the interpreter prints it), or when a flush fails (it reports that as it does)."""
    import atexit
    import os
    import threading

    if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
        return
    main_thread = threading.main_thread()
    if threading.current_thread() is not main_thread or any(
        not t.daemon for t in threading.enumerate() if t is not main_thread
    ):
        return
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if run_exitfuncs is None:
        return
    run_exitfuncs()  # (and forgets them: the interpreter's exit does not run them again)
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except Exception:
        return
    os._exit(code or 0)


def _main(args: list[str], argv: list[str] | None, command: str | None) -> None:
    if command == "run":  # the collector is resumed once the agent is launched (spyglass/gcpause.py)
        gcpause.pause()
    _preload(args, command)
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
    finally:
        gcpause.end()  # a caller that runs the CLI in its own process gets its collector back
