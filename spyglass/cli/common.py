"""Options and helpers shared by the commands."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from spyglass.store import RunReader, Store

F = TypeVar("F", bound=Callable[..., Any])


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


def open_store(store_path: Path | None, create: bool = False, write: bool = False) -> Store:
    """The store; unless ``create`` or ``write`` it is opened read-only (reading commands never write)."""
    from spyglass.errors import PathError

    try:
        store = Store(store_path, create=create, readonly=not (create or write))
    except OSError as exc:
        raise PathError.from_os_error(exc, what="cannot use the store at") from None
    if store.index_problem:
        click.echo(
            f"spyglass: warning: the index of {store.root} cannot be opened ({store.index_problem}); "
            "runs are read from their directories",
            err=True,
        )
    return store


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
