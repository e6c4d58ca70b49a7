"""Real paths of directories, each from its parent's: one ``lstat`` per directory not seen yet.

``os.path.realpath`` looks at every component of every path it is given; the witness resolves
thousands of directories of one tree (an untar's), most of whose parents it has resolved already.
"""

from __future__ import annotations

import os
import stat


def real_dir(d: str, reals: dict[str, str], cap: int = 0) -> str:
    """``os.path.realpath(d)`` of an absolute, normalised ``d``, from the real paths of its
    ancestors noted in ``reals`` (directory -> real path), which gains ``d`` and the ancestors
    resolved on the way.  A name that is not there keeps its name, as with ``realpath``.  With
    ``cap``, ``reals`` is emptied when it holds that many."""
    todo: list[str] = []
    at = d
    while at not in reals and at != "/":
        todo.append(at)
        at = os.path.dirname(at)
    real = reals.get(at, "/")
    for name in reversed(todo):
        real = os.path.join(real, os.path.basename(name))
        try:
            link = stat.S_ISLNK(os.lstat(real).st_mode)
        except (OSError, ValueError):
            link = False  # not there: realpath keeps the name as it is
        if link:
            real = os.path.realpath(real)
        if cap and len(reals) >= cap:
            reals.clear()
        reals[name] = real
    return real
