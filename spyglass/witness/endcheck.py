"""The protected places other than the store and spyglass's own source, as they were at a run's
start and at its end (spyglass.witness.endofrun): a change the run's events did not show (a name
reached through a symlink removed at once) is still found."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator

#: what is left to other checks: the store (spyglass writes it during the run), spyglass's own source
SKIP = frozenset({"the spyglass store", "spyglass's own source", "spyglass's rule pack", "the rule cache's key"})
#: files walked in one protected directory at most (the policy locations hold a few)
MAX_FILES = 2_000

State = tuple[int, int, int, int]  # device, inode, status change time (ns), mode


def _files(places: Iterable[tuple[str, str, bool]], allowed: Callable[[str], bool]) -> Iterator[tuple[str, str]]:
    for path, what, tree in places:
        if what in SKIP or allowed(path):
            continue
        yield path, what
        if tree and os.path.isdir(path):
            n = 0
            for top, dirs, files in os.walk(path):
                dirs[:] = [d for d in dirs if not allowed(os.path.join(top, d))]
                for f in files:
                    n += 1
                    if n > MAX_FILES:
                        return
                    yield os.path.join(top, f), what


def _state(path: str) -> State | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_ctime_ns, st.st_mode


def snapshot(places: Iterable[tuple[str, str, bool]], allowed: Callable[[str], bool]) -> dict[str, State | None]:
    """Path -> its state now (None: not there), for every protected place and the files in it."""
    return {p: _state(p) for p, _ in _files(places, allowed)}


def changed(before: dict[str, State | None], places: Iterable[tuple[str, str, bool]],
            allowed: Callable[[str], bool]) -> list[tuple[str, str]]:
    """(path, what) of every place or file whose state is not what it was (new, gone, replaced,
    changed); a directory by device and inode only (its status changes with what it holds)."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for path, what in _files(places, allowed):
        seen.add(path)
        now, then = _state(path), before.get(path)
        if now is None or then is None:
            if now != then:
                out.append((path, what))
        elif now[:2] != then[:2] or (not os.path.isdir(path) and now != then):
            out.append((path, what))
    out.extend((p, "a protected place") for p, st in before.items() if st is not None and p not in seen
               and _state(p) is None)
    return out
