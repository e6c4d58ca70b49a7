"""Credential changes -> ``priv.change``; risky kernel interfaces -> ``sys.sensitive``.

Ids are tracked per process from the values the parser starts with and the
set*id calls it sees (the rules the kernel applies are followed loosely:
``setuid``/``setgid`` by a process with effective id 0 set the real id too).
``setfs*id`` changes only the file-system id, which is reported in ``detail``.
glibc replays a set*id call on every thread of a process; replays that change
nothing are not reported again.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from spyglass.capture.clockcalls import CLOCK_CALLS, CLOCK_NUMBERS, adjust_detail, clock_detail, modes_from_text
from spyglass.capture.fields import group_kill, path_fields, to_text
from spyglass.capture.mountapi import (
    FSCONFIG_NUMBERS,
    NEW_MOUNT_CALLS,
    OPEN_TREE_CLONE,
    fsconfig_detail,
    mount_call_detail,
    pivot_root_detail,
)
from spyglass.capture.strace.decode import ann_path, parse_fd, parse_int, parse_pid, unquote
from spyglass.capture.strace.paths import resolve
from spyglass.capture.strace.state import Call, TraceState
from spyglass.events.schema import Event

Handler = Callable[[TraceState, Call], "Event | None"]


def _ids(c: Call) -> list[int | None]:
    out: list[int | None] = []
    for tok in c.argv:
        v = parse_int(tok)
        out.append(None if v is None or v < 0 or v == 0xFFFFFFFF else v)
    return out


def h_setid(st: TraceState, c: Call) -> Event | None:
    proc = c.proc
    before = (proc.ruid, proc.euid, proc.rgid, proc.egid)
    ids = _ids(c)
    name = c.name
    if c.ok and ids:
        first = ids[0]
        if name == "setuid" and first is not None:
            if proc.euid == 0:
                proc.ruid = first
            proc.euid = first
        elif name == "setgid" and first is not None:
            if proc.euid == 0:
                proc.rgid = first
            proc.egid = first
        elif name in ("setreuid", "setresuid"):
            if first is not None:
                proc.ruid = first
            if len(ids) > 1 and ids[1] is not None:
                proc.euid = ids[1]
        elif name in ("setregid", "setresgid"):
            if first is not None:
                proc.rgid = first
            if len(ids) > 1 and ids[1] is not None:
                proc.egid = ids[1]
    after = (proc.ruid, proc.euid, proc.rgid, proc.egid)
    if c.ok and after == before and c.tid != c.pid and not name.startswith("setfs"):
        return None  # glibc's per-thread replay of a change already reported
    detail = f"{name[3:]}={c.args.strip()}" if name.startswith("setfs") else f"{name}({c.args.strip()})"
    return st.event(c, "priv.change", uid=proc.euid, ruid=proc.ruid, gid=proc.egid, rgid=proc.rgid, detail=detail)


def h_capset(st: TraceState, c: Call) -> Event | None:
    data = c.arg(1).strip()
    if data.startswith("{") and data.endswith("}"):
        data = data[1:-1]
    proc = c.proc
    return st.event(
        c,
        "priv.change",
        uid=proc.euid,
        ruid=proc.ruid,
        gid=proc.egid,
        rgid=proc.rgid,
        detail=f"capset {data}",
    )


def _sensitive(
    st: TraceState, c: Call, detail: str, target_pid: int | None = None, fields: dict[str, Any] | None = None
) -> Event:
    out = dict(fields) if fields else {}
    text, raw = to_text(detail, "detail", out.get("raw_bytes"))
    if raw:
        out["raw_bytes"] = raw
    return st.event(c, "sys.sensitive", detail=text, target_pid=target_pid, **out)


def h_ptrace(st: TraceState, c: Call) -> Event | None:
    request = c.arg(0)
    target = None if request == "PTRACE_TRACEME" else parse_pid(c.arg(1))
    return _sensitive(st, c, request, target)


def h_memfd(st: TraceState, c: Call) -> Event | None:
    flags = c.arg(1)
    name = unquote(c.arg(0))
    detail = "memfd:" + name
    if c.ok and c.ret is not None:
        # the new descriptor names the memory file: an exec of /proc/self/fd/N then says so
        c.proc.fds[c.ret] = f"/memfd:{name} (deleted)"
    if flags and flags != "0":
        detail += " " + flags
    return _sensitive(st, c, detail)


def h_io_uring(st: TraceState, c: Call) -> Event | None:
    return _sensitive(st, c, f"io_uring_setup entries={c.arg(0)}")


def h_mount(st: TraceState, c: Call) -> Event | None:
    source, raw_target, fstype, flags = unquote(c.arg(0)), unquote(c.arg(1)), c.arg(2), c.arg(3)
    path = st.resolve(c, raw_target)
    fs = unquote(fstype) if fstype.startswith('"') else ""
    detail = f"mount {source or fs or 'none'} on {raw_target}"
    if fs:
        detail += f" type {fs}"
    if flags and flags != "0":
        detail += f" {flags}"
    if c.ok and path:
        data = c.arg(4)
        st.overlays.mounted(path, unquote(data) if data.startswith('"') else None, c.proc.cwd)
    # the directory mounted there (a bind or a move: a path, not a device's or file system's name),
    # in file.target: the witness judges a name below the mount point as that directory's too
    bound = source.startswith("/") or "MS_BIND" in flags or "MS_MOVE" in flags
    where = st.resolve(c, source) if source and bound else None
    return _sensitive(st, c, detail, fields=path_fields(path, raw_target, where))


def h_umount(st: TraceState, c: Call) -> Event | None:
    raw_target = unquote(c.arg(0))
    path = st.resolve(c, raw_target)
    if c.ok and path:
        st.overlays.unmounted(path)
    return _sensitive(st, c, f"umount {raw_target} {c.arg(1)}".rstrip(), fields=path_fields(path, raw_target))


def h_chroot(st: TraceState, c: Call) -> Event | None:
    """``chroot``: from then on an absolute path of the process is below that root (inherited at a fork)."""
    raw = unquote(c.arg(0))
    # symlinks are not resolved: the call is reported when it is over, and the process's
    # /proc/PID/root is then the new root
    path = resolve(raw, st.base_dir(c, None), c.pid, c.tid, st, None)
    if c.ok and path:
        if path == "/":
            st.chroots.pop(c.proc.pid, None)
        else:
            st.chroots[c.proc.pid] = path
    return _sensitive(st, c, f"chroot {raw}", fields=path_fields(path, raw))


def h_pivot_root(st: TraceState, c: Call) -> Event | None:
    """``pivot_root``: recorded, not followed as a change of root (docs/threat-model.md says why)."""
    new, old = unquote(c.arg(0)), unquote(c.arg(1))
    path = resolve(new, st.base_dir(c, None), c.pid, c.tid, st, None)  # as the caller named it, unresolved
    return _sensitive(st, c, pivot_root_detail(new, old), fields=path_fields(path, new))


def h_unshare(st: TraceState, c: Call) -> Event | None:
    return _sensitive(st, c, c.arg(0))


def h_setns(st: TraceState, c: Call) -> Event | None:
    fd = parse_fd(c.arg(0))
    ns = fd.ann if fd is not None and fd.ann else c.arg(0)
    return _sensitive(st, c, f"{c.arg(1)} {ns}")


def h_bpf(st: TraceState, c: Call) -> Event | None:
    return _sensitive(st, c, c.arg(0))


def h_module(st: TraceState, c: Call) -> Event | None:
    if c.name == "finit_module":
        fd = parse_fd(c.arg(0))
        path = ann_path(fd.ann) if fd is not None else None
        params = unquote(c.arg(1))
        detail = f"finit_module {path or c.arg(0)} {params}".rstrip()
        return _sensitive(st, c, detail, fields=path_fields(path) if path else None)
    return _sensitive(st, c, f"init_module {unquote(c.arg(2))}".rstrip())


_NS_INIT = re.compile(r"1 /\* \d+ in strace's PID NS \*/$")


def h_kill(st: TraceState, c: Call) -> Event | None:
    """A signal to a process outside the traced tree (or to every process, pid -1), or to a
    process group (``target_pid`` is then minus the group id)."""
    # pid 1 of another PID namespace (a sandbox's init, spyglass's relay) is reported even when
    # traced: a signal to it from inside is an attack on the sandbox, not the run's own business
    # (an init of the run's own namespace signalled by its children is reported as well)
    ns_init = _NS_INIT.match(c.arg(0).strip()) is not None
    if c.name == "tgkill":
        target, sig = parse_pid(c.arg(1)), c.arg(2)
        group = parse_pid(c.arg(0))
        if group is not None and group in st.seen and not ns_init:
            return None
        if group is not None and group > 0:
            target = group  # the process the thread belongs to
    else:
        target, sig = parse_pid(c.arg(0)), c.arg(1)
    name = sig if not sig.isdigit() else f"signal {sig}"
    if ns_init and target is not None and target != c.pid:  # a namespace's init signalling itself: its own
        return _sensitive(st, c, name, target)
    if c.name == "kill" and target is not None and (target == 0 or target < -1):
        where, members = group_kill(target, c.pid, st.pgid_of)
        return _sensitive(st, c, f"{name} to {where}", members)
    if target is None or target == 0 or target < -1 or target in st.seen:
        return None
    return _sensitive(st, c, name, target)


#: marks a standard descriptor that is an internet socket (see :func:`stdio_socket`)
SOCKET_FD = "socket:"


def _sock_of(entry: str) -> str:
    """The socket annotation a descriptor-table entry holds (``TCP:[a->b]``), or ''.

    The descriptor bookkeeping (access.h_dup, traced dup2/dup3) stores what a
    duplicated descriptor is; only internet sockets count here."""
    if entry.startswith(SOCKET_FD):
        entry = entry[len(SOCKET_FD):]
    return entry if entry.upper().startswith(("TCP", "UDP")) and ":[" in entry else ""


_MODES = re.compile(r"\bmodes=([^,}]+)")


def _clock_id(text: str) -> int | None:
    word = text.strip().split(" ", 1)[0]
    return CLOCK_NUMBERS[word] if word in CLOCK_NUMBERS else parse_int(word)


def h_clock(st: TraceState, c: Call) -> Event | None:
    """A call that may set a clock (``spyglass.capture.clockcalls``); reads of its state are not
    reported."""
    name = c.name
    if name == "settimeofday":
        if c.arg(0).strip() == "NULL" and c.arg(1).strip() == "NULL":
            return None  # sets nothing
        return _sensitive(st, c, clock_detail(name))
    if name == "clock_settime":
        clock = _clock_id(c.arg(0))
        return _sensitive(st, c, clock_detail(name, clock=clock) if clock is not None else f"{name} {c.arg(0)}")
    found = _MODES.search(c.arg(0 if name == "adjtimex" else 1))
    detail = adjust_detail(name, _clock_id(c.arg(0)) if name != "adjtimex" else None,
                           modes_from_text(found.group(1)) if found else None,
                           failed=not c.ok, bad_address=(c.err or "").startswith("EFAULT"))
    return _sensitive(st, c, detail) if detail is not None else None


#: new mount API call -> (index of its directory descriptor, index of its path) when it has a path
_MOUNT_PATHS = {"open_tree": (0, 1), "move_mount": (2, 3), "fspick": (0, 1), "mount_setattr": (0, 1)}


def h_new_mount(st: TraceState, c: Call) -> Event | None:
    """A call of the new mount API (``spyglass.capture.mountapi``)."""
    name = c.name
    if name == "fsconfig":
        cmd_text = c.arg(1).strip()
        cmd = FSCONFIG_NUMBERS[cmd_text] if cmd_text in FSCONFIG_NUMBERS else parse_int(cmd_text)
        key, value = c.arg(2).strip(), c.arg(3).strip()
        key_s = unquote(key) if key.startswith('"') else None
        value_s = unquote(value) if value.startswith('"') else None
        ctx = parse_fd(c.arg(0))
        if c.ok and ctx is not None and ctx.num is not None and cmd in (1, 5):  # an overlay's layer
            aux = parse_fd(c.arg(4)) if cmd == 5 else None
            layer = value_s if cmd == 1 else ann_path(aux.ann) if aux is not None else None
            st.overlays.fs_configured(c.proc.pid, ctx.num, key_s, layer, c.proc.cwd)
        return _sensitive(st, c, fsconfig_detail(-1 if cmd is None else cmd, key_s, value_s))
    fields: dict[str, Any] = {}
    where = _MOUNT_PATHS.get(name)
    if where is not None:
        raw = c.arg(where[1]).strip()
        raw = unquote(raw) if raw.startswith('"') else ""
        if raw:
            fields = path_fields(st.resolve(c, raw, c.arg(where[0])), raw)
    fs = unquote(c.arg(0)) if name == "fsopen" and c.arg(0).startswith('"') else None
    if c.ok:
        _follow_overlay(st, c, fs, fields.get("path"))
    clone = name == "open_tree" and ("OPEN_TREE_CLONE" in c.arg(2) or (parse_int(c.arg(2)) or 0) & OPEN_TREE_CLONE)
    return _sensitive(st, c, mount_call_detail(name, fs=fs, clone=bool(clone)), fields=fields)


def _follow_overlay(st: TraceState, c: Call, fs: str | None, path: str | None) -> None:
    """An overlay made with the new mount API, followed call by call (``spyglass.capture.overlays``);
    ``path`` is the call's path argument (``open_tree``'s source, ``move_mount``'s target)."""
    pid, ret, name = c.proc.pid, c.ret, c.name
    if name == "fsopen" and ret is not None:
        st.overlays.fs_opened(pid, ret, fs)
    elif name == "fsmount" and ret is not None:
        ctx = parse_fd(c.arg(0))
        if ctx is not None and ctx.num is not None:
            st.overlays.fs_mounted(pid, ctx.num, ret)
    elif name == "open_tree" and ret is not None:
        clone = "OPEN_TREE_CLONE" in c.arg(2) or (parse_int(c.arg(2)) or 0) & OPEN_TREE_CLONE
        st.overlays.tree_opened(pid, ret, path if clone else None)
    elif name == "move_mount" and path is not None:
        mnt, raw = parse_fd(c.arg(0)), c.arg(1).strip()
        raw = unquote(raw) if raw.startswith('"') else ""
        source = st.resolve(c, raw, c.arg(0)) if raw else None
        st.overlays.moved(pid, mnt.num if mnt is not None and mnt.num is not None else -1, source, path)


def stdio_socket(st: TraceState, c: Call) -> Event | None:
    """After a successful exec: a ``sys.sensitive`` event when the program's standard
    input or output is an internet socket (a reverse or bind shell, whatever its command line)."""
    fds = c.proc.fds
    socks = [f"fd {n} {_sock_of(fds.get(n, ''))}" for n in (0, 1) if _sock_of(fds.get(n, ""))]
    if not socks:
        return None
    return _sensitive(st, c, "stdio-socket: " + ", ".join(socks))


HANDLERS: dict[str, Handler] = {
    "setuid": h_setid,
    "setgid": h_setid,
    "setreuid": h_setid,
    "setregid": h_setid,
    "setresuid": h_setid,
    "setresgid": h_setid,
    "setfsuid": h_setid,
    "setfsgid": h_setid,
    "capset": h_capset,
    "ptrace": h_ptrace,
    "memfd_create": h_memfd,
    "io_uring_setup": h_io_uring,
    "mount": h_mount,
    "umount2": h_umount,
    "unshare": h_unshare,
    "chroot": h_chroot,
    "pivot_root": h_pivot_root,
    "setns": h_setns,
    "bpf": h_bpf,
    "init_module": h_module,
    "finit_module": h_module,
    "kill": h_kill,
    "tkill": h_kill,
    "tgkill": h_kill,
    **dict.fromkeys(CLOCK_CALLS, h_clock),
    **dict.fromkeys(NEW_MOUNT_CALLS, h_new_mount),
}
