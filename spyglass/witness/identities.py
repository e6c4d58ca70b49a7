"""The protected files a capture recognises by device and inode (``spyglass.capture.ident``).

At start: the witness's own files (store index, policy, rule files, signing
keys: :class:`~spyglass.witness.protected.Protected`) and the files that exist
of the policy's secret globs (``/etc/shadow``, ``~/.ssh/id_*`` ...), so that a
read through a symlink, a hard link or a ``/proc/self/fd`` name is recorded
as the file it reached.  The glob walk is bounded (``MAX_FILES``, ``MAX_SECONDS``);
globs that start with ``**`` (``**/.env``: anywhere) are matched by name only.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import time
from collections.abc import Iterable

from spyglass.witness.protected import FileId, Protected

MAX_FILES = 4096
MAX_SECONDS = 0.5


def _expand(pattern: str, home: str) -> str:
    if pattern == "~" or pattern.startswith("~/"):
        return home.rstrip("/") + pattern[1:]
    return pattern


def secret_files(globs: Iterable[str], exceptions: Iterable[str], home: str) -> list[str]:
    """Existing regular files matched by ``globs`` (none of ``exceptions``), bounded in count and time."""
    deadline = time.monotonic() + MAX_SECONDS
    excl = [_expand(e, home) for e in exceptions]
    out: list[str] = []
    seen: set[str] = set()
    for g in globs:
        pat = _expand(g, home)
        if not pat.startswith("/"):
            continue  # "**/.env": anywhere, no root to walk from
        for f in glob.iglob(pat, recursive=True):
            if len(out) >= MAX_FILES or time.monotonic() > deadline:
                return out
            if f in seen or any(fnmatch.fnmatch(f, e) for e in excl):
                continue
            seen.add(f)
            if os.path.isfile(f) and not os.path.islink(f):  # a link is not the file it names
                out.append(f)
    return out


def protected_ids(prot: Protected, globs: Iterable[str] = (), exceptions: Iterable[str] = (),
                  home: str = "/") -> dict[FileId, str]:
    """(device, inode) -> canonical path of every protected and secret file that exists now."""
    ids: dict[FileId, str] = {}
    prot.settle()  # its protected directories walked now, if not yet
    for f in secret_files(globs, exceptions, home):
        try:
            st = os.stat(f)
        except OSError:
            continue
        ids.setdefault((st.st_dev, st.st_ino), os.path.normpath(f))
    ids.update(prot.paths)  # the witness's own names win
    return ids
