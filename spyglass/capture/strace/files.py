"""File-system syscalls -> ``file.*`` events (and the working-directory bookkeeping)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from spyglass.capture.fields import open_kind, path_fields
from spyglass.capture.strace.decode import ann_path, parse_int, struct_fields, unquote
from spyglass.capture.strace.paths import normalize, resolve
from spyglass.capture.strace.state import Call, TraceState
from spyglass.events.schema import Event

Handler = Callable[[TraceState, Call], "Event | None"]

# openat(dirfd, "path", FLAGS[, mode]): the hot path gets its own regex
_OPENAT = re.compile(
    r"((?:AT_FDCWD|-?\d+)(?:<(?:\\.|[^<>\\])*(?:<(?:char|block) \d+:\d+>)?>)?), "
    r'("(?:[^"\\]|\\.)*"(?:\.\.\.)?), ([^,]+)(?:, (0[0-7]*|\d+))?$'
)
_OPEN = re.compile(r'("(?:[^"\\]|\\.)*"(?:\.\.\.)?), ([^,]+)(?:, (0[0-7]*|\d+))?$')


def _mode(token: str | None) -> str | None:
    if not token:
        return None
    value = parse_int(token)
    return None if value is None else f"0{value:o}"


def _open_event(
    st: TraceState, c: Call, dirfd: str | None, path_tok: str, flags: str, mode: str | None
) -> Event | None:
    kind = open_kind(flags)
    raw = unquote(path_tok)
    base = st.base_dir(c, dirfd)
    if kind is None:  # O_PATH: no data access, but the descriptor names a file (*at(), /proc/self/fd)
        if c.ok and c.ret is not None:
            known = ann_path(c.ret_ann) if c.ret_ann else None
            c.proc.fds[c.ret] = known or resolve(raw, base, c.pid, c.tid, st, st.realpath_dir)
        return None
    path = st.below(c, dirfd, raw) if st.overlays.roots else None  # below a detached mount's descriptor
    if path is None and c.ret_ann and c.ok:
        path = ann_path(c.ret_ann)
    if path is not None:
        if c.ret is not None:
            c.proc.fds[c.ret] = path
        if (path == "/etc/hosts" or raw == "/etc/hosts") and st.hosts_file is not None:
            st.learn_hosts(c.pid, "/etc/hosts")
    else:
        path = resolve(raw, base, c.pid, c.tid, st, st.realpath_dir)
        if c.ok and path == "/etc/hosts" and st.hosts_file is not None:
            st.learn_hosts(c.pid, "/etc/hosts")
    fields = path_fields(path, raw)
    return st.event(c, kind, flags=flags, mode=_mode(mode) if kind == "file.create" else None, **fields)


def h_openat(st: TraceState, c: Call) -> Event | None:
    m = _OPENAT.match(c.args)
    if m is None:
        a = c.argv
        if len(a) < 3:
            return None
        return _open_event(st, c, a[0], a[1], a[2], a[3] if len(a) > 3 else None)
    return _open_event(st, c, m.group(1), m.group(2), m.group(3), m.group(4))


def h_open(st: TraceState, c: Call) -> Event | None:
    m = _OPEN.match(c.args)
    if m is None:
        return None
    return _open_event(st, c, None, m.group(1), m.group(2), m.group(3))


def h_creat(st: TraceState, c: Call) -> Event | None:
    return _open_event(st, c, None, c.arg(0), "O_WRONLY|O_CREAT|O_TRUNC", c.arg(1))


def h_openat2(st: TraceState, c: Call) -> Event | None:
    how = struct_fields(c.arg(2))
    return _open_event(st, c, c.arg(0), c.arg(1), how.get("flags", "O_RDONLY"), how.get("mode"))


def _path_event(st: TraceState, c: Call, kind: str, path_tok: str, dirfd: str | None = None, **extra: Any) -> Event:
    raw = unquote(path_tok)
    path = st.resolve(c, raw, dirfd)
    return st.event(c, kind, **path_fields(path, raw), **extra)


def _fd_event(st: TraceState, c: Call, kind: str, fd_tok: str, **extra: Any) -> Event | None:
    path = st.fd_arg_path(c, fd_tok)
    if path is None:
        return None
    return st.event(c, kind, **path_fields(path), **extra)


# --- delete, rename, link -----------------------------------------------------


def h_unlink(st: TraceState, c: Call) -> Event | None:
    return _path_event(st, c, "file.delete", c.arg(0))


def h_unlinkat(st: TraceState, c: Call) -> Event | None:
    flags = c.arg(2)
    return _path_event(st, c, "file.delete", c.arg(1), c.arg(0), flags=flags if flags and flags != "0" else None)


def _rename(
    st: TraceState,
    c: Call,
    src_dir: str | None,
    src: str,
    dst_dir: str | None,
    dst: str,
    flags: str | None = None,
) -> Event:
    raw_src, raw_dst = unquote(src), unquote(dst)
    path = st.resolve(c, raw_src, src_dir)
    target = st.resolve(c, raw_dst, dst_dir)
    return st.event(c, "file.rename", flags=flags, **path_fields(path, raw_src, target))


def h_rename(st: TraceState, c: Call) -> Event | None:
    return _rename(st, c, None, c.arg(0), None, c.arg(1))


def h_renameat(st: TraceState, c: Call) -> Event | None:
    flags = c.arg(4) if c.name == "renameat2" else ""
    return _rename(st, c, c.arg(0), c.arg(1), c.arg(2), c.arg(3), flags if flags and flags != "0" else None)


def _link(st: TraceState, c: Call, old_dir: str | None, old: str, new_dir: str | None, new: str) -> Event:
    raw_old, raw_new = unquote(old), unquote(new)
    path = st.resolve(c, raw_new, new_dir)
    target = st.resolve(c, raw_old, old_dir)
    return st.event(c, "file.link", **path_fields(path, raw_new, target))


def h_link(st: TraceState, c: Call) -> Event | None:
    return _link(st, c, None, c.arg(0), None, c.arg(1))


def h_linkat(st: TraceState, c: Call) -> Event | None:
    return _link(st, c, c.arg(0), c.arg(1), c.arg(2), c.arg(3))


def h_symlink(st: TraceState, c: Call) -> Event | None:
    target = unquote(c.arg(0))
    if c.name == "symlinkat":
        raw, dirfd = unquote(c.arg(2)), c.arg(1)
    else:
        raw, dirfd = unquote(c.arg(1)), None
    path = st.resolve(c, raw, dirfd)
    return st.event(c, "file.symlink", **path_fields(path, raw, target))


# --- attributes -------------------------------------------------------------------


def h_chmod(st: TraceState, c: Call) -> Event | None:
    if c.name == "fchmod":
        return _fd_event(st, c, "file.chmod", c.arg(0), mode=_mode(c.arg(1)))
    if c.name in ("fchmodat", "fchmodat2"):
        return _path_event(st, c, "file.chmod", c.arg(1), c.arg(0), mode=_mode(c.arg(2)))
    return _path_event(st, c, "file.chmod", c.arg(0), mode=_mode(c.arg(1)))


def _id(token: str) -> int | None:
    value = parse_int(token)
    return None if value is None or value < 0 or value == 0xFFFFFFFF else value


def h_chown(st: TraceState, c: Call) -> Event | None:
    if c.name == "fchown":
        return _fd_event(st, c, "file.chown", c.arg(0), owner=_id(c.arg(1)), group=_id(c.arg(2)))
    if c.name == "fchownat":
        return _path_event(st, c, "file.chown", c.arg(1), c.arg(0), owner=_id(c.arg(2)), group=_id(c.arg(3)))
    return _path_event(st, c, "file.chown", c.arg(0), owner=_id(c.arg(1)), group=_id(c.arg(2)))


def h_mkdir(st: TraceState, c: Call) -> Event | None:
    if c.name == "mkdirat":
        return _path_event(st, c, "file.mkdir", c.arg(1), c.arg(0), mode=_mode(c.arg(2)))
    return _path_event(st, c, "file.mkdir", c.arg(0), mode=_mode(c.arg(1)))


def h_truncate(st: TraceState, c: Call) -> Event | None:
    if c.name == "ftruncate":
        return _fd_event(st, c, "file.truncate", c.arg(0))
    return _path_event(st, c, "file.truncate", c.arg(0))


# --- working directory ------------------------------------------------------------


def h_chdir(st: TraceState, c: Call) -> Event | None:
    """chdir/fchdir move the process's tracked cwd and emit nothing."""
    if not c.ok:
        return None
    proc = c.proc
    if c.name == "fchdir":
        path = st.fd_arg_path(c, c.arg(0))
        if path is not None:
            proc.cwd = path
        return None
    path = st.resolve(c, unquote(c.arg(0)))
    if st.realpath_dir is not None:
        try:
            path = normalize(st.realpath_dir(c.pid, path))
        except Exception:  # a host callback must never break parsing
            pass
    proc.cwd = path
    return None


HANDLERS: dict[str, Handler] = {
    "openat": h_openat,
    "open": h_open,
    "creat": h_creat,
    "openat2": h_openat2,
    "unlink": h_unlink,
    "rmdir": h_unlink,
    "unlinkat": h_unlinkat,
    "rename": h_rename,
    "renameat": h_renameat,
    "renameat2": h_renameat,
    "link": h_link,
    "linkat": h_linkat,
    "symlink": h_symlink,
    "symlinkat": h_symlink,
    "chmod": h_chmod,
    "fchmod": h_chmod,
    "fchmodat": h_chmod,
    "fchmodat2": h_chmod,
    "chown": h_chown,
    "lchown": h_chown,
    "fchown": h_chown,
    "fchownat": h_chown,
    "mkdir": h_mkdir,
    "mkdirat": h_mkdir,
    "truncate": h_truncate,
    "ftruncate": h_truncate,
    "chdir": h_chdir,
    "fchdir": h_chdir,
}
