"""Reaching other processes and files sideways: pidfds, process memory, file handles, TIOCSTI.

* ``pidfd_open``/``pidfd_send_signal`` aimed outside the traced tree, and every
  ``pidfd_getfd`` and ``process_vm_readv``/``process_vm_writev``, become
  ``sys.sensitive`` events with ``target_pid`` (the process rules then judge
  whether that process is spyglass or its tracer).
* ``name_to_handle_at`` is remembered (handle -> path) and reported as
  ``sys.sensitive``; ``open_by_handle_at`` is reported as the ``file.read`` /
  ``file.write`` it is, on the path the handle was made from, so the
  credential and scope rules apply to it as to any open.  A handle never seen
  being made is resolved through the host's ``/proc/<pid>/fd/<n>`` when the
  parser has a ``fd_link`` callback, and is reported as such otherwise.
* ``ioctl(TIOCSTI)`` (typing into a terminal) is ``sys.sensitive``; other
  ioctls are ignored.
* ``dup``/``dup2``/``dup3``/``fcntl(F_DUPFD*)``/``close`` keep the per-process
  descriptor table right (``O_PATH`` descriptors included), so that
  ``/proc/self/fd/N/...`` and ``*at()`` paths resolve to what the descriptor
  really names; they emit nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from spyglass.capture.fields import open_kind, path_fields, to_text
from spyglass.capture.strace.decode import ann_path, parse_fd, parse_pid, unquote
from spyglass.capture.strace.state import Call, TraceState
from spyglass.events.schema import Event

Handler = Callable[[TraceState, Call], "Event | None"]

_HANDLE = re.compile(r'handle_type=(-?\d+), f_handle=("(?:[^"\\]|\\.)*")')
_PIDFD = re.compile(r"<pid:(\d+)>")


def _sensitive(st: TraceState, c: Call, detail: str, target: int | None = None, **fields: Any) -> Event:
    text, raw = to_text(detail, "detail", None)
    if raw:
        fields["raw_bytes"] = raw
    return st.event(c, "sys.sensitive", detail=text, target_pid=target, **fields)


def _pidfd_target(token: str, st: TraceState, c: Call) -> int | None:
    """The pid a pidfd argument refers to: its ``<pid:N>`` annotation, or what we saw it opened on."""
    m = _PIDFD.search(token)
    if m is not None:
        return int(m.group(1))
    fd = parse_fd(token)
    if fd is not None and fd.num is not None:
        known = c.proc.fds.get(fd.num, "")
        if known.startswith("pid:"):
            return int(known[4:])
    return None


def h_pidfd_open(st: TraceState, c: Call) -> Event | None:
    target = parse_pid(c.arg(0))
    if c.ok and c.ret is not None and target is not None:
        c.proc.fds[c.ret] = f"pid:{target}"
    if target is None or target in st.seen:
        return None
    return _sensitive(st, c, "pidfd_open", target)


def h_pidfd_send_signal(st: TraceState, c: Call) -> Event | None:
    target = _pidfd_target(c.arg(0), st, c)
    if target is not None and target in st.seen:
        return None
    sig = c.arg(1)
    return _sensitive(st, c, sig if not sig.isdigit() else f"signal {sig}", target)


def h_pidfd_getfd(st: TraceState, c: Call) -> Event | None:
    target = _pidfd_target(c.arg(0), st, c)
    fd = parse_fd(c.arg(1))
    what = fd.ann if fd is not None and fd.ann else c.arg(1)
    got = ann_path(c.ret_ann) if c.ok else None
    if c.ok and c.ret is not None and c.ret_ann:
        c.proc.fds[c.ret] = got or c.ret_ann
    fields = path_fields(got) if got else {}
    return _sensitive(st, c, f"pidfd_getfd fd {fd.num if fd else c.arg(1)} ({what})", target, **fields)


def h_process_vm(st: TraceState, c: Call) -> Event | None:
    target = parse_pid(c.arg(0))
    if target == c.pid:
        return None  # a process copying its own memory
    return _sensitive(st, c, c.name, target)


def _handle_key(text: str) -> str | None:
    m = _HANDLE.search(text)
    return f"{m.group(1)}:{m.group(2)}" if m is not None else None


def h_name_to_handle(st: TraceState, c: Call) -> Event | None:
    name = unquote(c.arg(1))
    path = st.resolve(c, name, c.arg(0))
    key = _handle_key(c.arg(2))
    if c.ok and key is not None:
        st.handles[key] = path
    return _sensitive(st, c, "name_to_handle_at", **path_fields(path, name))


def h_open_by_handle(st: TraceState, c: Call) -> Event | None:
    flags = c.arg(2)
    key = _handle_key(c.arg(1))
    path = st.handles.get(key) if key is not None else None
    if path is None and c.ok and c.ret_ann:
        path = ann_path(c.ret_ann)
    if path is None and c.ok and c.ret is not None and st.fd_link is not None:
        try:
            path = st.fd_link(c.pid, c.ret)
        except Exception:  # a host callback must never break parsing
            path = None
        if path is not None and not path.startswith("/"):
            path = None
    if c.ok and c.ret is not None and path is not None:
        c.proc.fds[c.ret] = path
    if path is None:
        return _sensitive(st, c, f"open_by_handle_at {flags} (file unknown)")
    kind = open_kind(flags) or "file.read"
    return st.event(c, kind, flags=flags, **path_fields(path))


def h_ioctl(st: TraceState, c: Call) -> Event | None:
    if c.arg(1) != "TIOCSTI":
        return None
    fd = parse_fd(c.arg(0))
    tty = fd.ann if fd is not None and fd.ann else c.arg(0)
    path = ann_path(tty)
    fields = path_fields(path) if path else {}
    return _sensitive(st, c, f"TIOCSTI {c.arg(2)} into {path or tty}", **fields)


# --- descriptor bookkeeping ----------------------------------------------------


def h_dup(st: TraceState, c: Call) -> Event | None:
    if c.name == "fcntl" and not c.arg(1).startswith("F_DUPFD"):
        return None
    if not c.ok or c.ret is None:
        return None
    fds = c.proc.fds
    src = parse_fd(c.arg(0))
    path = ann_path(c.ret_ann) if c.ret_ann else None
    if path is None and c.ret_ann:
        path = c.ret_ann  # a pipe, socket, pidfd: what it is, so the old entry does not linger
    if path is None and src is not None and src.num is not None:
        path = ann_path(src.ann) if src.ann else fds.get(src.num)
    if path is None:
        fds.pop(c.ret, None)
    else:
        fds[c.ret] = path
    return None


def h_close(st: TraceState, c: Call) -> Event | None:
    fd = parse_fd(c.arg(0))
    if fd is not None and fd.num is not None:
        c.proc.fds.pop(fd.num, None)
        c.proc.peers.pop(fd.num, None)
    return None


HANDLERS: dict[str, Handler] = {
    "pidfd_open": h_pidfd_open,
    "pidfd_send_signal": h_pidfd_send_signal,
    "pidfd_getfd": h_pidfd_getfd,
    "process_vm_readv": h_process_vm,
    "process_vm_writev": h_process_vm,
    "name_to_handle_at": h_name_to_handle,
    "open_by_handle_at": h_open_by_handle,
    "ioctl": h_ioctl,
    "dup": h_dup,
    "dup2": h_dup,
    "dup3": h_dup,
    "fcntl": h_dup,
    "close": h_close,
}
