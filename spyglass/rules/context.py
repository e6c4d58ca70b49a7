"""Values of derived fields for the event being evaluated, and what the run did so far.

:class:`FieldContext` answers the derived fields of :data:`spyglass.rules.fields.FIELDS`
for the event it is bound to (``fx.ev``).  What depends on the process tree
(ancestors, the branch of a lineage) is cached per pid and dropped whenever a
process event changes the tree (``procs_changed``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from spyglass.events import Event
from spyglass.events.proctree import ProcessTable
from spyglass.policy.hosts import HostMatcher, parse_ip
from spyglass.policy.paths import DirSet
from spyglass.rules.fields import parse_mode

_METADATA_ADDRS = frozenset({"169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200"})
_METADATA_NAMES = frozenset({"metadata.google.internal", "metadata", "instance-data"})
_NOT_INET = frozenset({"unix", "af_unix", "netlink", "af_netlink"})
_WRITE_TYPES = frozenset({"file.create", "file.write", "file.mkdir", "file.truncate"})
_LINK_TYPES = frozenset({"file.link", "file.symlink"})
_CACHE_MAX = 200_000
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


class RunState:
    """What the rules remember of the run so far (bounded)."""

    MAX_PATHS = 1_000_000
    MAX_DNS = 100_000

    MAX_COPIES = 200_000

    def __init__(self) -> None:
        self.written: set[str] = set()
        self.dns: dict[str, str] = {}  # address -> name
        #: new path -> the path it was copied, renamed or linked from (the copy event chain)
        self.origin: dict[str, str] = {}
        #: a pre-existing path -> a file the run wrote from it (a transformed copy)
        self.copied: dict[str, str] = {}
        #: files that hold a copy of a secret (a copy of a secret is a secret)
        self.tainted: set[str] = set()
        #: pid -> the last files it opened for reading (a copy's sources; the newest last)
        self.recent: dict[int, list[str]] = {}
        #: pid -> files its shell opened for it before the exec (``tool > out``), and reads left
        self.redirect: dict[int, tuple[list[str], int]] = {}
        #: pid -> files it created since its exec
        self.created_by: dict[int, list[str]] = {}
        self.read_secret: set[int] = set()
        self.deleted: set[str] = set()
        #: pid -> the file it created last, until it reads or execs (a redirection about to be inherited)
        self.pending_out: dict[int, str] = {}

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

    def note_read(self, ev: Event, secret: bool) -> None:
        """A successful read (called by the engine, which knows what is secret)."""
        path = ev.path
        if not path or _NOT_SOURCE.search(path) or (ev.flags and "O_DIRECTORY" in ev.flags):
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
        if new == old or len(self.origin) > self.MAX_COPIES:
            return
        self.origin[new] = old
        if "/.git/" not in new:  # git storing a file in its object store is not a replacement of it
            self.copied.setdefault(old, new)
        if taint:
            self.tainted.add(new)

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
                self.written.discard(ev.path)
            if ev.target:
                self._add(ev.target)
                if ev.path:
                    self._derive(ev.target, ev.path, ev.path in self.tainted)
        elif t == "file.delete":
            if ev.path:
                self.written.discard(ev.path)
                if len(self.deleted) < self.MAX_PATHS:
                    self.deleted.add(ev.path)
        elif t == "net.dns" and ev.dns_answers and ev.dns_name:
            if len(self.dns) > self.MAX_DNS:
                self.dns.clear()
            for a in ev.dns_answers:
                self.dns[a] = ev.dns_name.rstrip(".")
        elif t == "net.connect" and ev.domain and ev.address:
            self.dns.setdefault(ev.address, ev.domain)

    def _add(self, path: str) -> None:
        if len(self.written) < self.MAX_PATHS:
            self.written.add(path)

    def root_of(self, path: str) -> str:
        """Where ``path`` came from, following copies, renames and links back (bounded)."""
        for _ in range(_MAX_CHAIN):
            prev = self.origin.get(path)
            if prev is None:
                break
            path = prev
        return path


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


class FieldContext:
    """Derived field values for the event being evaluated (set ``fx.ev`` before use)."""

    def __init__(
        self,
        *,
        procs: ProcessTable,
        state: RunState,
        workspace: DirSet,
        temp: DirSet,
        home: str | None,
        trusted: DirSet,
        trusted_re: re.Pattern[str],
        secrets_re: re.Pattern[str],
        secret_exceptions_re: re.Pattern[str],
        honeytokens_re: re.Pattern[str],
        hosts: HostMatcher,
        monitor_pids: frozenset[int] = frozenset(),
        live_monitors: Sequence[int] = (),
        run_ctx: Any = None,
        launch_programs: frozenset[str] = frozenset(),
        launch_interpreters: frozenset[str] = frozenset(),
        launch_trees: DirSet | None = None,
        agent_state_re: re.Pattern[str] | None = None,
        resolvers: frozenset[str] = frozenset(),
    ) -> None:
        self.procs = procs
        self.state = state
        self.workspace = workspace
        self.temp = temp
        self.home = DirSet([home] if home else [])
        home_prefix = (home.rstrip("/") + "/") if home else None
        self.home_temp = DirSet(d for d in temp.exact if home_prefix and d.startswith(home_prefix))
        self.trusted = trusted
        self.trusted_re = trusted_re
        self.secrets_re = secrets_re
        self.secret_exceptions_re = secret_exceptions_re
        self.honeytokens_re = honeytokens_re
        self.hosts = hosts
        self.monitor_pids = monitor_pids
        #: the run context's list: the tracer's pid joins it once capture runs
        self.live_monitors = live_monitors
        #: the run context (``workspace_before``: paths of the before-manifest, set by the evidence sink)
        self.run_ctx = run_ctx
        self.launch_programs = launch_programs
        self.launch_interpreters = launch_interpreters
        self.launch_trees = launch_trees if launch_trees is not None else DirSet([])
        self.agent_state_re = agent_state_re
        self.resolvers = resolvers
        self.ev: Event = Event(type="none")
        self._secret_cache: dict[str, bool] = {}
        #: pid -> (ancestors' executables, names, command lines); valid until the tree changes
        self._anc: dict[int, tuple[list[str], list[str], list[str]]] = {}
        #: per-pid values other components derive from the tree's shape (parents, ancestors)
        self.per_pid: dict[tuple[str, int], Any] = {}

    def procs_changed(self, structure: bool) -> None:
        """A process event: executables and command lines of ancestors may have changed;
        with ``structure`` also who descends from whom (a process started or appeared)."""
        if self._anc:
            self._anc.clear()
        if structure and self.per_pid:
            self.per_pid.clear()

    # -- the event's process -------------------------------------------------------
    def exe(self) -> str | None:
        ev = self.ev
        if ev.exe is not None:
            return ev.exe
        p = self.procs.procs.get(ev.pid)
        return p.exe if p is not None else None

    def name(self) -> str | None:
        exe = self.exe()
        return _base(exe) if exe else None

    def argv(self) -> list[str] | None:
        ev = self.ev
        if ev.argv is not None:
            return ev.argv
        p = self.procs.procs.get(ev.pid)
        return p.argv if p is not None else None

    def cmdline(self) -> str | None:
        argv = self.argv()
        return " ".join(argv) if argv else self.exe()

    def cwd(self) -> str | None:
        ev = self.ev
        if ev.cwd is not None:
            return ev.cwd
        p = self.procs.procs.get(ev.pid)
        return p.cwd if p is not None else None

    def is_root(self) -> bool:
        return self.ev.pid == self.procs.root_pid

    def exe_trusted(self) -> bool:
        exe = self.exe()
        if not exe:
            return False
        if self.launched_exe(exe) or (exe in self.launch_interpreters and exe not in self.state.written):
            return True
        return exe in self.trusted or self.trusted_re.fullmatch(exe) is not None

    def launched_exe(self, exe: str | None = None) -> bool:
        """The executable is the program the user launched or lies in its install tree (and was
        not written by this run).  Its interpreter is trusted for exec but is not the agent."""
        exe = exe if exe is not None else self.exe()
        if not exe or exe in self.state.written:
            return False
        return exe in self.launch_programs or exe in self.launch_trees

    def identity(self) -> str | None:
        """The name of what the executable really is: a copied, renamed or linked program keeps
        the name of its source; a program the run wrote from nothing known has none ("")."""
        exe = self.exe()
        if not exe:
            return None
        root = self.state.root_of(exe)
        if root == exe and exe in self.state.written:
            return ""
        return _base(root)

    def is_agent_state(self, path: str | None) -> bool:
        return bool(path) and self.agent_state_re is not None and self.agent_state_re.fullmatch(path or "") is not None

    def is_dns(self) -> bool:
        """A name lookup: port 53 to a resolver the system is configured with (any port-53
        peer when the run recorded no resolvers)."""
        ev = self.ev
        if ev.port != 53:
            return False
        if not self.resolvers or ev.type == "net.dns":
            return True
        return ev.address in self.resolvers

    def exe_created(self) -> bool:
        exe = self.exe()
        return exe is not None and exe in self.state.written

    def exe_in_ws(self) -> bool:
        return self.exe() in self.workspace

    def parent_pid(self) -> int | None:
        p = self.procs.procs.get(self.ev.pid)
        return p.ppid if p is not None else self.ev.ppid

    def _parent_attr(self, attr: str) -> Any:
        table = self.procs.procs
        p = table.get(self.ev.pid)
        parent = table.get(p.ppid) if p is not None and p.ppid is not None else None
        return getattr(parent, attr) if parent is not None else None

    def parent_exe(self) -> str | None:
        exe: str | None = self._parent_attr("exe")
        return exe

    def parent_name(self) -> str | None:
        exe = self.parent_exe()
        return _base(exe) if exe else None

    def parent_cmdline(self) -> str | None:
        line: str | None = self._parent_attr("command_line")
        return line

    def _ancestors(self) -> tuple[list[str], list[str], list[str]]:
        pid = self.ev.pid
        hit = self._anc.get(pid)
        if hit is None:
            lin = self.procs.lineage(pid)[1:]
            exes = [p.exe for p in lin if p.exe]
            hit = (exes, [_base(e) for e in exes], [p.command_line for p in lin])
            if len(self._anc) >= _CACHE_MAX:
                self._anc.clear()
            self._anc[pid] = hit
        return hit

    def anc_exe(self) -> list[str]:
        return self._ancestors()[0]

    def anc_name(self) -> list[str]:
        return self._ancestors()[1]

    def anc_cmdline(self) -> list[str]:
        return self._ancestors()[2]

    # -- files -----------------------------------------------------------------------
    def file_name(self) -> str | None:
        p = self.ev.path
        return _base(p) if p else None

    def file_ext(self) -> str | None:
        n = self.file_name()
        if not n or "." not in n.lstrip("."):
            return None
        return n.rsplit(".", 1)[-1]

    def file_dir(self) -> str | None:
        p = self.ev.path
        return (p.rsplit("/", 1)[0] or "/") if p else None

    def target_name(self) -> str | None:
        p = self.ev.target
        return _base(p) if p else None

    def in_ws(self, path: str | None) -> bool:
        return path in self.workspace

    def in_temp(self, path: str | None) -> bool:
        # under HOME only the home cache/state dirs count, even when HOME itself lives in /tmp
        if path in self.home:
            return path in self.home_temp
        return path in self.temp

    def in_home(self, path: str | None) -> bool:
        return path in self.home

    def writable(self, path: str | None) -> bool:
        return path in self.workspace or self.in_temp(path)

    def is_secret(self, path: str | None) -> bool:
        if not path:
            return False
        hit = self._secret_cache.get(path)
        if hit is None:
            hit = self.secrets_re.fullmatch(path) is not None and self.secret_exceptions_re.fullmatch(path) is None
            if len(self._secret_cache) > _CACHE_MAX:
                self._secret_cache.clear()
            self._secret_cache[path] = hit
        return hit

    def is_honeytoken(self, path: str | None) -> bool:
        return path is not None and path != "" and self.honeytokens_re.fullmatch(path) is not None

    def proc_other(self) -> bool:
        p = self.ev.path
        if not p or not p.startswith("/proc/"):
            return False
        head = p[6:].split("/", 1)[0]
        if not head.isdigit():
            return False
        n = int(head)
        return n != self.ev.pid and n != self.ev.tid

    def contains_ws(self, path: str | None) -> bool:
        if not path:
            return False
        path = path.rstrip("/") or "/"
        prefix = path if path.endswith("/") else path + "/"
        return any(w == path or w.startswith(prefix) for w in self.workspace.exact)

    def created(self, path: str | None) -> bool:
        return path is not None and path in self.state.written

    def secret_copy(self, path: str | None) -> bool:
        return path is not None and path in self.state.tainted

    def pre_existing(self, path: str | None) -> bool:
        """The file existed before the run: in the workspace, it is in the before-manifest
        (not ignored by git, not a build or cache directory); elsewhere, the run did not
        create it and it is not a temp, cache or pseudo file."""
        if not path:
            return False
        if path in self.workspace:
            before = getattr(self.run_ctx, "workspace_before", None)
            if before is None:
                return path not in self.state.written and path not in self.state.origin
            return path in before
        if path.startswith(("/proc/", "/dev/", "/sys/", "/run/")) or self.in_temp(path):
            return False
        return path not in self.state.written and path not in self.state.origin

    def user_data(self, path: str | None) -> bool:
        """A pre-existing file in a data format (database, document, mail, calendar, archive ...)."""
        if not path or not self.pre_existing(path):
            return False
        name = _base(path)
        ext = name.rsplit(".", 1)[-1].lower() if "." in name.lstrip(".") else ""
        return ext in DATA_EXTENSIONS

    def has_copy(self, path: str | None) -> bool:
        """The run wrote a copy (or transformed copy) of this file before this event."""
        return path is not None and path in self.state.copied

    def is_dir_open(self) -> bool:
        f = self.ev.flags
        return f is not None and "O_DIRECTORY" in f

    def mode_has(self, bits: int) -> bool:
        m = parse_mode(self.ev.mode)
        return m is not None and bool(m & bits)

    # -- network -----------------------------------------------------------------------
    def domain(self) -> str | None:
        ev = self.ev
        if ev.domain:
            return ev.domain
        return self.state.dns.get(ev.address) if ev.address else None

    def host(self) -> str | None:
        return self.domain() or self.ev.address

    def allowed(self) -> bool:
        ev = self.ev
        return self.hosts.allowed(self.domain(), ev.address, ev.port)

    def denied(self) -> bool:
        ev = self.ev
        return self.hosts.denied(self.domain(), ev.address, ev.port)

    def is_inet(self) -> bool:
        ev = self.ev
        if ev.net_type is not None and ev.net_type.lower() in _NOT_INET:
            return False
        return ev.address is not None and parse_ip(ev.address) is not None

    def ip_literal(self) -> bool:
        return self.is_inet() and not self.domain()

    def ip_flag(self, flag: str) -> bool:
        a = self.ev.address
        ip = parse_ip(a) if a else None
        if ip is None:
            return False
        if flag == "is_private":
            return bool(ip.is_private or ip.is_loopback or ip.is_link_local)
        return bool(getattr(ip, flag))

    def is_metadata(self) -> bool:
        ev = self.ev
        if ev.address and ev.address in _METADATA_ADDRS:
            return True
        d = self.domain()
        return d is not None and d.lower().rstrip(".") in _METADATA_NAMES

    # -- targets ---------------------------------------------------------------------
    def target_in_run(self) -> bool:
        t = self.ev.target_pid
        return t is not None and t in self.procs.procs

    def target_is_monitor(self) -> bool:
        """spyglass itself, or a pid of the monitor (the tracer and its helpers).

        The run context's ``monitor_pids`` is read at the time of the event: the
        tracer's pid joins it once the capture has started."""
        t = self.ev.target_pid
        if t is None:
            return False
        return t in self.monitor_pids or t in self.live_monitors

    def target_exe(self) -> str | None:
        t = self.ev.target_pid
        p = self.procs.procs.get(t) if t is not None else None
        return p.exe if p is not None else None

    def target_cmdline(self) -> str | None:
        t = self.ev.target_pid
        p = self.procs.procs.get(t) if t is not None else None
        return p.command_line if p is not None else None
