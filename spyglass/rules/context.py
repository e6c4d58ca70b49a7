"""Values of derived fields for the event being evaluated, and what the run did so far.

:class:`FieldContext` answers the derived fields of :data:`spyglass.rules.fields.FIELDS`
for the event it is bound to (``fx.ev``).  What depends on the process tree
(ancestors, the branch of a lineage) is cached per pid and dropped whenever a
process event changes the tree (``procs_changed``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from spyglass.events import Event
from spyglass.events.proctree import ProcessTable
from spyglass.policy.hosts import HostMatcher, parse_ip
from spyglass.policy.paths import DirSet, GlobMatcher
from spyglass.rules.fields import parse_mode
from spyglass.rules.runstate import DATA_EXTENSIONS, RunState, drop_older_half

__all__ = ["DATA_EXTENSIONS", "FieldContext", "RunState"]

_METADATA_ADDRS = frozenset({"169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200"})
_METADATA_NAMES = frozenset({"metadata.google.internal", "metadata", "instance-data"})
_NOT_INET = frozenset({"unix", "af_unix", "netlink", "af_netlink"})
_CACHE_MAX = 200_000
#: paths whose secret verdict is remembered (a full cache drops its older half)
SECRET_CACHE_MAX = 32_768
#: what /proc/<pid>/ gives into a process: memory, descriptors, environment, its file system view
_PROC_REACH = frozenset({"mem", "environ", "fd", "map_files", "root", "cwd", "pagemap"})


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
        trusted_re: GlobMatcher,
        secrets_re: GlobMatcher,
        secret_exceptions_re: GlobMatcher,
        honeytokens_re: GlobMatcher,
        hosts: HostMatcher,
        monitor_pids: frozenset[int] = frozenset(),
        live_monitors: Sequence[int] = (),
        live_helpers: Sequence[int] = (),
        monitor_pgids: Sequence[int] = (),
        run_ctx: Any = None,
        launch_programs: frozenset[str] = frozenset(),
        launch_interpreters: frozenset[str] = frozenset(),
        launch_trees: DirSet | None = None,
        agent_state_re: GlobMatcher | None = None,
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
        #: spyglass's sandbox helpers as the run names them (the sandbox's list, kept current)
        self.live_helpers = live_helpers
        #: process groups of spyglass and its tracer (the run's list: the tracer's joins it)
        self.monitor_pgids = monitor_pgids
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

    def facts_version(self) -> int:
        """Grows whenever the run learns a fact during the capture (the tracer's or a helper's pid,
        the tracer's group: lists only ever appended to).  The fast lane notes it with each verdict;
        the engine takes a verdict only if it has not changed since (``FastLane.verdicts``)."""
        return len(self.live_monitors) + len(self.live_helpers) + len(self.monitor_pgids)

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
            if len(self._secret_cache) >= SECRET_CACHE_MAX:
                drop_older_half(self._secret_cache)
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

    def proc_is_monitor(self) -> bool:
        """The open reached into /proc/<pid>/ of spyglass, its tracer or a helper (or one of their
        threads) where memory, descriptors, environment or file system views are: ``mem``,
        ``environ``, ``fd/``, ``map_files/``, ``root/``, ``cwd/``, ``pagemap``.  The typed name
        counts too (strace names the file a ``/proc/N/fd/M`` open reached)."""
        for p in (self.ev.path, self.ev.raw_path):
            if p and p.startswith("/proc/"):
                parts = p[6:].split("/")
                if len(parts) >= 4 and parts[1] == "task":  # /proc/N/task/T/mem
                    parts = parts[2:]
                if len(parts) >= 2 and parts[0].isdigit() and parts[1] in _PROC_REACH and self._monitor(int(parts[0])):
                    return True
        return False

    def _monitor(self, n: int) -> bool:
        if n in self.monitor_pids or n in self.live_monitors:
            return True
        # a thread of a live monitor (spyglass's reader thread): /proc/<tid>/ reaches its process
        return n not in self.procs.procs and any(os.path.exists(f"/proc/{m}/task/{n}") for m in self.live_monitors)

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
        if t < -1:  # a process group: does it hold spyglass or its tracer?
            return any(_int(g) == -t for g in self.monitor_pgids)
        return t in self.monitor_pids or t in self.live_monitors or t in self.live_helpers

    def target_exe(self) -> str | None:
        t = self.ev.target_pid
        p = self.procs.procs.get(t) if t is not None else None
        return p.exe if p is not None else None

    def target_cmdline(self) -> str | None:
        t = self.ev.target_pid
        p = self.procs.procs.get(t) if t is not None else None
        return p.command_line if p is not None else None


def _int(value: object) -> int | None:
    try:
        return int(value)  # type: ignore[call-overload, no-any-return]
    except (TypeError, ValueError):
        return None
