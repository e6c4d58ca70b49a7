"""The file an exec names through a descriptor (``/proc/self/fd/N``, ``/dev/fd/N``,
``execveat(fd, "")``), for the strace parser."""

from __future__ import annotations

import re

from spyglass.capture.strace.state import EXE, Call, TraceState

#: an executable named by a descriptor of the caller (fexecve, an exec of a memory file)
_FD_EXE = re.compile(r"/(?:proc/(?:self|thread-self)|dev)/fd/(\d+)")


def descriptor_path(raw: str, dirfd: str | None) -> str | None:
    """The path of an exec through a descriptor (``/proc/self/fd/N`` for ``execveat(N, "")``), or
    None for an exec of a path."""
    if _FD_EXE.fullmatch(raw):
        return raw
    return f"/proc/self/fd/{dirfd}" if raw == "" and dirfd is not None and dirfd.isdigit() else None


def fd_named(st: TraceState, c: Call, raw: str, dirfd: str | None, ok: bool) -> str | None:
    """The file an exec names by a descriptor, from two witnesses that can each be wrong.

    The descriptor table (what the trace last saw behind the number) misses what changed unseen
    (``close`` and plain ``dup`` are not traced): a memory file dup'ed onto the number of a traced
    open of a trusted program.  The image the process runs (``/proc/PID/exe``, read as the line is
    parsed, after the exec) may already be a later exec's, or a script's interpreter.  (The live
    descriptor link is no witness at all: a close-on-exec memory file is gone by then and the new
    program's loader has reused its number.)  When they agree, or only one is known, that one; a
    memory or deleted file either of them names wins; two other names that disagree give the
    descriptor's own path (``/proc/self/fd/N``), which ``evasion-memfd-exec`` alerts on."""
    m = _FD_EXE.fullmatch(raw)
    fd = m.group(1) if m is not None else dirfd if raw == "" and dirfd is not None and dirfd.isdigit() else None
    if fd is None:
        return None
    table = c.proc.fds.get(int(fd))
    live: str | None = None
    if ok and st.fd_link is not None:
        try:
            live = st.fd_link(c.proc.pid, EXE)
        except Exception:  # a host callback must never break parsing
            live = None
        if live is not None and not live.startswith("/"):
            live = None
    if table is not None and table.startswith("/memfd:") and not table.endswith(" (deleted)"):
        table += " (deleted)"  # as the kernel names a memory file's image (the annotation drops it)
    if table is None or live is None or table == live:
        return table or live
    for name in (live, table):
        if name.startswith("/memfd:") or name.endswith(" (deleted)"):
            return name
    return raw or None
