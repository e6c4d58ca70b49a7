"""Risky kernel interfaces -> ``sys.sensitive`` events: ptrace, memfd, io_uring, mounts,
namespaces, bpf, modules, and the calls that reach into other processes or the terminal."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from spyglass.capture.clockcalls import adjust_detail, clock_detail
from spyglass.capture.ebpf import records as R
from spyglass.capture.ebpf.syscalls import BY_NR
from spyglass.capture.fields import open_kind, path_fields
from spyglass.capture.mountapi import OPEN_TREE_CLONE, fsconfig_detail, mount_call_detail, pivot_root_detail
from spyglass.events.schema import Event

if TYPE_CHECKING:
    from spyglass.capture.ebpf.decoder import RecordDecoder

_MS_BIND, _MS_MOVE = 0x1000, 0x2000  # mount(2) flags


def sensitive_event(dec: RecordDecoder, rec: R.Record) -> Event | None:
    name = BY_NR[rec.nr].name
    a = rec.args
    if name == "ptrace":
        req = R.PTRACE_REQUESTS.get(a[0], f"PTRACE_{a[0]:#x}")
        return dec._sensitive(rec, req, None if a[0] == 0 else R.s32(a[1]))
    if name == "memfd_create":
        mname = R.cstr(rec.blobs[1]) or ""
        if rec.ret >= 0:
            dec._proc(rec.pid).fds[rec.ret] = f"/memfd:{mname} (deleted)"
        flags = R.names(a[1], R.MFD_FLAGS)
        return dec._sensitive(rec, f"memfd:{mname}" + (f" {flags}" if flags else ""))
    if name == "io_uring_setup":
        return dec._sensitive(rec, f"io_uring_setup entries={a[0]}")
    if name in ("mount", "umount2"):
        p = dec._path(rec, 0)
        target_raw = p[1] if p else "?"
        fields = path_fields(*p) if p else {}
        if name == "umount2":
            flags = R.names(a[1], R.MNT_FLAGS)
            if rec.ret == 0 and p:
                dec.overlays.unmounted(p[0])
            return dec._sensitive(rec, f"umount {target_raw} {flags or ''}".rstrip(), **fields)
        if rec.ret == 0 and p:  # blob 3: the mount's data (spyglass.bpf.c, SP_MOUNT)
            dec.overlays.mounted(p[0], R.cstr(rec.blobs[3]), dec._proc(rec.pid).cwd)
        src = R.cstr(rec.blobs[1]) or "none"
        ev = dec._sensitive(rec, f"mount {src} on {target_raw}", **fields)
        if p and (src.startswith("/") or a[3] & (_MS_BIND | _MS_MOVE)):
            # the directory mounted there (a bind or a move), in file.target, as the strace backend
            cwd = dec._proc(rec.pid).cwd or "/"
            ev.target = path_fields(p[0], None, os.path.normpath(os.path.join(cwd, src))).get("target")
        return ev
    if name == "chroot":  # from then on the process's paths are below that root (RecordDecoder.chroots)
        p = dec._path(rec, 0)
        if rec.ret == 0 and p:
            if p[0] == "/":
                dec.chroots.pop(rec.pid, None)
            else:
                dec.chroots[rec.pid] = p[0]
        return dec._sensitive(rec, f"chroot {p[1] if p else '?'}", **(path_fields(*p) if p else {}))
    if name == "pivot_root":  # recorded, not followed: docs/threat-model.md says why
        # a relative name is relative to a working directory that is the new root once the call is
        # over: the program's walk of it is then empty, and the decoder's last known cwd may be stale
        typed = R.cstr(rec.blobs[0]) or ""
        new = dec._path(rec, 0) if typed.startswith("/") or R.walk(rec.blobs[2]) else None
        old = dec._path(rec, 1)
        if new is None and typed:
            return dec._sensitive(rec, pivot_root_detail(typed, old[1] if old else "?"))
        detail = pivot_root_detail(new[1] if new else "?", old[1] if old else "?")
        return dec._sensitive(rec, detail, **(path_fields(*new) if new else {}))
    if name == "unshare":
        return dec._sensitive(rec, R.names(a[0], R.CLONE_FLAGS) or "0")
    if name == "setns":
        ns = R.walk(rec.blobs[2]) or str(R.s32(a[0]))
        return dec._sensitive(rec, f"{R.names(a[1], R.CLONE_FLAGS) or '0'} {ns.lstrip('/')}")
    if name == "bpf":
        return dec._sensitive(rec, R.BPF_CMDS[a[0]] if a[0] < len(R.BPF_CMDS) else f"bpf cmd {a[0]}")
    if name == "init_module":
        return dec._sensitive(rec, f"init_module {R.cstr(rec.blobs[1]) or ''}".rstrip())
    if name == "finit_module":
        path = R.walk(rec.blobs[2])
        detail = f"finit_module {path or a[0]} {R.cstr(rec.blobs[1]) or ''}".rstrip()
        return dec._sensitive(rec, detail, **(path_fields(path) if path else {}))
    if name in ("process_vm_readv", "process_vm_writev"):
        if R.s32(a[0]) == rec.pid:
            return None  # a process copying its own memory
        return dec._sensitive(rec, f"{name} pid={R.s32(a[0])}", R.s32(a[0]))
    if name == "pidfd_open":
        target = R.s32(a[0])
        if rec.ret >= 0:
            dec._proc(rec.pid).fds[rec.ret] = f"pid:{target}"  # what later pidfd_* calls aim at
        if target in dec.seen:
            return None  # a pidfd on a process of the run
        return dec._sensitive(rec, f"pidfd_open pid={target}", target)
    if name == "pidfd_getfd":
        return dec._sensitive(rec, f"pidfd_getfd fd={R.s32(a[1])}", _pidfd_target(dec, rec))
    if name == "pidfd_send_signal":
        aim = _pidfd_target(dec, rec)
        if aim is not None and aim in dec.seen:
            return None  # a signal inside the run, as kill() to a process of the run
        return dec._sensitive(rec, R.signal_name(a[1]) or f"signal {a[1]}", aim)
    if name == "ioctl":  # TIOCSTI only (filtered in the kernel); worded as the strace backend does
        tty = dec._fd_path(rec)
        fields = path_fields(tty) if tty and tty.startswith("/") else {}
        return dec._sensitive(rec, f"TIOCSTI into {tty or f'fd {R.s32(a[0])}'}", **fields)
    if name == "fsconfig":
        key, value = R.cstr(rec.blobs[0]), R.cstr(rec.blobs[1])
        if rec.ret == 0 and a[1] in (1, 5):  # an overlay's layer: a string, or a descriptor (blob 2: its path)
            layer = value if a[1] == 1 else R.walk(rec.blobs[2]) or dec._proc(rec.pid).fds.get(R.s32(a[4]))
            cwd = R.walk(rec.blobs[3]) or dec._proc(rec.pid).cwd  # what relative layers are relative to
            dec.overlays.fs_configured(rec.pid, R.s32(a[0]), key, layer, cwd)
        return dec._sensitive(rec, fsconfig_detail(a[1], key, value))
    if name in ("open_tree", "move_mount", "fspick", "mount_setattr", "fsopen", "fsmount"):
        p = dec._path(rec, 0) if name not in ("fsopen", "fsmount") and R.cstr(rec.blobs[0]) else None
        _follow_overlay(dec, rec, name, p[0] if p else None)
        clone = name == "open_tree" and bool(a[2] & OPEN_TREE_CLONE)
        detail = mount_call_detail(name, fs=R.cstr(rec.blobs[1]), clone=clone)
        return dec._sensitive(rec, detail, **(path_fields(*p) if p else {}))
    if name == "settimeofday":
        return None if a[0] == 0 and a[1] == 0 else dec._sensitive(rec, clock_detail(name))  # NULL, NULL: nothing
    if name == "clock_settime":
        return dec._sensitive(rec, clock_detail(name, clock=R.s32(a[0])))
    if name in ("adjtimex", "clock_adjtime"):  # args[5]: the struct timex's modes (spyglass.bpf.c, SP_TIMEX)
        told = adjust_detail(name, R.s32(a[0]) if name != "adjtimex" else None, a[5], failed=rec.ret < 0,
                             bad_address=rec.ret == -14)  # EFAULT
        return dec._sensitive(rec, told) if told is not None else None
    if name == "open_by_handle_at":
        return _by_handle(dec, rec)
    if name == "name_to_handle_at":
        p = dec._path(rec, 0)
        return dec._sensitive(rec, name, **(path_fields(*p) if p else {}))
    return dec._sensitive(rec, name)


def _follow_overlay(dec: RecordDecoder, rec: R.Record, name: str, path: str | None) -> None:
    """An overlay made with the new mount API, followed call by call (``spyglass.capture.overlays``)."""
    if rec.ret < 0:
        return
    if name == "fsopen":
        dec.overlays.fs_opened(rec.pid, rec.ret, R.cstr(rec.blobs[1]))
    elif name == "fsmount":
        dec.overlays.fs_mounted(rec.pid, R.s32(rec.args[0]), rec.ret)
    elif name == "open_tree":
        dec.overlays.tree_opened(rec.pid, rec.ret, path if rec.args[2] & OPEN_TREE_CLONE else None)
    elif name == "move_mount" and path is not None:  # blob 1: the path moved from, empty for a descriptor
        source = dec._path(rec, 1) if R.cstr(rec.blobs[1]) else None
        dec.overlays.moved(rec.pid, R.s32(rec.args[0]), source[0] if source else None, path)


def _pidfd_target(dec: RecordDecoder, rec: R.Record) -> int | None:
    """The pid the pidfd in argument 0 was opened on (seen at its ``pidfd_open``), else None."""
    known = dec._proc(rec.pid).fds.get(R.s32(rec.args[0]), "")
    return int(known[4:]) if known.startswith("pid:") and known[4:].lstrip("-").isdigit() else None


def _by_handle(dec: RecordDecoder, rec: R.Record) -> Event:
    """``open_by_handle_at``: the open it is, on the file the new descriptor names (read from the
    live process, as the strace backend does for a handle it did not see made), so the credential,
    scope and witness rules apply; ``sys.sensitive`` when the file cannot be known (the call failed,
    or the descriptor was closed before it was read)."""
    flags = R.open_flags(rec.args[2])
    path: str | None = None
    if rec.ret >= 0 and dec.fd_link is not None:
        try:
            path = dec.fd_link(rec.pid, rec.ret)
        except Exception:  # a host callback must never break decoding
            path = None
    if path is None or not path.startswith("/"):
        return dec._sensitive(rec, f"open_by_handle_at {flags} (file unknown)")
    if dec.protected is not None:
        path = dec.protected.by_kernel_id(rec.f_dev, rec.f_ino) or path
    dec._proc(rec.pid).fds[rec.ret] = path
    kind = open_kind(flags) or "file.read"
    return dec._event(rec, kind, flags=flags, **path_fields(path))
