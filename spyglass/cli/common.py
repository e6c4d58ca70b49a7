"""Options and helpers shared by the commands."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from spyglass.cli.plain import open_store as open_store  # (its home: no click needed)
from spyglass.store import RunReader

F = TypeVar("F", bound=Callable[..., Any])


class LongFlags(click.Command):
    """A command whose one-letter flags (``-q``) reach click's parser by their long names.

    Click tries every option as a long one first, and the error of that miss imports ``difflib``
    to suggest a name (2 ms of every ``spyglass run -q``'s start, for nothing).  The arguments
    click would parse as options are the same: a word that is the value of an option, and
    everything after ``--``, are left as they are; so is every argument of a command with an
    option whose value may be left out (where a word's role depends on the next one)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, long_flags(self, ctx, args))


def long_flags(cmd: click.Command, ctx: click.Context, args: list[str]) -> list[str]:
    """``args`` with each one-letter flag of ``cmd`` that click would parse as that flag given by
    its long name (see :class:`LongFlags`)."""
    longer: dict[str, str] = {}  # "-q" -> "--quiet"
    values: dict[str, int] = {}  # an option's name -> how many words it takes after it
    for p in cmd.get_params(ctx):
        if not isinstance(p, click.Option):
            continue
        flag = p.is_flag or p.count
        if not flag and getattr(p, "_flag_needs_value", False):
            return args  # a value that may be left out: not rewritten
        for names in (p.opts, p.secondary_opts):
            for name in names:
                values[name] = 0 if flag else p.nargs
            whole = [n for n in names if n.startswith("--")]
            if flag and whole:
                longer.update((n, whole[0]) for n in names if len(n) == 2 and n[0] == "-" and n[1] != "-")
    if not longer or not any(a in longer for a in args):
        return args
    out = list(args)
    i = 0
    while i < len(out):
        word = out[i]
        if word == "--":
            break
        if word in longer:
            out[i] = longer[word]
        elif word in values:
            i += values[word]  # its values, whatever they look like
        elif not word.startswith("-") and not ctx.allow_interspersed_args:
            break
        i += 1
    return out


def store_option(f: F) -> F:
    return click.option(
        "--store",
        "store_path",
        type=click.Path(file_okay=False, path_type=Path),
        envvar="SPYGLASS_STORE",
        default=None,
        help="Run store directory (default: $XDG_STATE_HOME/spyglass, i.e. ~/.local/state/spyglass; "
        "env SPYGLASS_STORE).",
    )(f)


def format_option(*choices: str, default: str = "text") -> Callable[[F], F]:
    def deco(f: F) -> F:
        return click.option(
            "--format",
            "fmt",
            type=click.Choice([default, *choices]),
            default=default,
            show_default=True,
            help="Output format.",
        )(f)

    return deco


def check_output_path(path: Path) -> None:
    """Fail early, with the remedy, when PATH cannot be written (before any work is done)."""
    import errno
    import os

    from spyglass.errors import PathError

    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise PathError.from_os_error(OSError(errno.EISDIR, "is a directory"), path, "cannot write")
    if not parent.exists():
        raise PathError(f"cannot write {path}: directory {parent} does not exist",
                        hint=f"create it (mkdir -p {parent}) or choose another path")
    if not parent.is_dir():
        raise PathError.from_os_error(OSError(errno.ENOTDIR, "not a directory"), path, "cannot write")
    if not os.access(parent, os.W_OK) and not os.access(path, os.W_OK):
        raise PathError.from_os_error(OSError(errno.EACCES, "permission denied"), path, "cannot write")


def write_output(path: Path, data: bytes | str) -> None:
    """Write an output file the user named; a failure is one line naming the path and the remedy."""
    from spyglass.errors import PathError

    check_output_path(path)
    try:
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)
    except OSError as exc:
        raise PathError.from_os_error(exc, path, "cannot write") from None


def open_reader(store_path: Path | None, ref: str) -> RunReader:
    store = open_store(store_path)
    return RunReader(store, store.resolve(ref))


def echo_json(obj: Any) -> None:
    """Pretty JSON on stdout (wire names; non-serialisable values as strings)."""
    import msgspec

    data = msgspec.to_builtins(obj)
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def is_tty(stream: Any = None) -> bool:
    """Colour for STREAM (stdout by default)?  ``--color``, ``NO_COLOR`` and the terminal decide."""
    from spyglass.termcolor import use_color

    return use_color(stream or sys.stdout)
