"""The strace parser's fast paths: the most frequent lines, parsed by one regular expression each.

An untar, a build or a checkout makes mostly ``openat`` lines, then ``fchmod``,
``fchown``, ``mkdirat`` and ``unlinkat``.  Each is matched whole here and made
into exactly the event the general path (argument splitting, :mod:`.files`)
makes; a line with anything unusual (escapes, non-ASCII bytes, a thread not
known yet, an unfinished call) is left to the general path (``None``).
``tests/capture/strace/test_strace_fastpath.py`` compares both paths.
"""

from __future__ import annotations

import re

from spyglass.capture.fields import open_kind
from spyglass.capture.strace.decode import parse_int
from spyglass.capture.strace.paths import resolve
from spyglass.capture.strace.state import TraceState
from spyglass.events.schema import Event

# the common case in one match: openat with a plain path, returning a plain path or an errno
_FAST_OPEN = re.compile(
    r"(\d+) +(\d+)\.(\d{6}) openat\((AT_FDCWD|\d+)<(/[^<>\\]*)>, "
    r'"([^"\\]*)", ([A-Z0-9_|]+)(?:, (0[0-7]*))?\) = '
    r"(?:(\d+)<(/[^<>\\]*)>|-1 (E[A-Z0-9]+) \([^()]*\))$"
)
# the next most frequent: attribute changes on a descriptor, and mkdirat/unlinkat with a plain name
_FAST_FILE = re.compile(
    r"(\d+) +(\d+)\.(\d{6}) (fchmod|fchown|mkdirat|unlinkat)\((AT_FDCWD|\d+)<(/[^<>\\]*)>, ([^<>\\]*)\) = "
    r"(?:0|-1 (E[A-Z0-9]+) \([^()]*\))$"
)
_NAME_ARG = re.compile(r'"([^"\\]*)", ([A-Z0-9_|]+)$')
_FAST_KIND = {"fchmod": "file.chmod", "fchown": "file.chown", "mkdirat": "file.mkdir", "unlinkat": "file.delete"}

def _owner_id(value: int) -> int | None:
    return None if value < 0 or value == 0xFFFFFFFF else value



class FastPaths:
    """The fast paths of one parser (they share its trace state)."""

    def __init__(self, state: TraceState) -> None:
        self.state = state
        self._kinds: dict[str, str | None] = {}  # open flags -> event type
        self._sec, self._sec_ns = "", 0  # the last timestamp's seconds, parsed

    def feed(self, line: str) -> list[Event] | None:
        """The line's events, or None for the general path."""
        m = _FAST_OPEN.match(line)
        if m is not None:
            return self.open(m)
        m = _FAST_FILE.match(line)
        if m is not None:
            return self.file(m)
        return None

    def file(self, m: re.Match[str]) -> list[Event] | None:
        """fchmod/fchown on a descriptor with a plain path, mkdirat/unlinkat with a plain name:
        the events the general path makes, without splitting arguments; None sends the line on."""
        st = self.state
        tid_s, sec, usec, name, fd_s, base, args, err = m.groups()
        tid = int(tid_s)
        leader = st.leader_of.get(tid)
        if leader is None or not base.isascii() or not args.isascii() or (base == "/" and st.overlays.roots):
            return None  # ... or perhaps below a detached mount's descriptor (TraceState.below)
        proc = st.procs[leader]
        mode: str | None = None
        owner: int | None = None
        group: int | None = None
        flags: str | None = None
        raw: str | None = None
        if name == "fchmod" or name == "fchown":
            if fd_s == "AT_FDCWD":
                return None
            if name == "fchmod":
                value = parse_int(args) if args.isdigit() else None
                if value is None:
                    return None
                mode = f"0{value:o}"
            else:
                ids = args.split(", ")
                if len(ids) != 2 or not all(i.lstrip("-").isdigit() for i in ids):
                    return None
                owner, group = _owner_id(int(ids[0])), _owner_id(int(ids[1]))
            proc.fds[int(fd_s)] = base
            path = base
        else:
            ma = _NAME_ARG.match(args)
            if ma is None:
                return None
            raw, last = ma.groups()
            if fd_s == "AT_FDCWD":
                proc.cwd = base
            else:
                proc.fds[int(fd_s)] = base
            path = resolve(raw, base, leader, tid, st, st.realpath_dir)
            if not path.isascii():
                return None
            if name == "mkdirat":
                value = parse_int(last) if last.isdigit() else None
                if value is None:
                    return None
                mode = f"0{value:o}"
            elif last != "0":
                flags = last
        if sec != self._sec:
            self._sec, self._sec_ns = sec, int(sec) * 1_000_000_000
        ev = Event(type=_FAST_KIND[name], ts=self._sec_ns + int(usec) * 1000, pid=leader, syscall=name, path=path)
        if err is not None:
            ev.ok, ev.errno = False, err
        if tid != leader:
            ev.tid = tid
        if raw is not None and raw != path:
            ev.raw_path = raw
        if mode is not None:
            ev.mode = mode
        if owner is not None:
            ev.owner = owner
        if group is not None:
            ev.group = group
        if flags is not None:
            ev.flags = flags
        return [ev]

    def open(self, m: re.Match[str]) -> list[Event] | None:
        """The hot path for the most frequent line; None sends the line down the general path."""
        st = self.state
        tid_s, sec, usec, dirfd, base, raw, flags, mode, fd, path, err = m.groups()
        tid = int(tid_s)
        leader = st.leader_of.get(tid)
        if leader is None or not raw.isascii():
            return None
        if st.overlays.roots and ((base == "/" and dirfd != "AT_FDCWD") or raw.startswith(("/proc/", "/dev/fd/"))):
            return None  # perhaps below a detached mount's descriptor (TraceState.below)
        kind = self._kinds.get(flags, "")
        if kind == "":
            kind = self._kinds[flags] = open_kind(flags)
        proc = st.procs[leader]
        if dirfd == "AT_FDCWD":
            proc.cwd = base
        else:
            proc.fds[int(dirfd)] = base
        if kind is None:  # O_PATH: no data access, but the fd names a file (*at() and /proc/self/fd)
            if fd is not None and path.isascii():
                proc.fds[int(fd)] = path
            return []
        if err is None:
            if not path.isascii():
                return None
            proc.fds[int(fd)] = path
            if (path == "/etc/hosts" or raw == "/etc/hosts") and st.hosts_file is not None:
                st.learn_hosts(leader, "/etc/hosts")
        else:
            path = resolve(raw, base, leader, tid, st, st.realpath_dir)
            if not path.isascii():
                return None
        if sec != self._sec:
            self._sec, self._sec_ns = sec, int(sec) * 1_000_000_000
        ts = self._sec_ns + int(usec) * 1000
        ev = Event(type=kind, ts=ts, pid=leader, syscall="openat", path=path, flags=flags)
        if err is not None:
            ev.ok, ev.errno = False, err
        if tid != leader:
            ev.tid = tid
        if raw != path:
            ev.raw_path = raw
        if mode and kind == "file.create":
            ev.mode = f"0{int(mode, 8):o}"
        return [ev]

