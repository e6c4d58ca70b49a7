"""What the rules remember of the run so far: files it wrote, names it resolved, and the
copy event chain (which file was copied, renamed or linked from which; which copies
hold a secret).  Every table is bounded: a full one forgets its older half.

A file created or written by a process right after it read others is a copy of them
(the last few reads count); a file a shell opened for a tool before the exec
(``tool > out``, also when the shell opened it before forking) is a copy of what the
tool reads first; a rename or hard link is the same file under a new name.  Only
events are used, never file contents, so a replay agrees.  Everything is bounded.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from spyglass.events import Event
from spyglass.events.devices import is_device_path

_WRITE_TYPES = frozenset({"file.create", "file.write", "file.mkdir", "file.truncate"})
_LINK_TYPES = frozenset({"file.link", "file.symlink"})
#: reads that are not the source of a copy (loader, locale, the program's own libraries)
_NOT_SOURCE = re.compile(r"^/(proc|sys|dev)/|^/etc/ld\.so|^/usr/(lib|share)/locale/|\.so(\.[0-9.]+)?$|/__pycache__/"
                         r"|\.py[cd]$|/gconv/|/site-packages/|/lib/python[0-9.]+/")
#: how many recent reads of a process count as the sources of a file it writes
_RECENT = 4
#: how many reads after exec feed a file the process was started writing to (``tool > out``)
_REDIRECT_READS = 8
_MAX_CHAIN = 8
#: file extensions of user data: databases, documents, mail, calendars, key stores, archives
DATA_EXTENSIONS = frozenset({
    "db", "sqlite", "sqlite3", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "odt", "ods", "odp", "pdf",
    "ics", "vcf", "mbox", "eml", "pst", "kdbx", "zip", "tar", "tgz", "gz", "bz2", "xz", "7z", "rar",
    "parquet", "jpg", "jpeg", "png", "heic", "mp4", "mov", "psd", "key", "numbers", "pages", "dump", "bak",
})


def drop_older_half(table: dict[Any, Any]) -> None:
    """Make room in a full table: the older half of its entries goes (dicts keep insertion order)."""
    for key in list(itertools.islice(table, len(table) // 2)):
        table.pop(key, None)


class RunState:
    """What the rules remember of the run so far (bounded: a full table forgets its older half)."""

    MAX_PATHS = 200_000
    MAX_DNS = 100_000

    MAX_COPIES = 100_000
    MAX_SOURCES = 16_384

    def __init__(self) -> None:
        #: paths the run created or wrote (and did not delete since); a dict for its order
        self.written: dict[str, None] = {}
        self.dns: dict[str, str] = {}  # address -> name
        #: new path -> the path it was copied, renamed or linked from (the copy event chain)
        self.origin: dict[str, str] = {}
        #: a pre-existing path -> a file the run wrote from it (a transformed copy)
        self.copied: dict[str, str] = {}
        #: files that hold a copy of a secret (a copy of a secret is a secret)
        self.tainted: dict[str, None] = {}
        #: pid -> the last files it opened for reading (a copy's sources; the newest last)
        self.recent: dict[int, list[str]] = {}
        #: pid -> files its shell opened for it before the exec (``tool > out``), and reads left
        self.redirect: dict[int, tuple[list[str], int]] = {}
        #: pid -> files it created since its exec
        self.created_by: dict[int, list[str]] = {}
        self.read_secret: set[int] = set()
        #: pid -> the file it created last, until it reads or execs (a redirection about to be inherited)
        self.pending_out: dict[int, str] = {}
        #: path -> may a read of it be the source of a copy (not a library, locale, cache ...)
        self._source: dict[str, bool] = {}

    def note_fork(self, child: int, parent: int | None) -> None:
        """A new process: a file its parent had just created for it is its output (``tool > out``)."""
        out = self.pending_out.pop(parent, None) if parent is not None else None
        if out is not None:
            self.created_by[child] = [out]

    def note_exec(self, pid: int) -> None:
        """An exec: what the process created before it (its shell's redirections) is its output."""
        made = self.created_by.pop(pid, None)
        self.recent.pop(pid, None)
        self.pending_out.pop(pid, None)
        self.read_secret.discard(pid)
        if made:
            self.redirect[pid] = (made, _REDIRECT_READS)
        else:
            self.redirect.pop(pid, None)

    def note_exit(self, pid: int) -> None:
        """A process ended: what was kept about it alone goes (memory stays bounded by the living)."""
        self.recent.pop(pid, None)
        self.redirect.pop(pid, None)
        self.created_by.pop(pid, None)
        self.pending_out.pop(pid, None)
        self.read_secret.discard(pid)

    def note_read(self, ev: Event, secret: bool) -> None:
        """A successful read (called by the engine, which knows what is secret)."""
        path = ev.path
        if not path or (ev.flags and "O_DIRECTORY" in ev.flags):
            return
        source = self._source.get(path)
        if source is None:
            if len(self._source) >= self.MAX_SOURCES:
                drop_older_half(self._source)
            source = self._source[path] = _NOT_SOURCE.search(path) is None
        if not source:
            return
        pid = ev.pid
        self.pending_out.pop(pid, None)
        if len(self.recent) > self.MAX_COPIES:
            self.recent.clear()
            self.redirect.clear()
            self.created_by.clear()
            self.pending_out.clear()
        tainted = secret or path in self.tainted
        if tainted:
            self.read_secret.add(pid)
        reads = self.recent.setdefault(pid, [])
        if path in reads:
            reads.remove(path)
        reads.append(path)
        del reads[:-_RECENT]
        red = self.redirect.get(pid)
        if red is not None:
            outs, left = red
            for out in outs:
                self._derive(out, path, tainted)
            if left > 1:
                self.redirect[pid] = (outs, left - 1)
            else:
                del self.redirect[pid]

    def _derive(self, new: str, old: str, taint: bool) -> None:
        if new == old or is_device_path(new):
            return  # a device node (/dev/null, /dev/tty ...) stores nothing: never a copy
        if len(self.origin) >= self.MAX_COPIES:
            drop_older_half(self.origin)
        self.origin[new] = old
        if "/.git/" not in new and old not in self.copied:  # git storing a file in its object store
            if len(self.copied) >= self.MAX_COPIES:  # is not a replacement of it
                drop_older_half(self.copied)
            self.copied[old] = new
        if taint:
            if len(self.tainted) >= self.MAX_COPIES:
                drop_older_half(self.tainted)
            self.tainted[new] = None

    def update(self, ev: Event) -> None:
        if not ev.ok:
            return
        t = ev.type
        if t in _WRITE_TYPES:
            if ev.path:
                self._add(ev.path)
                if t in ("file.create", "file.write"):
                    made = self.created_by.setdefault(ev.pid, [])
                    if len(made) < _RECENT:
                        made.append(ev.path)
                    if len(self.pending_out) < self.MAX_COPIES:
                        self.pending_out[ev.pid] = ev.path
                    for src in self.recent.get(ev.pid, ()):
                        self._derive(ev.path, src, ev.pid in self.read_secret)
        elif t in _LINK_TYPES:
            # the link is new; what it points at was not written by making it (exec events
            # name the file a symlink resolves to, so a link to a dropped file is still caught)
            if ev.path:
                self._add(ev.path)
            if t == "file.link" and ev.path and ev.target:  # a hard link: the new name is the old file
                self._derive(ev.path, ev.target, ev.target in self.tainted)
        elif t == "file.rename":
            if ev.path:
                self.written.pop(ev.path, None)
            if ev.target:
                self._add(ev.target)
                if ev.path:
                    self._derive(ev.target, ev.path, ev.path in self.tainted)
        elif t == "file.delete":
            if ev.path:
                self.written.pop(ev.path, None)
        elif t == "net.dns" and ev.dns_answers and ev.dns_name:
            if len(self.dns) >= self.MAX_DNS:
                drop_older_half(self.dns)
            for a in ev.dns_answers:
                self.dns[a] = ev.dns_name.rstrip(".")
        elif t == "net.connect" and ev.domain and ev.address:
            self.dns.setdefault(ev.address, ev.domain)

    def _add(self, path: str) -> None:
        if path in self.written:
            return
        if len(self.written) >= self.MAX_PATHS:
            drop_older_half(self.written)
        self.written[path] = None

    def root_of(self, path: str) -> str:
        """Where ``path`` came from, following copies, renames and links back (bounded)."""
        for _ in range(_MAX_CHAIN):
            prev = self.origin.get(path)
            if prev is None:
                break
            path = prev
        return path
