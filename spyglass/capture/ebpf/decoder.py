"""eBPF records -> events, in the strace backend's schema (no I/O but an optional realpath hook).

The decoder keeps the process table of the followed tree (from the fork,
exec and exit records), resolves relative paths against the directory the
kernel walked for them, names the peers of sockets, and learns DNS answers
from UDP payloads.  It never raises on a bad record: it counts it.  Each
system call's record is built by its handler in ``syscall_events`` (the
risky interfaces' in ``sensitive``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import msgspec

from spyglass.capture.ebpf import records as R
from spyglass.capture.ebpf.syscall_events import HANDLERS as _BY_NR
from spyglass.capture.ebpf.syscalls import BY_NR, CLONE_NAMES, EXEC_NAMES
from spyglass.capture.fields import to_text
from spyglass.capture.ident import Identities
from spyglass.capture.overlays import Overlays
from spyglass.capture.strace.host import realpath_dir
from spyglass.capture.strace.paths import join, normalize, split_dir
from spyglass.events.schema import Event

#: ``realpath(pid, path) -> path`` with symlinks resolved as ``pid`` sees them
Realpath = Callable[[int, str], str]
#: ``hosts_file(pid, path) -> {address: name}`` as ``pid`` sees the file
HostsFile = Callable[[int, str], dict[str, str]]
#: ``pgid_of(pid) -> process group`` of a live process, or None (for ``kill(0, ...)``)
PgidOf = Callable[[int], "int | None"]
#: ``fd_link(pid, fd) -> what the descriptor names`` while the process lives, or None
FdLink = Callable[[int, int], "str | None"]


#: a path through one of the caller's descriptors, as the program recognises it (its ``fd_in_path``):
#: ``/dev/fd/N``, ``/proc/self/fd/N``, ``/proc/thread-self/fd/N``, ``/proc/PID/fd/N``,
#: ``/proc/(self|PID)/task/TID/fd/N``, each ``/`` possibly repeated or with ``.`` components, then ``/`` or
#: the end (the program checks that PID and TID are the caller's; a name it walked is one of these)
_S = r"(?:/|\./)*"
_THROUGH_FD = re.compile(
    rf"/{_S}(?:dev/{_S}|proc/{_S}(?:self|thread-self|[1-9]\d{{0,6}})/{_S}(?:task/{_S}[1-9]\d{{0,6}}/{_S})?)"
    rf"fd/{_S}(?:0|[1-9]\d{{0,6}})(?=/|$)"
)


class ProcInfo(msgspec.Struct):
    pid: int
    ppid: int | None
    cwd: str = "/"
    argv: list[str] | None = None
    exe: str | None = None
    alive: bool = True
    fds: dict[int, str] = msgspec.field(default_factory=dict)


class RecordDecoder:
    def __init__(
        self, boot_offset: int = 0, realpath: Realpath | None = None, hosts_file: HostsFile | None = None,
        pgid_of: PgidOf | None = None, fd_link: FdLink | None = None, protected: Identities | None = None,
    ) -> None:
        self.boot_offset = boot_offset  # epoch ns - boottime ns
        self.realpath = realpath
        self.hosts_file = hosts_file
        self.pgid_of = pgid_of
        self.fd_link = fd_link
        self.protected = protected  # protected files by device and inode (spyglass.capture.ident)
        self.hosts_names: dict[str, str] = {}
        self.procs: dict[int, ProcInfo] = {}
        self.seen: set[int] = set()
        self.root_pid: int | None = None
        self.root_exited = False
        self.root_exit_code: int | None = None
        self.root_signal: str | None = None
        self.records = 0
        self.unparsed = 0
        self.dns_names: dict[str, str] = {}
        self._uring: set[tuple[int, int]] = set()
        self.overlays = Overlays()  # overlay mounts of the run: files below them get their own path
        #: pid -> the root it chrooted to: the kernel's walks stop at a process's root and its absolute
        #: paths are below it, so its paths are given that root in front (inherited at a fork)
        self.chroots: dict[int, str] = {}

    # --- public -----------------------------------------------------------------

    def add_root(self, pid: int, cwd: str, uid: int, gid: int, ts: int) -> Event:
        """The root process, born before the program followed it: its ``process.start``."""
        self.root_pid = pid
        self.procs[pid] = ProcInfo(pid, None, cwd)
        self.seen.add(pid)
        cwd_t, rb = to_text(cwd, "process.working_directory", None)
        return Event(type="process.start", ts=ts, pid=pid, cwd=cwd_t, uid=uid, gid=gid, raw_bytes=rb)

    def feed(self, data: bytes) -> list[Event]:
        self.records += 1
        try:
            rec = R.parse(data)
            ev = self._decode(rec)
        except Exception:  # a bad record must never stop a capture
            self.unparsed += 1
            return []
        if ev is None:
            return []
        if self.overlays:
            self.overlays.apply((ev,))
        return [ev]

    def feed_many(self, batch: list[bytes], out: list[Event]) -> None:
        """``feed`` for each record of ``batch`` in turn, the events appended to ``out``."""
        parse, decode, append = R.parse, self._decode, out.append
        mounts = self.overlays.mounts  # an event below an overlay mounted when it came (not one made later)
        for data in batch:
            self.records += 1
            try:
                ev = decode(parse(data))
            except Exception:  # a bad record must never stop a capture
                self.unparsed += 1
                continue
            if ev is not None:
                if mounts:
                    self.overlays.apply((ev,))
                append(ev)

    def live(self) -> list[ProcInfo]:
        return [p for p in self.procs.values() if p.alive]

    # --- records ----------------------------------------------------------------

    def _decode(self, rec: R.Record) -> Event | None:
        if rec.kind == R.REC_SYS:
            handler = _BY_NR.get(rec.nr)
            if handler is None:
                self.unparsed += 1
                return None
            return handler(self, rec)
        if rec.kind == R.REC_FORK:
            return self._fork(rec)
        if rec.kind == R.REC_EXEC:
            return self._exec(rec)
        if rec.kind == R.REC_EXIT:
            return self._exit(rec)
        if rec.kind == R.REC_URING:
            return self._uring_op(rec)
        self.unparsed += 1
        return None

    def _ts(self, rec: R.Record) -> int:
        return rec.ts + self.boot_offset

    def _proc(self, pid: int) -> ProcInfo:
        """The process's entry; a transient one for a process not (or no longer) in the table."""
        p = self.procs.get(pid)
        return p if p is not None else ProcInfo(pid, None, alive=False)

    def _fork(self, rec: R.Record) -> Event:
        walked = R.walk(rec.blobs[3])
        if self.chroots:  # the parent's root, if it chrooted (an exited process's pid may be reused)
            root = self.chroots.get(rec.ppid)
            if root is not None:
                self.chroots[rec.pid] = root
                walked = self._host(rec.pid, walked)
            else:
                self.chroots.pop(rec.pid, None)
        cwd = walked or self._proc(rec.ppid).cwd
        parent = self.procs.get(rec.ppid)
        self.procs[rec.pid] = ProcInfo(rec.pid, rec.ppid, cwd, parent.argv if parent else None)
        if self.overlays.by_fd:
            self.overlays.forked(rec.ppid, rec.pid)
        self.seen.add(rec.pid)
        cwd_t, rb = to_text(cwd, "process.working_directory", None)
        return Event(
            type="process.start", ts=self._ts(rec), pid=rec.pid, ppid=rec.ppid,
            syscall=CLONE_NAMES.get(rec.nr, "clone"), cwd=cwd_t, uid=rec.euid, gid=rec.egid, raw_bytes=rb,
        )  # fmt: skip

    def _exec(self, rec: R.Record) -> Event:
        proc = self.procs.get(rec.pid)
        if proc is None:  # first seen at its exec (a record lost, or a fixture without the fork)
            proc = self.procs[rec.pid] = ProcInfo(rec.pid, None)
            self.seen.add(rec.pid)
        chrooted = bool(self.chroots) and rec.pid in self.chroots  # its names are below its root
        cwd_walk, walked = R.walk(rec.blobs[3]), R.walk(rec.blobs[2])
        typed = R.cstr(rec.blobs[0]) or ""
        if chrooted:
            cwd_walk, walked = self._host(rec.pid, cwd_walk), self._host(rec.pid, walked)
            if typed[:1] == "/":
                typed = self._host(rec.pid, typed) or typed
        cwd = cwd_walk or proc.cwd
        proc.cwd = cwd
        typed = normalize(join(cwd, typed))
        script = bool(rec.args[0])
        raw: str | None = None
        if typed.startswith(("/proc/", "/dev/fd/")) and walked:
            exe, raw = walked, typed  # run through a descriptor: the path as typed stays (a rule names it)
            if exe.startswith("/memfd:"):
                exe += " (deleted)"
        elif not script and walked:
            exe = walked  # the file the kernel runs, symlinks resolved
            if exe != typed:
                raw = typed
        else:
            exe = typed if chrooted else self._real(rec.pid, typed)
            if exe != typed:
                raw = typed
        argv = R.argv(rec.blobs[1])
        proc.argv, proc.exe = argv, exe
        rb: dict[str, str] | None = None
        exe_t, rb = to_text(exe, "process.executable.path", rb)
        raw_t: str | None = None
        if raw is not None:
            raw_t, rb = to_text(raw, "file.raw_path", rb)
        cwd_t, rb = to_text(cwd, "process.working_directory", rb)
        args_t: list[str] = []
        for i, a in enumerate(argv):
            t, rb = to_text(a, f"process.command_args[{i}]", rb)
            args_t.append(t)
        return Event(
            type="process.exec", ts=self._ts(rec), pid=rec.pid, tid=rec.ppid if rec.ppid != rec.pid else None,
            syscall=EXEC_NAMES.get(rec.nr, "execve"), exe=exe_t, raw_path=raw_t, argv=args_t, cwd=cwd_t,
            uid=rec.euid, ruid=rec.uid, gid=rec.egid, rgid=rec.gid, raw_bytes=rb,
        )  # fmt: skip

    def _real(self, pid: int, path: str) -> str:
        if self.realpath is None:
            return path
        try:
            return self.realpath(pid, path)
        except Exception:
            return path

    def _exit(self, rec: R.Record) -> Event:
        code = rec.ret & 0xFFFF
        sig_num = code & 0x7F
        exit_code: int | None = None
        sig: str | None = None
        if sig_num:
            sig = R.signal_name(sig_num) or f"SIG{sig_num}"
        else:
            exit_code = (code >> 8) & 0xFF
        proc = self.procs.pop(rec.pid, None)
        if proc is not None:
            proc.alive = False
        if rec.pid == self.root_pid:
            self.root_exited = True
            self.root_exit_code, self.root_signal = exit_code, sig
        return Event(
            type="process.exit", ts=self._ts(rec), pid=rec.pid, syscall="exit_group" if sig is None else None,
            exit_code=exit_code, signal=sig, detail="core dumped" if code & 0x80 and sig else None,
        )  # fmt: skip

    def _uring_op(self, rec: R.Record) -> Event | None:
        key = (rec.pid, rec.args[0])
        if key in self._uring:  # one event per process and opcode
            return None
        self._uring.add(key)
        return Event(
            type="sys.sensitive", ts=self._ts(rec), pid=rec.pid, tid=rec.tid if rec.tid != rec.pid else None,
            syscall="io_uring_enter", detail=f"io_uring {R.ioring_op(rec.args[0])}",
        )  # fmt: skip

    # --- what the system call handlers share (spyglass.capture.ebpf.syscall_events, .sensitive) ------

    def _event(self, rec: R.Record, type_: str, ok: bool | None = None, **fields: Any) -> Event:
        name = BY_NR[rec.nr].name
        failed = rec.ret < 0
        return Event(
            type=type_, ts=self._ts(rec), pid=rec.pid, tid=rec.tid if rec.tid != rec.pid else None, syscall=name,
            ok=(not failed) if ok is None else ok, errno=R.errno_name(rec.ret) if failed else None, **fields,
        )  # fmt: skip

    def _path(self, rec: R.Record, which: int) -> tuple[str, str] | None:
        """(absolute path, raw argument) of path a (0) or b (1)."""
        raw = R.cstr(rec.blobs[which])
        if raw is None:
            return None
        seen_from_root = True  # named as the process sees it (a chroot's root in front of that below)
        if raw.startswith("/"):
            full = raw
            if self.overlays.roots and raw.startswith(("/proc/", "/dev/fd/")):  # through a detached mount's fd?
                below = self.overlays.through_fd(rec.pid, normalize(raw))
                if below is not None:
                    return below, raw
            # /dev/fd/N/NAME: the program walked descriptor N's file when the call was made (the
            # caller may be gone, or N turned elsewhere, by the time the event is judged)
            walked = R.walk(rec.blobs[2 + which])
            m = _THROUGH_FD.match(raw) if walked else None
            if walked and m is not None:
                full = walked + raw[m.end():]
        else:
            base = R.walk(rec.blobs[2 + which])
            if not base and self.overlays.roots:  # no name: perhaps a detached mount's descriptor
                desc = BY_NR[rec.nr]
                at = desc.dir_a if which == 0 else desc.dir_b
                below = self.overlays.below(rec.pid, R.s32(rec.args[at]), raw) if 0 <= at <= 5 else None
                if below is not None:
                    return below, raw
            if not base:
                base, seen_from_root = self._proc(rec.pid).cwd, False  # the table's cwd is the host's name
            full = join(base, raw)
        if ".." in raw.split("/") and not full.startswith("/proc/"):
            # ``link/..`` is the parent of the link's target, not the link's directory: folded by
            # name, ``l/../x`` with ``l`` a symlink into the store would name a file beside ``l``
            head, name = split_dir(full)
            head = realpath_dir(rec.pid, head)
            full = join(head, name) if name else head
        if self.chroots and seen_from_root:
            full = self._host(rec.pid, normalize(full)) or full
        return normalize(full), raw

    def _fd_path(self, rec: R.Record) -> str | None:
        return self._host(rec.pid, R.walk(rec.blobs[2])) or self._proc(rec.pid).fds.get(R.s32(rec.args[0]))

    def _host(self, pid: int, path: str | None) -> str | None:
        """``path`` as the process sees it -> as the host names it (its chroot in front)."""
        root = self.chroots.get(pid) if self.chroots else None
        if root is None or not path:
            return path
        return root if path == "/" else root + path

    def _sensitive(self, rec: R.Record, detail: str, target: int | None = None, **fields: Any) -> Event:
        text, raw = to_text(detail, "detail", fields.pop("raw_bytes", None))
        return self._event(rec, "sys.sensitive", detail=text, target_pid=target, raw_bytes=raw, **fields)
