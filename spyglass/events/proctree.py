"""The process table of a run, rebuilt from its events (live or replayed)."""

from __future__ import annotations

import msgspec

from spyglass.events.schema import Event


class ProcInfo(msgspec.Struct):
    """One process of the tree: its parent, executable, argv, cwd and exit."""

    pid: int
    ppid: int | None = None
    exe: str | None = None
    argv: list[str] | None = None
    cwd: str | None = None
    start_ts: int = 0
    exit_ts: int | None = None
    exit_code: int | None = None
    signal: str | None = None
    detached: bool = False
    execs: int = 0
    children: list[int] = msgspec.field(default_factory=list)

    @property
    def command_line(self) -> str:
        if self.argv:
            return " ".join(self.argv)
        return self.exe or f"pid {self.pid}"


class ProcessTable:
    """pid -> ProcInfo, kept current by feeding it every event in order.

    A pid reused within one run starts a new ProcInfo; the old one is kept in
    ``history`` so nothing is forgotten.

    With ``evict`` (the pipeline's table, live and in replays) memory stays
    bounded by the processes alive: a process that exited is dropped once it
    has no child left in the table (at the next process event, so that every sink
    still finds it while its exit event goes round), and its parent with it
    when that one exited too; a process alive keeps its whole ancestry, which
    is what rules ask about.  Reused pids keep no history then.
    """

    __slots__ = ("_exited", "evict", "evicted", "history", "procs", "root_pid")

    def __init__(self, evict: bool = False) -> None:
        self.procs: dict[int, ProcInfo] = {}
        self.root_pid: int | None = None
        self.history: list[ProcInfo] = []
        self.evict = evict
        self.evicted = 0  # processes dropped (``evict``)
        self._exited: list[ProcInfo] = []

    def _drop_exited(self) -> None:
        exited, self._exited = self._exited, []
        procs = self.procs
        for info in exited:
            while info.exit_ts is not None and not info.children and procs.get(info.pid) is info:
                del procs[info.pid]
                self.evicted += 1
                parent = procs.get(info.ppid) if info.ppid is not None else None
                if parent is None:
                    break
                try:
                    parent.children.remove(info.pid)
                except ValueError:
                    break
                info = parent  # an exited parent whose last child went goes too

    def update(self, ev: Event) -> None:
        if self._exited:
            self._drop_exited()
        t = ev.type
        if t == "process.start":
            old = self.procs.get(ev.pid)
            if old is not None and not self.evict:
                self.history.append(old)
            parent = self.procs.get(ev.ppid) if ev.ppid is not None else None
            info = ProcInfo(pid=ev.pid, ppid=ev.ppid, start_ts=ev.ts)
            if parent is not None:
                info.exe, info.argv, info.cwd = parent.exe, parent.argv, parent.cwd
                parent.children.append(ev.pid)
            if ev.cwd is not None:
                info.cwd = ev.cwd
            self.procs[ev.pid] = info
            if self.root_pid is None:
                self.root_pid = ev.pid
        elif t == "process.exec":
            if not ev.ok:
                return
            info = self.get_or_add(ev.pid, ev.ts)
            info.exe, info.argv, info.execs = ev.exe, ev.argv, info.execs + 1
            if ev.cwd is not None:
                info.cwd = ev.cwd
        elif t == "process.exit":
            info = self.get_or_add(ev.pid, ev.ts)
            info.exit_ts, info.exit_code, info.signal = ev.ts, ev.exit_code, ev.signal
            if self.evict:
                self._exited.append(info)
        elif t == "process.detach":
            self.get_or_add(ev.pid, ev.ts).detached = True

    def get_or_add(self, pid: int, ts: int = 0) -> ProcInfo:
        info = self.procs.get(pid)
        if info is None:
            info = ProcInfo(pid=pid, start_ts=ts)
            self.procs[pid] = info
            if self.root_pid is None:
                self.root_pid = pid
        return info

    def get(self, pid: int) -> ProcInfo | None:
        return self.procs.get(pid)

    def lineage(self, pid: int, limit: int = 64) -> list[ProcInfo]:
        """The process and its ancestors, nearest first, up to the run's root."""
        out: list[ProcInfo] = []
        seen: set[int] = set()
        cur = self.procs.get(pid)
        while cur is not None and cur.pid not in seen and len(out) < limit:
            out.append(cur)
            seen.add(cur.pid)
            cur = self.procs.get(cur.ppid) if cur.ppid is not None else None
        return out

    def alive(self) -> list[ProcInfo]:
        return [p for p in self.procs.values() if p.exit_ts is None and not p.detached]
