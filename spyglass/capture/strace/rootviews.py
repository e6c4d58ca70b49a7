"""The file-system views of traced processes, as the strace parser maps them.

A process that ``chroot``-ed sees its absolute paths below that root, and its
children inherit it at a fork (:attr:`TraceState.chroots`, set by
:func:`.privs.h_chroot`).  A process that entered a mount namespace of its own
(``unshare``, ``setns``) may be named by ``-yy`` as that namespace sees it
(after a ``pivot_root``, ``/home/...`` for the host's ``/srv/x/home/...``): a
protected file opened there is looked at through the process's
``/proc/PID/root``.
"""

from __future__ import annotations

from spyglass.capture import ident
from spyglass.capture.strace.state import TraceState
from spyglass.events.schema import Event

#: the events of an open, whose file may be a protected one under another name
_OPENED = frozenset({"file.read", "file.write", "file.create"})


def inherit_root(st: TraceState, parent: int, child: int) -> None:
    """A new process's root is its parent's, if that one chrooted (an exited process's pid may be
    reused: a child of a parent that did not chroot has no root of its own)."""
    if st.chroots:
        root = st.chroots.get(parent)
        if root is not None:
            st.chroots[child] = root
        else:
            st.chroots.pop(child, None)


class ProtectedViews:
    """Names protected files under whatever name and view a traced process opened them."""

    def __init__(self, protected: ident.Identities) -> None:
        self.protected = protected  # protected files by device and inode (spyglass.capture.ident)
        self.own_views = False  # a process of the run entered a mount namespace of its own (unshare, setns)

    def identify(self, events: list[Event]) -> None:
        """A protected file opened under another name (a hard link: ``-yy`` already resolves symlinks
        and ``/proc/self/fd``) is recorded under its own path, the name as typed in ``raw_path``.

        Once a process of the run entered a mount namespace of its own, ``-yy`` may name a file as
        that namespace sees it (after a ``pivot_root``, ``/home/...`` for the host's ``/srv/x/home/...``):
        a name that is no protected file here is looked at through the process's ``/proc/PID/root``."""
        prot = self.protected
        for ev in events:
            t = ev.type
            if t in ident.CHANGES or (t == "sys.sensitive" and ev.syscall in ident.MOUNT_CALLS):
                prot.forget()
            elif t == "sys.sensitive" and ev.syscall in ("unshare", "setns") and ev.ok:
                self.own_views = True
            elif ev.ok and ev.path and t in _OPENED and ev.path[:1] == "/":
                canon = prot.by_path(ev.path)
                if canon is None and self.own_views:
                    canon = prot.by_path(f"/proc/{ev.pid}/root{ev.path}")
                if canon is not None and canon != ev.path:
                    if ev.raw_path is None:
                        ev.raw_path = ev.path
                    ev.path = canon
