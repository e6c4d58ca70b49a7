"""System call records -> events: files, network, credentials and signals.

One handler per system call (``HANDLERS``, by number), called by the decoder as
``handler(decoder, record)``; it reads and updates the decoder's process table.
The risky kernel interfaces are in ``sensitive``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from spyglass.capture.clockcalls import CLOCK_CALLS
from spyglass.capture.ebpf import records as R
from spyglass.capture.ebpf.sensitive import sensitive_event
from spyglass.capture.ebpf.syscalls import BY_NR
from spyglass.capture.fields import group_kill, path_fields, to_text
from spyglass.capture.mountapi import NEW_MOUNT_CALLS
from spyglass.capture.strace.dns import learn_answer
from spyglass.capture.strace.paths import join, normalize
from spyglass.events.schema import Event

if TYPE_CHECKING:
    from spyglass.capture.ebpf.decoder import RecordDecoder

# files


def _open(dec: RecordDecoder, rec: R.Record) -> Event | None:
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
    p = dec._path(rec, 0)
    if p is None:
        return None
    path, raw = p
    if rec.ret >= 0:
        if dec.protected is not None:  # a link or /proc/self/fd name of a protected file: say which
            canon = dec.protected.by_kernel_id(rec.f_dev, rec.f_ino)
            if canon is not None:
                path = canon
        dec._proc(rec.pid).fds[rec.ret] = path
        if path == "/etc/hosts" and dec.hosts_file is not None:
            try:  # names for later connections, as the process itself resolved them
                dec.hosts_names.update(dec.hosts_file(rec.pid, path))
            except Exception:
                pass
    return dec._event(
        rec, kind, flags=text, mode=R.mode(md) if kind == "file.create" else None, **path_fields(path, raw)
    )


def _one_path(dec: RecordDecoder, rec: R.Record, kind: str, **extra: Any) -> Event | None:
    p = dec._path(rec, 0)
    if p is None:
        return None
    return dec._event(rec, kind, **path_fields(*p), **extra)


def _delete(dec: RecordDecoder, rec: R.Record) -> Event | None:
    flags = R.names(rec.args[2], ((0x200, "AT_REMOVEDIR"),)) if rec.nr == 263 else None
    return _one_path(dec, rec, "file.delete", flags=flags)


def _two(dec: RecordDecoder, rec: R.Record) -> Event | None:
    a, b = dec._path(rec, 0), dec._path(rec, 1)
    if a is None or b is None:
        return None
    name = BY_NR[rec.nr].name
    if name.startswith("rename"):
        flags = R.names(rec.args[4], R.RENAME_FLAGS) if name == "renameat2" else None
        return dec._event(rec, "file.rename", flags=flags, **path_fields(a[0], a[1], b[0]))
    # link(old, new): the new name is the path, the old one the target
    return dec._event(rec, "file.link", **path_fields(b[0], b[1], a[0]))


def _symlink(dec: RecordDecoder, rec: R.Record) -> Event | None:
    p = dec._path(rec, 0)
    target = R.cstr(rec.blobs[1])
    if p is None or target is None:
        return None
    return dec._event(rec, "file.symlink", **path_fields(p[0], p[1], target))


def _mkdir(dec: RecordDecoder, rec: R.Record) -> Event | None:
    md = rec.args[2] if rec.nr == 258 else rec.args[1]
    return _one_path(dec, rec, "file.mkdir", mode=R.mode(md))


def _chmod(dec: RecordDecoder, rec: R.Record) -> Event | None:
    name = BY_NR[rec.nr].name
    if name == "fchmod":
        path = dec._fd_path(rec)
        return None if path is None else dec._event(rec, "file.chmod", mode=R.mode(rec.args[1]), **path_fields(path))
    md = rec.args[2] if name in ("fchmodat", "fchmodat2") else rec.args[1]
    return _one_path(dec, rec, "file.chmod", mode=R.mode(md))


def _chown(dec: RecordDecoder, rec: R.Record) -> Event | None:
    name = BY_NR[rec.nr].name
    i = 2 if name == "fchownat" else 1
    owner, group = _id(rec.args[i]), _id(rec.args[i + 1])
    if name == "fchown":
        path = dec._fd_path(rec)
        return None if path is None else dec._event(rec, "file.chown", owner=owner, group=group, **path_fields(path))
    return _one_path(dec, rec, "file.chown", owner=owner, group=group)


def _truncate(dec: RecordDecoder, rec: R.Record) -> Event | None:
    if rec.nr == 77:
        path = dec._fd_path(rec)
        return None if path is None else dec._event(rec, "file.truncate", **path_fields(path))
    return _one_path(dec, rec, "file.truncate")


def _exec_failed(dec: RecordDecoder, rec: R.Record) -> Event | None:
    p = dec._path(rec, 0)
    if p is None:
        return None
    proc = dec._proc(rec.pid)
    exe_t, rb = to_text(p[0], "process.executable.path", None)
    cwd_t, rb = to_text(proc.cwd, "process.working_directory", rb)
    return dec._event(rec, "process.exec", exe=exe_t, cwd=cwd_t, raw_bytes=rb)


# network


def _addr_fields(dec: RecordDecoder, rec: R.Record, a: R.Addr, with_domain: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"net_type": a.family, "port": a.port}
    address = a.address
    if address is not None and a.family == "unix" and address and not address.startswith(("@", "/")):
        address = normalize(join(dec._proc(rec.pid).cwd, address))
    if address is not None:
        text, raw = to_text(address, "server.address", None)
        out["address"] = text
        if raw:
            out["raw_bytes"] = raw
        if a.family != "unix" and with_domain:
            out["domain"] = _domain(dec, address)
    return out


def _domain(dec: RecordDecoder, address: str | None) -> str | None:
    if not address:
        return None
    name = dec.dns_names.get(address) or dec.hosts_names.get(address)
    if name is None and address.startswith("::ffff:"):
        name = dec.dns_names.get(address[7:]) or dec.hosts_names.get(address[7:])
    return name


def _transport(dec: RecordDecoder, rec: R.Record, a: R.Addr | None) -> str | None:
    t = R.transport(rec)
    if t is None and a is not None and a.family == "unix":
        return "unix"
    return t


def _connect(dec: RecordDecoder, rec: R.Record) -> Event | None:
    a = R.sockaddr(rec.blobs[1])
    if a is None:
        return None
    ok = rec.ret >= 0 or rec.ret == -115  # EINPROGRESS
    return dec._event(rec, "net.connect", ok=ok, transport=_transport(dec, rec, a), **_addr_fields(dec, rec, a))


def _bind(dec: RecordDecoder, rec: R.Record) -> Event | None:
    a = R.sockaddr(rec.blobs[1])
    if a is None:
        return None
    return dec._event(rec, "net.bind", transport=_transport(dec, rec, a), **_addr_fields(dec, rec, a, False))


def _listen(dec: RecordDecoder, rec: R.Record) -> Event | None:
    a = R.local(rec)
    return dec._event(
        rec, "net.listen", transport=R.transport(rec), net_type=R.net_type(rec),
        address=a.address if a else None, port=a.port if a else None,
    )  # fmt: skip


def _send(dec: RecordDecoder, rec: R.Record) -> Event | None:
    t = R.transport(rec)
    if t == "netlink":
        return None
    nbytes = rec.ret if rec.ret >= 0 and rec.nr != 307 else None
    a = R.sockaddr(rec.blobs[1])
    if a is None:
        a = R.peer(rec)
    if a is None:
        return dec._event(rec, "net.send", transport=t, net_type=R.net_type(rec), nbytes=nbytes)
    return dec._event(rec, "net.send", transport=_transport(dec, rec, a), nbytes=nbytes, **_addr_fields(dec, rec, a))


def _recv(dec: RecordDecoder, rec: R.Record) -> Event | None:
    resp = learn_answer(rec.blobs[0], dec.dns_names)
    if resp is None:
        return None
    src = R.sockaddr(rec.blobs[1]) or R.peer(rec)
    fields = _addr_fields(dec, rec, src, False) if src is not None else {}
    return dec._event(rec, "net.dns", transport="udp", dns_name=resp.name, dns_answers=resp.answers, **fields)


# credentials and risky interfaces


def _setid(dec: RecordDecoder, rec: R.Record) -> Event | None:
    name = BY_NR[rec.nr].name
    nargs = 3 if name.startswith("setres") else 2 if name.startswith("setre") else 1
    ids = ", ".join(str(R.s32(a)) for a in rec.args[:nargs])
    detail = f"{name[3:]}={ids}" if name.startswith("setfs") else f"{name}({ids})"
    if name == "capset":
        detail = "capset"
    return dec._event(rec, "priv.change", uid=rec.euid, ruid=rec.uid, gid=rec.egid, rgid=rec.gid, detail=detail)


def _kill(dec: RecordDecoder, rec: R.Record) -> Event | None:
    name = BY_NR[rec.nr].name
    if name == "tgkill":
        group, target, sig = R.s32(rec.args[0]), R.s32(rec.args[1]), rec.args[2]
        if group in dec.seen:
            return None
        if group > 0:
            target = group  # the process the thread belongs to
    else:
        target, sig = R.s32(rec.args[0]), rec.args[1]
    signame = R.signal_name(sig) or f"signal {sig}"
    if name == "kill" and (target == 0 or target < -1):
        where, members = group_kill(target, rec.pid, dec.pgid_of)
        return dec._sensitive(rec, f"{signame} to {where}", members)
    if target == 0 or target < -1 or target in dec.seen:
        return None
    return dec._sensitive(rec, signame, target)


def _id(v: int) -> int | None:
    v &= 0xFFFFFFFF
    return None if v == 0xFFFFFFFF else v


_HANDLERS: dict[str, Callable[[RecordDecoder, R.Record], Event | None]] = {
    "open": _open, "openat": _open, "openat2": _open, "creat": _open,
    "unlink": _delete, "rmdir": _delete, "unlinkat": _delete,
    "rename": _two, "renameat": _two, "renameat2": _two, "link": _two, "linkat": _two,
    "symlink": _symlink, "symlinkat": _symlink, "mkdir": _mkdir, "mkdirat": _mkdir,
    "chmod": _chmod, "fchmod": _chmod, "fchmodat": _chmod, "fchmodat2": _chmod,
    "chown": _chown, "lchown": _chown, "fchown": _chown, "fchownat": _chown,
    "truncate": _truncate, "ftruncate": _truncate, "execve": _exec_failed, "execveat": _exec_failed,
    "connect": _connect, "bind": _bind, "listen": _listen,
    "sendto": _send, "sendmsg": _send, "sendmmsg": _send, "recvfrom": _recv, "recvmsg": _recv,
    "setuid": _setid, "setgid": _setid, "setreuid": _setid, "setregid": _setid, "setresuid": _setid,
    "setresgid": _setid, "setfsuid": _setid, "setfsgid": _setid, "capset": _setid,
    "kill": _kill, "tkill": _kill, "tgkill": _kill,
}  # fmt: skip

for _name in (
    "ptrace", "memfd_create", "io_uring_setup", "mount", "umount2", "unshare", "setns", "chroot", "pivot_root", "bpf",
    "init_module",
    "finit_module", "open_by_handle_at", "name_to_handle_at", "process_vm_readv", "process_vm_writev",
    "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "ioctl", *CLOCK_CALLS, *NEW_MOUNT_CALLS,
):  # fmt: skip
    _HANDLERS[_name] = sensitive_event


def _sensitive_by_name(name: str) -> Callable[[RecordDecoder, R.Record], Event | None]:
    return lambda dec, rec: dec._sensitive(rec, name)


#: system call number -> its handler (one look-up per record)
HANDLERS: dict[int, Callable[[RecordDecoder, R.Record], Event | None]] = {
    nr: _HANDLERS.get(desc.name) or _sensitive_by_name(desc.name) for nr, desc in BY_NR.items()
}
