"""Finding a program on ``PATH`` as ``shutil.which`` does, without importing ``shutil``.

``shutil`` loads the compression modules (bz2, lzma) at import: 2-3 ms of every
``spyglass run``'s start, for a PATH lookup (a run under eBPF needs nothing else of it).
"""

from __future__ import annotations

import os


def which(name: str, path: str | None = None) -> str | None:
    """``shutil.which(name, path=path)`` on POSIX: ``name`` itself when it has a directory part, else
    the first ``name`` in ``path`` (``os.pathsep``-separated; None: ``$PATH``, else ``os.defpath``)
    that exists, is executable and is not a directory; None when there is none."""
    if os.path.dirname(name):
        return name if _executable(name) else None
    if path is None:
        path = os.environ.get("PATH", os.defpath)
    seen: set[str] = set()
    for folder in path.split(os.pathsep) if path else ():
        if folder in seen:
            continue
        seen.add(folder)
        full = os.path.join(folder, name)
        if _executable(full):
            return full
    return None


def _executable(path: str) -> bool:
    return os.path.exists(path) and os.access(path, os.X_OK) and not os.path.isdir(path)
