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
    store = Store(store_path, create=create, readonly=not (create or write))
    if store.index_problem:
        click.echo(
            f"spyglass: warning: the index of {store.root} cannot be opened ({store.index_problem}); "
            "runs are read from their directories",
            err=True,
        )
    return store


def open_reader(store_path: Path | None, ref: str) -> RunReader:
    store = open_store(store_path)
    return RunReader(store, store.resolve(ref))


def echo_json(obj: Any) -> None:
    """Pretty JSON on stdout (wire names; non-serialisable values as strings)."""
    import msgspec

    data = msgspec.to_builtins(obj)
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def is_tty(stream: Any = None) -> bool:
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())
