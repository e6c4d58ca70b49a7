"""Lexical path resolution: what the kernel acted on, as far as text alone can tell.

A path argument is made absolute against the directory it is relative to
(the dirfd's path as ``-yy`` shows it, or the process's working directory),
the ``/proc/self/cwd``-style aliases are mapped to what they stand for, an
optional host callback resolves symlinks in the directory part, and ``.`` and
``..`` are folded.  All values are fs strings (see :mod:`.decode`).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

#: ``realpath_dir(pid, abs_dir) -> abs_dir_with_symlinks_resolved``
RealpathDir = Callable[[int, str], str]

#: ``/proc/WHO[/task/TID]/(cwd|root|exe|fd/N)``: a thread's entries are its process's (one table of descriptors)
_PROC_ALIAS = re.compile(r"/proc/(self|thread-self|\d+)(?:/task/\d+)?(?:/(cwd|root|exe|fd/(\d+)))?(?=/|$)")


def normalize(path: str) -> str:
    """Fold ``.``, ``..`` and repeated slashes of an absolute path (``//x`` -> ``/x``)."""
    if "/." not in path and "//" not in path and (len(path) == 1 or not path.endswith("/")):
        return path
    out = posixpath.normpath(path)
    if out.startswith("//"):
        out = "/" + out.lstrip("/")
    return out


def tidy(path: str) -> str:
    """Repeated slashes and ``.`` components of an absolute path folded, ``..`` kept: ``//proc/./self``
    -> ``/proc/self`` (``..`` after a descriptor's magic link is its file's parent: no text folds it)."""
    if "//" not in path and "/." not in path:
        return path
    parts = [p for p in path.split("/") if p and p != "."]
    return "/" + "/".join(parts) + ("/" if path.endswith("/") and parts else "")


def join(base: str, raw: str) -> str:
    """``raw`` made absolute against ``base`` (not normalized)."""
    if raw.startswith("/"):
        return raw
    if not raw:
        return base
    if base.endswith("/"):
        return base + raw
    return base + "/" + raw


def split_dir(path: str) -> tuple[str, str]:
    """``/a/b/c`` -> (``/a/b``, ``c``); the root and paths ending in ``.``/``..`` keep no name."""
    path = path.rstrip("/") or "/"
    if path == "/":
        return "/", ""
    head, _, name = path.rpartition("/")
    if name in (".", ".."):
        return path, ""
    return head or "/", name


class ProcLookup:
    """What the ``/proc/<pid>/...`` aliases need to know about the traced processes."""

    def cwd_of(self, pid: int) -> str | None:  # pragma: no cover - interface
        raise NotImplementedError

    def fd_path(self, pid: int, fd: int) -> str | None:  # pragma: no cover - interface
        raise NotImplementedError

    def exe_of(self, pid: int) -> str | None:  # pragma: no cover - interface
        raise NotImplementedError

    def root_of(self, pid: int) -> str | None:
        """The root directory a process chrooted to (as the host names it), None when it did not."""
        return None


def map_proc_alias(path: str, pid: int, tid: int, procs: ProcLookup) -> str:
    """``/proc/self/cwd/x`` -> ``<cwd>/x``; ``/proc/<n>/exe`` -> the program it runs, where known.

    ``/proc/self`` and ``/proc/thread-self`` become ``/proc/<pid>``/``/proc/<pid>/task/<tid>``
    otherwise: they name the traced process, never the process reading the trace.
    """
    m = _PROC_ALIAS.match(path)
    if m is None:
        return path
    who, what, fdnum = m.group(1), m.group(2), m.group(3)
    target = pid if who == "self" else tid if who == "thread-self" else int(who)
    rest = path[m.end() :]
    base: str | None = None
    if what == "cwd":
        base = procs.cwd_of(target)
    elif what == "root":
        base = "/"
    elif what == "exe":
        base = procs.exe_of(target)
    elif what is not None:
        base = procs.fd_path(target, int(fdnum))
        if base is not None and rest and base.startswith("/proc/"):
            # a /proc file is no directory: the descriptor number was reused by another thread
            # since the trace last named it (Claude Code opens files through /proc/self/fd/N/NAME)
            base = None
    if base is None:
        me = f"/proc/{pid}/task/{tid}" if who == "thread-self" else f"/proc/{target}"
        return me + path[len(f"/proc/{who}") :]
    if not rest:
        return base
    return rest if base == "/" else base + rest


def resolve(
    raw: str,
    base: str,
    pid: int,
    tid: int,
    procs: ProcLookup,
    realpath_dir: RealpathDir | None,
) -> str:
    """The absolute, normalized path for argument ``raw`` relative to directory ``base``; an
    absolute ``raw`` of a process that chrooted is below its root (symlinks resolved as it sees them)."""
    if raw[:1] == "/":
        root = procs.root_of(pid)
        if root is not None:
            view = normalize(raw)
            if realpath_dir is not None:  # as the process sees it: inside its root
                head, name = split_dir(view)
                try:
                    head = realpath_dir(pid, head)
                except Exception:  # a host callback must never break parsing
                    pass
                view = normalize(join(head, name) if name else head)
            return root if view == "/" else root + view
    full = tidy(join(base, raw))  # (``//proc/self``, ``/dev/./fd``: the same names to the kernel)
    for _ in range(8):  # ``/proc/self/root/proc/self/fd/N``: the alias after the root is one too
        if full.startswith("/dev/fd/"):
            # /dev/fd is /proc/self/fd: the traced process's descriptors (resolved as a symlink here,
            # /proc/self would be the tracer's own)
            full = "/proc/self/fd/" + full[len("/dev/fd/") :]
        if not full.startswith("/proc/"):
            break
        # ``..`` folds after the alias is mapped: ``/proc/self/fd/N/../x`` is beside N's directory
        mapped = map_proc_alias(full, pid, tid, procs)
        if mapped == full or not mapped.startswith(("/proc/", "/dev/fd/")):
            full = normalize(mapped) if mapped.startswith("/proc/") else mapped
            break
        full = mapped
    # /proc holds magic links that only mean something to the process itself: never resolve them
    if realpath_dir is not None and not full.startswith("/proc/"):
        head, name = split_dir(full)
        try:
            head = realpath_dir(pid, head)
        except Exception:  # a host callback must never break parsing
            pass
        if head.startswith("/proc/"):  # a symlink to the writer's /proc/self/fd/N, the writer gone since:
            head = map_proc_alias(normalize(head), pid, tid, procs)  # its descriptor as the trace showed it
        full = join(head, name) if name else head
    return normalize(full)
