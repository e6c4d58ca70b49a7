"""eBPF records -> events, in the strace backend's schema (no I/O but an optional realpath hook).

The decoder keeps the process table of the followed tree (from the fork,
exec and exit records), resolves relative paths against the directory the
kernel walked for them, names the peers of sockets, and learns DNS answers
from UDP payloads.  It never raises on a bad record: it counts it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from spyglass.capture.ebpf import records as R
from spyglass.capture.ebpf.sensitive import sensitive_event
from spyglass.capture.ebpf.syscalls import BY_NR, CLONE_NAMES, EXEC_NAMES
from spyglass.capture.fields import group_kill, path_fields, to_text
from spyglass.capture.ident import Identities
from spyglass.capture.strace.dns import learn_answer
from spyglass.capture.strace.paths import join, normalize
from spyglass.events.schema import Event

#: ``realpath(pid, path) -> path`` with symlinks resolved as ``pid`` sees them
Realpath = Callable[[int, str], str]
#: ``hosts_file(pid, path) -> {address: name}`` as ``pid`` sees the file
HostsFile = Callable[[int, str], dict[str, str]]
#: ``pgid_of(pid) -> process group`` of a live process, or None (for ``kill(0, ...)``)
PgidOf = Callable[[int], "int | None"]
#: ``fd_link(pid, fd) -> what the descriptor names`` while the process lives, or None
FdLink = Callable[[int, int], "str | None"]


@dataclass(slots=True)
class ProcInfo:
    pid: int
    ppid: int | None
    cwd: str = "/"
    argv: list[str] | None = None
    exe: str | None = None
    alive: bool = True
    fds: dict[int, str] = field(default_factory=dict)


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
        return [] if ev is None else [ev]

    def feed_many(self, batch: list[bytes], out: list[Event]) -> None:
        """``feed`` for each record of ``batch`` in turn, the events appended to ``out``."""
        parse, decode, append = R.parse, self._decode, out.append
        for data in batch:
            self.records += 1
            try:
                ev = decode(parse(data))
            except Exception:  # a bad record must never stop a capture
                self.unparsed += 1
                continue
            if ev is not None:
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
        cwd = R.walk(rec.blobs[3]) or self._proc(rec.ppid).cwd
        parent = self.procs.get(rec.ppid)
        self.procs[rec.pid] = ProcInfo(rec.pid, rec.ppid, cwd, parent.argv if parent else None)
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
        cwd = R.walk(rec.blobs[3]) or proc.cwd
        proc.cwd = cwd
        typed = normalize(join(cwd, R.cstr(rec.blobs[0]) or ""))
        walked = R.walk(rec.blobs[2])
        script = bool(rec.args[0])
        raw: str | None = None
        if typed.startswith(("/proc/", "/dev/fd/")) and walked:
            exe = walked
            if exe.startswith("/memfd:"):
                exe += " (deleted)"
        elif not script and walked:
            exe = walked  # the file the kernel runs, symlinks resolved
            if exe != typed:
                raw = typed
        else:
            exe = self._real(rec.pid, typed)
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

    # --- system calls -------------------------------------------------------------

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
        if raw.startswith("/"):
            return normalize(raw), raw
        base = R.walk(rec.blobs[2 + which]) or self._proc(rec.pid).cwd
        return normalize(join(base, raw)), raw

    # files

    def _open(self, rec: R.Record) -> Event | None:
        name = BY_NR[rec.nr].name
        if name == "creat":
            flags, md = 0o1101, rec.args[1]
        elif name == "open":
            flags, md = rec.args[1], rec.args[2]
        else:
            flags, md = rec.args[2], rec.args[3]
        text = R.open_flags(flags)
        if flags & 0o10000000:  # O_PATH: no data access
            return None
        if flags & (0o100 | 0o20000000):
            kind = "file.create"
        elif flags & 3 or flags & 0o1000:
            kind = "file.write"
        else:
            kind = "file.read"
        p = self._path(rec, 0)
        if p is None:
            return None
        path, raw = p
        if rec.ret >= 0:
            if self.protected is not None:  # a link or /proc/self/fd name of a protected file: say which
                canon = self.protected.by_kernel_id(rec.f_dev, rec.f_ino)
                if canon is not None:
                    path = canon
            self._proc(rec.pid).fds[rec.ret] = path
            if path == "/etc/hosts" and self.hosts_file is not None:
                try:  # names for later connections, as the process itself resolved them
                    self.hosts_names.update(self.hosts_file(rec.pid, path))
                except Exception:
                    pass
        return self._event(
            rec, kind, flags=text, mode=R.mode(md) if kind == "file.create" else None, **path_fields(path, raw)
        )

    def _one_path(self, rec: R.Record, kind: str, **extra: Any) -> Event | None:
        p = self._path(rec, 0)
        if p is None:
            return None
        return self._event(rec, kind, **path_fields(*p), **extra)

    def _fd_path(self, rec: R.Record) -> str | None:
        return R.walk(rec.blobs[2]) or self._proc(rec.pid).fds.get(R.s32(rec.args[0]))

    def _delete(self, rec: R.Record) -> Event | None:
        flags = R.names(rec.args[2], ((0x200, "AT_REMOVEDIR"),)) if rec.nr == 263 else None
        return self._one_path(rec, "file.delete", flags=flags)

    def _two(self, rec: R.Record) -> Event | None:
        a, b = self._path(rec, 0), self._path(rec, 1)
        if a is None or b is None:
            return None
        name = BY_NR[rec.nr].name
        if name.startswith("rename"):
            flags = R.names(rec.args[4], R.RENAME_FLAGS) if name == "renameat2" else None
            return self._event(rec, "file.rename", flags=flags, **path_fields(a[0], a[1], b[0]))
        # link(old, new): the new name is the path, the old one the target
        return self._event(rec, "file.link", **path_fields(b[0], b[1], a[0]))

    def _symlink(self, rec: R.Record) -> Event | None:
        p = self._path(rec, 0)
        target = R.cstr(rec.blobs[1])
        if p is None or target is None:
            return None
        return self._event(rec, "file.symlink", **path_fields(p[0], p[1], target))

    def _mkdir(self, rec: R.Record) -> Event | None:
        md = rec.args[2] if rec.nr == 258 else rec.args[1]
        return self._one_path(rec, "file.mkdir", mode=R.mode(md))

    def _chmod(self, rec: R.Record) -> Event | None:
        name = BY_NR[rec.nr].name
        if name == "fchmod":
            path = self._fd_path(rec)
            return (
                None if path is None else self._event(rec, "file.chmod", mode=R.mode(rec.args[1]), **path_fields(path))
            )
        md = rec.args[2] if name in ("fchmodat", "fchmodat2") else rec.args[1]
        return self._one_path(rec, "file.chmod", mode=R.mode(md))

    def _chown(self, rec: R.Record) -> Event | None:
        name = BY_NR[rec.nr].name
        i = 2 if name == "fchownat" else 1
        owner, group = _id(rec.args[i]), _id(rec.args[i + 1])
        if name == "fchown":
            path = self._fd_path(rec)
            return (
                None if path is None else self._event(rec, "file.chown", owner=owner, group=group, **path_fields(path))
            )
        return self._one_path(rec, "file.chown", owner=owner, group=group)

    def _truncate(self, rec: R.Record) -> Event | None:
        if rec.nr == 77:
            path = self._fd_path(rec)
            return None if path is None else self._event(rec, "file.truncate", **path_fields(path))
        return self._one_path(rec, "file.truncate")

    def _exec_failed(self, rec: R.Record) -> Event | None:
        p = self._path(rec, 0)
        if p is None:
            return None
        proc = self._proc(rec.pid)
        exe_t, rb = to_text(p[0], "process.executable.path", None)
        cwd_t, rb = to_text(proc.cwd, "process.working_directory", rb)
        return self._event(rec, "process.exec", exe=exe_t, cwd=cwd_t, raw_bytes=rb)

    # network

    def _addr_fields(self, rec: R.Record, a: R.Addr, with_domain: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"net_type": a.family, "port": a.port}
        address = a.address
        if address is not None and a.family == "unix" and address and not address.startswith(("@", "/")):
            address = normalize(join(self._proc(rec.pid).cwd, address))
        if address is not None:
            text, raw = to_text(address, "server.address", None)
            out["address"] = text
            if raw:
                out["raw_bytes"] = raw
            if a.family != "unix" and with_domain:
                out["domain"] = self._domain(address)
        return out

    def _domain(self, address: str | None) -> str | None:
        if not address:
            return None
        name = self.dns_names.get(address) or self.hosts_names.get(address)
        if name is None and address.startswith("::ffff:"):
            name = self.dns_names.get(address[7:]) or self.hosts_names.get(address[7:])
        return name

    def _transport(self, rec: R.Record, a: R.Addr | None) -> str | None:
        t = R.transport(rec)
        if t is None and a is not None and a.family == "unix":
            return "unix"
        return t

    def _connect(self, rec: R.Record) -> Event | None:
        a = R.sockaddr(rec.blobs[1])
        if a is None:
            return None
        ok = rec.ret >= 0 or rec.ret == -115  # EINPROGRESS
        return self._event(rec, "net.connect", ok=ok, transport=self._transport(rec, a), **self._addr_fields(rec, a))

    def _bind(self, rec: R.Record) -> Event | None:
        a = R.sockaddr(rec.blobs[1])
        if a is None:
            return None
        return self._event(rec, "net.bind", transport=self._transport(rec, a), **self._addr_fields(rec, a, False))

    def _listen(self, rec: R.Record) -> Event | None:
        a = R.local(rec)
        return self._event(
            rec, "net.listen", transport=R.transport(rec), net_type=R.net_type(rec),
            address=a.address if a else None, port=a.port if a else None,
        )  # fmt: skip

    def _send(self, rec: R.Record) -> Event | None:
        t = R.transport(rec)
        if t == "netlink":
            return None
        nbytes = rec.ret if rec.ret >= 0 and rec.nr != 307 else None
        a = R.sockaddr(rec.blobs[1])
        if a is None:
            a = R.peer(rec)
        if a is None:
            return self._event(rec, "net.send", transport=t, net_type=R.net_type(rec), nbytes=nbytes)
        return self._event(
            rec, "net.send", transport=self._transport(rec, a), nbytes=nbytes, **self._addr_fields(rec, a)
        )

    def _recv(self, rec: R.Record) -> Event | None:
        resp = learn_answer(rec.blobs[0], self.dns_names)
        if resp is None:
            return None
        src = R.sockaddr(rec.blobs[1]) or R.peer(rec)
        fields = self._addr_fields(rec, src, False) if src is not None else {}
        return self._event(rec, "net.dns", transport="udp", dns_name=resp.name, dns_answers=resp.answers, **fields)

    # credentials and risky interfaces

    def _setid(self, rec: R.Record) -> Event | None:
        name = BY_NR[rec.nr].name
        nargs = 3 if name.startswith("setres") else 2 if name.startswith("setre") else 1
        ids = ", ".join(str(R.s32(a)) for a in rec.args[:nargs])
        detail = f"{name[3:]}={ids}" if name.startswith("setfs") else f"{name}({ids})"
        if name == "capset":
            detail = "capset"
        return self._event(rec, "priv.change", uid=rec.euid, ruid=rec.uid, gid=rec.egid, rgid=rec.gid, detail=detail)

    def _kill(self, rec: R.Record) -> Event | None:
        name = BY_NR[rec.nr].name
        if name == "tgkill":
            group, target, sig = R.s32(rec.args[0]), R.s32(rec.args[1]), rec.args[2]
            if group in self.seen:
                return None
            if group > 0:
                target = group  # the process the thread belongs to
        else:
            target, sig = R.s32(rec.args[0]), rec.args[1]
        signame = R.signal_name(sig) or f"signal {sig}"
        if name == "kill" and (target == 0 or target < -1):
            where, members = group_kill(target, rec.pid, self.pgid_of)
            return self._sensitive(rec, f"{signame} to {where}", members)
        if target == 0 or target < -1 or target in self.seen:
            return None
        return self._sensitive(rec, signame, target)

    def _sensitive(self, rec: R.Record, detail: str, target: int | None = None, **fields: Any) -> Event:
        text, raw = to_text(detail, "detail", fields.pop("raw_bytes", None))
        return self._event(rec, "sys.sensitive", detail=text, target_pid=target, raw_bytes=raw, **fields)

    def _other(self, rec: R.Record) -> Event | None:
        return sensitive_event(self, rec)


def _id(v: int) -> int | None:
    v &= 0xFFFFFFFF
    return None if v == 0xFFFFFFFF else v


_HANDLERS: dict[str, Callable[[RecordDecoder, R.Record], Event | None]] = {
    "open": RecordDecoder._open, "openat": RecordDecoder._open, "openat2": RecordDecoder._open,
    "creat": RecordDecoder._open, "unlink": RecordDecoder._delete, "rmdir": RecordDecoder._delete,
    "unlinkat": RecordDecoder._delete, "rename": RecordDecoder._two, "renameat": RecordDecoder._two,
    "renameat2": RecordDecoder._two, "link": RecordDecoder._two, "linkat": RecordDecoder._two,
    "symlink": RecordDecoder._symlink, "symlinkat": RecordDecoder._symlink, "mkdir": RecordDecoder._mkdir,
    "mkdirat": RecordDecoder._mkdir, "chmod": RecordDecoder._chmod, "fchmod": RecordDecoder._chmod,
    "fchmodat": RecordDecoder._chmod, "fchmodat2": RecordDecoder._chmod, "chown": RecordDecoder._chown,
    "lchown": RecordDecoder._chown, "fchown": RecordDecoder._chown, "fchownat": RecordDecoder._chown,
    "truncate": RecordDecoder._truncate, "ftruncate": RecordDecoder._truncate,
    "execve": RecordDecoder._exec_failed, "execveat": RecordDecoder._exec_failed,
    "connect": RecordDecoder._connect, "bind": RecordDecoder._bind, "listen": RecordDecoder._listen,
    "sendto": RecordDecoder._send, "sendmsg": RecordDecoder._send, "sendmmsg": RecordDecoder._send,
    "recvfrom": RecordDecoder._recv, "recvmsg": RecordDecoder._recv,
    "setuid": RecordDecoder._setid, "setgid": RecordDecoder._setid, "setreuid": RecordDecoder._setid,
    "setregid": RecordDecoder._setid, "setresuid": RecordDecoder._setid, "setresgid": RecordDecoder._setid,
    "setfsuid": RecordDecoder._setid, "setfsgid": RecordDecoder._setid, "capset": RecordDecoder._setid,
    "kill": RecordDecoder._kill, "tkill": RecordDecoder._kill, "tgkill": RecordDecoder._kill,
}  # fmt: skip

for _name in (
    "ptrace", "memfd_create", "io_uring_setup", "mount", "umount2", "unshare", "setns", "bpf", "init_module",
    "finit_module", "open_by_handle_at", "name_to_handle_at", "process_vm_readv", "process_vm_writev",
    "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "ioctl",
):  # fmt: skip
    _HANDLERS[_name] = RecordDecoder._other


def _sensitive_by_name(name: str) -> Callable[[RecordDecoder, R.Record], Event | None]:
    return lambda self, rec: self._sensitive(rec, name)


#: system call number -> its handler (``_sys`` without the two look-ups per record)
_BY_NR: dict[int, Callable[[RecordDecoder, R.Record], Event | None]] = {
    nr: _HANDLERS.get(desc.name) or _sensitive_by_name(desc.name) for nr, desc in BY_NR.items()
}
