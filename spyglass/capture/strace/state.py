"""What the parser remembers between lines: processes, threads, names, and one decoded call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from spyglass.capture.overlays import Overlays
from spyglass.capture.strace.decode import ann_path, parse_fd, split_args
from spyglass.capture.strace.paths import ProcLookup, RealpathDir, resolve
from spyglass.events.schema import Event

#: ``hosts_file(pid, path) -> {address: name}`` for a hosts file the process opened
HostsFile = Callable[[int, str], dict[str, str]]
#: ``fd_link(pid, fd) -> link`` of a live process's descriptor (``/proc/<pid>/fd/<fd>``: a path, or
#: ``pipe:[N]``-style text), or None when it cannot be read
FdLink = Callable[[int, int], "str | None"]
#: the descriptor number that asks ``fd_link`` for the process's executable (``/proc/<pid>/exe``)
EXE = -1
#: ``pgid_of(pid) -> process group`` of a live process, or None
PgidOf = Callable[[int], "int | None"]


class Peer(msgspec.Struct):
    """Where a connected socket goes, remembered from its connect()."""

    address: str | None
    port: int | None
    transport: str | None
    net_type: str | None
    inode: str | None = None


class Proc(msgspec.Struct):
    """One traced process (thread group), keyed by its leader's pid."""

    pid: int
    ppid: int | None
    cwd: str
    ruid: int
    euid: int
    rgid: int
    egid: int
    argv: list[str] | None = None
    exe: str | None = None
    alive: bool = True
    started: bool = False  # process.start emitted
    threads: set[int] = msgspec.field(default_factory=set)
    fds: dict[int, str] = msgspec.field(default_factory=dict)  # fd -> path, as last seen in an annotation
    peers: dict[int, Peer] = msgspec.field(default_factory=dict)  # fd -> connect() destination

    def child(self, pid: int) -> Proc:
        """A forked child: same cwd, ids, program and descriptors."""
        return Proc(
            pid=pid,
            ppid=self.pid,
            cwd=self.cwd,
            ruid=self.ruid,
            euid=self.euid,
            rgid=self.rgid,
            egid=self.egid,
            argv=self.argv,
            exe=self.exe,
            fds=dict(self.fds),
            peers=dict(self.peers),
        )


class Call:
    """One completed (or stitched) syscall line."""

    __slots__ = ("_argv", "args", "err", "name", "pid", "proc", "ret", "ret_ann", "tid", "ts")

    def __init__(
        self,
        name: str,
        tid: int,
        proc: Proc,
        ts: int,
        args: str,
        ret: int | None,
        ret_ann: str | None,
        err: str | None,
    ) -> None:
        self.name = name
        self.tid = tid
        self.proc = proc
        self.pid = proc.pid
        self.ts = ts
        self.args = args
        self.ret = ret
        self.ret_ann = ret_ann
        self.err = err
        self._argv: list[str] | None = None

    @property
    def ok(self) -> bool:
        return self.err is None and (self.ret is None or self.ret >= 0)

    @property
    def argv(self) -> list[str]:
        """The top-level arguments (split once, on demand)."""
        if self._argv is None:
            self._argv = split_args(self.args)
        return self._argv

    def arg(self, i: int) -> str:
        a = self.argv
        return a[i] if i < len(a) else ""


class TraceState(ProcLookup):
    """Process table, address names and path resolution shared by the syscall handlers."""

    def __init__(
        self,
        cwd: str,
        uid: int,
        gid: int,
        realpath_dir: RealpathDir | None,
        hosts_file: HostsFile | None,
        fd_link: FdLink | None = None,
        pgid_of: PgidOf | None = None,
    ) -> None:
        self.initial_cwd = cwd
        self.fd_link = fd_link
        self.pgid_of = pgid_of
        self.handles: dict[str, str] = {}  # "type:f_handle" from name_to_handle_at -> path
        self.overlays = Overlays()  # overlay mounts of the run: files below them get their own path
        self.untraced: set[int] = set()  # children made with CLONE_UNTRACED (never traced)
        self.uid = uid
        self.gid = gid
        self.realpath_dir = realpath_dir
        self.hosts_file = hosts_file
        self.procs: dict[int, Proc] = {}  # leader pid -> process (alive, and exited ones)
        self.leader_of: dict[int, int] = {}  # tid -> leader pid, for live threads
        self.chroots: dict[int, str] = {}  # pid -> the root it chrooted to (inherited at a fork)
        self.seen: set[int] = set()  # every pid/tid ever part of the traced tree
        self.dns_names: dict[str, str] = {}  # address -> name, from DNS answers
        self.hosts_names: dict[str, str] = {}  # address -> name, from hosts files

    # --- ProcLookup ---------------------------------------------------------

    def cwd_of(self, pid: int) -> str | None:
        proc = self.procs.get(self.leader_of.get(pid, pid))
        return proc.cwd if proc is not None else None

    def fd_path(self, pid: int, fd: int) -> str | None:
        """What descriptor ``fd`` names: the live process's own link when it can be read (a table
        entry may be stale: descriptors are closed and reused without the tracer seeing it), else the
        path last seen for it; None for a descriptor that names no file (a pipe, a socket)."""
        if self.fd_link is not None:
            try:
                live = self.fd_link(pid, fd)
            except Exception:  # a host callback must never break parsing
                live = None
            if live is not None:
                return live if live.startswith("/") else None
        proc = self.procs.get(self.leader_of.get(pid, pid))
        seen = proc.fds.get(fd) if proc is not None else None
        # as the live link: a pipe, socket or pidfd (``pipe:[N]``, ``pid:N``) is no file's name
        return seen if seen is not None and seen.startswith("/") else None

    def root_of(self, pid: int) -> str | None:
        return self.chroots.get(self.leader_of.get(pid, pid)) if self.chroots else None

    def exe_of(self, pid: int) -> str | None:
        proc = self.procs.get(self.leader_of.get(pid, pid))
        return proc.exe if proc is not None else None

    # --- names --------------------------------------------------------------

    def domain_of(self, address: str | None) -> str | None:
        if not address:
            return None
        name = self.dns_names.get(address) or self.hosts_names.get(address)
        if name is None and address.startswith("::ffff:"):
            v4 = address[7:]
            name = self.dns_names.get(v4) or self.hosts_names.get(v4)
        return name

    def learn_hosts(self, pid: int, path: str) -> None:
        if self.hosts_file is None:
            return
        try:
            table = self.hosts_file(pid, path)
        except Exception:  # a host callback must never break parsing
            return
        for addr, name in table.items():
            self.hosts_names[addr] = name

    # --- paths --------------------------------------------------------------

    def base_dir(self, c: Call, dirfd: str | None) -> str:
        """The directory a relative path of call ``c`` is relative to (dirfd or cwd)."""
        proc = c.proc
        if dirfd is None:
            return proc.cwd
        fd = parse_fd(dirfd)
        if fd is None:
            return proc.cwd
        path = ann_path(fd.ann)
        if fd.num is None:  # AT_FDCWD: -yy shows the kernel's idea of the cwd; believe it
            if path is not None:
                proc.cwd = path
            return proc.cwd
        if path is not None:
            proc.fds[fd.num] = path
            return path
        return proc.fds.get(fd.num, proc.cwd)

    def resolve(self, c: Call, raw: str, dirfd: str | None = None) -> str:
        if self.overlays.roots:
            below = self.below(c, dirfd, raw)
            if below is not None:
                return below
        base = self.base_dir(c, dirfd)
        return resolve(raw, base, c.pid, c.tid, self, self.realpath_dir)

    def below(self, c: Call, dirfd: str | None, raw: str) -> str | None:
        """``raw`` relative to the descriptor of a detached mount (which ``-yy`` names ``/``: the
        mount's own root), or through it (``/proc/self/fd/N/...``), as ``spyglass.capture.overlays``
        places it; else None."""
        if not self.overlays.roots:
            return None
        if raw[:1] == "/":  # through the descriptor: /proc/self/fd/N/...
            return self.overlays.through_fd(c.proc.pid, raw) if raw.startswith(("/proc/", "/dev/fd/")) else None
        if dirfd is None:
            return None
        fd = parse_fd(dirfd)
        if fd is None or fd.num is None or ann_path(fd.ann) not in (None, "/"):
            return None
        return self.overlays.below(c.proc.pid, fd.num, raw)

    def fd_arg_path(self, c: Call, token: str) -> str | None:
        """The path of an fd argument from its annotation (remembered for /proc/self/fd/N)."""
        fd = parse_fd(token)
        if fd is None:
            return None
        path = ann_path(fd.ann)
        if fd.num is not None:
            if path is not None:
                c.proc.fds[fd.num] = path
            else:
                path = c.proc.fds.get(fd.num)
        return path

    # --- events -------------------------------------------------------------

    def event(self, c: Call, type_: str, ok: bool | None = None, **fields: Any) -> Event:
        return Event(
            type=type_,
            ts=c.ts,
            pid=c.pid,
            tid=c.tid if c.tid != c.pid else None,
            syscall=c.name,
            ok=c.ok if ok is None else ok,
            errno=c.err,
            **fields,
        )


def live_parent(procs: dict[int, Proc], tid: int) -> tuple[int, bool] | None:
    """For a task whose clone line strace never showed: its thread group leader (a thread,
    True) or parent (a process, False) from /proc, when that is a traced process we know."""
    try:
        with open(f"/proc/{tid}/status", encoding="utf-8", errors="replace") as f:
            text = f.read(4096)
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        tgid, ppid = int(fields.get("Tgid", "0")), int(fields.get("PPid", "0"))
    except ValueError:
        return None
    if tgid != tid and tgid in procs and procs[tgid].alive:
        return tgid, True
    if tgid == tid and ppid in procs and procs[ppid].alive:
        return ppid, False
    return None
