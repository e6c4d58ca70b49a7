"""What the commands share that needs no click (``spyglass run`` loads none: spyglass/cli/direct.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spyglass.store import Store


def echo_err(message: str) -> None:
    """``message`` as one line on stderr, as ``click.echo(message, err=True)`` writes it: click
    itself writes a line holding an escape sequence (it strips them when stderr is no terminal)
    and any line when stderr is missing or its encoding is ASCII (it wraps such a stream)."""
    stream = sys.stderr
    encoding = getattr(stream, "encoding", None) or "ascii"
    if stream is None or "\x1b" in message or encoding.lower().replace("-", "").replace("_", "") in _ASCII:
        import click

        click.echo(message, err=True)
        return
    stream.write(message + "\n")
    stream.flush()


#: the names click takes for an ASCII stream (click._compat.is_ascii_encoding looks them up in codecs)
_ASCII = frozenset({"ascii", "usascii", "646", "ansix3.41968", "ansix3.41986", "cp367", "csascii", "ibm367",
                    "iso646us", "iso_646.irv1991", "us"})


def open_store(store_path: Path | None, create: bool = False, write: bool = False) -> Store:
    """The store; unless ``create`` or ``write`` it is opened read-only (reading commands never write)."""
    from spyglass.errors import PathError
    from spyglass.store import Store

    try:
        store = Store(store_path, create=create, readonly=not (create or write))
    except OSError as exc:
        raise PathError.from_os_error(exc, what="cannot use the store at") from None
    if store.index_problem:
        echo_err(f"spyglass: warning: the index of {store.root} cannot be opened ({store.index_problem}); "
                 "runs are read from their directories")
    return store
