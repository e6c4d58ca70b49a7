"""Files reached through an overlay mount the run made, recorded under their own path.

An overlay names its files under its mount point and gives them its own device, so a secret read
through ``mount -t overlay -o lowerdir=$HOME/.ssh overlay /mnt`` would be a read of ``/mnt/id_rsa``
(a bind mount needs nothing of this: the kernel names the file by its own path).  Both backends
hand the mounts they see (target, the mount's data) to :class:`Overlays`; a file event below a
mount point is then given the path the file has in the layer that holds it (the upper layer
first, then the lower ones in order), the name as typed kept in ``raw_path``, so the rules judge
the file itself.  The layer is looked up when the event is decoded.

An overlay made with the new mount API is followed the same way: ``fsopen("overlay")`` starts a
context, each ``fsconfig`` of ``lowerdir``, ``lowerdir+`` or ``upperdir`` (a string or path, made
absolute against the caller's directory, or a descriptor, ``FSCONFIG_SET_FD``) adds its layers,
``fsmount`` turns the context into a mount descriptor and ``move_mount`` of that descriptor puts
the overlay at its target.  Descriptors are known per process (copied at a fork); a mount
descriptor the process got another way (passed over a socket, ``pidfd_getfd``) is taken to be the
run's last overlay made with ``fsmount``.  A mount descriptor need not be moved anywhere to be
read through: ``openat(mntfd, "id_rsa")`` opens a file of the detached mount, which the kernel
names from that mount's own root (``/id_rsa``, and the eBPF program's walk ends there with no
name).  A path relative to the descriptor of a detached overlay (``fsmount``) or a detached copy
of a tree (``open_tree(OPEN_TREE_CLONE)``) is given the path it has in the layers, or below the
tree's source (:meth:`Overlays.below`), and so is a path through the descriptor
(``/proc/self/fd/N/id_rsa``, ``/dev/fd/N/...``: :meth:`Overlays.through_fd`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from spyglass.events.schema import Event


def _split(text: str, sep: str, *, unescape: bool = True) -> list[str]:
    """``text`` split at ``sep`` not escaped with a backslash, the escapes removed (or kept, for a
    second split of the parts)."""
    out: list[str] = []
    cur: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            cur.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
            if not unescape:
                cur.append(ch)
        elif ch == sep:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def layers(data: str, cwd: str) -> list[str]:
    """The directories of an overlay's mount data, in the order a lookup goes (upper, then the
    lower ones), made absolute against ``cwd``; empty when ``data`` is no overlay's."""
    opts: dict[str, str] = {}
    for opt in _split(data, ",", unescape=False):
        key, eq, value = opt.partition("=")
        if eq:
            opts[key] = value
    if "lowerdir" not in opts:
        return []
    dirs = _split(opts["upperdir"], "\0") if opts.get("upperdir") else []
    dirs += [d for d in _split(opts["lowerdir"], ":") if d]
    return [os.path.normpath(os.path.join(cwd, d)) for d in dirs]


#: a path through a descriptor: /proc/self/fd/N/..., /proc/PID[/task/TID]/fd/N/..., /dev/fd/N/...
_THROUGH_FD = re.compile(r"/(?:proc/(self|thread-self|\d+)(?:/task/\d+)?|dev)/fd/(\d+)(?:/(.*))?")


def lower_dirs(value: str) -> list[str]:
    """The directories of a ``lowerdir`` value (``:`` between them, ``\\:`` inside a name; the
    data-only layers after ``::`` included)."""
    return [d for d in _split(value, ":") if d]


class Overlays:
    """The overlay mounts of a run (mount point -> its layers) and the real path of a file below one."""

    __slots__ = ("_contexts", "_detached", "mounts", "roots")

    def __init__(self) -> None:
        self.mounts: dict[str, list[str]] = {}
        # the new mount API: (pid, fd) of an overlay's fsopen context -> (upper, lower layers), and
        # (pid, fd) of an overlay's fsmount descriptor -> its layers in lookup order
        self._contexts: dict[tuple[int, int], tuple[list[str], list[str]]] = {}
        self._detached: dict[tuple[int, int], list[str]] = {}
        # (pid, fd) of a detached mount (an overlay's fsmount, an open_tree clone) -> the directories
        # a path relative to it is looked up in
        self.roots: dict[tuple[int, int], list[str]] = {}

    def __bool__(self) -> bool:
        return bool(self.mounts)

    @property
    def by_fd(self) -> bool:
        """Overlay contexts or mount descriptors known by (pid, fd): a fork copies them."""
        return bool(self._contexts or self._detached or self.roots)

    def mounted(self, target: str, data: str | None, cwd: str) -> None:
        found = layers(data, cwd) if data else []
        if found:
            self.mounts[os.path.normpath(target)] = found
        else:
            self.mounts.pop(os.path.normpath(target), None)  # something else mounted over it

    def unmounted(self, target: str) -> None:
        self.mounts.pop(os.path.normpath(target), None)

    # --- the new mount API (fsopen, fsconfig, fsmount, move_mount) --------------------------------

    def fs_opened(self, pid: int, fd: int, fs: str | None) -> None:
        """``fsopen`` returned ``fd``: an overlay's context starts (anything else's is no overlay)."""
        self._detached.pop((pid, fd), None)
        if fs == "overlay":
            self._contexts[(pid, fd)] = ([], [])
        else:
            self._contexts.pop((pid, fd), None)

    def fs_configured(self, pid: int, fd: int, key: str | None, value: str | None, cwd: str) -> None:
        """A successful ``fsconfig`` of ``key`` to ``value`` (a path; for ``FSCONFIG_SET_FD`` the
        path the descriptor names) on context ``fd``."""
        ctx = self._contexts.get((pid, fd))
        if ctx is None or not key or not value:
            return
        upper, lower = ctx
        if key == "upperdir":
            upper[:] = [os.path.normpath(os.path.join(cwd, value))]
        elif key == "lowerdir":
            lower[:] = [os.path.normpath(os.path.join(cwd, d)) for d in lower_dirs(value)]
        elif key == "lowerdir+":  # one layer more (datadir+ adds a data-only one, never looked up by name)
            lower.append(os.path.normpath(os.path.join(cwd, value)))

    def fs_mounted(self, pid: int, ctx_fd: int, mnt_fd: int) -> None:
        """``fsmount`` of context ``ctx_fd`` returned the mount descriptor ``mnt_fd``."""
        ctx = self._contexts.get((pid, ctx_fd))
        dirs = ctx[0] + ctx[1] if ctx is not None and ctx[1] else []
        self._detached.pop((pid, mnt_fd), None)  # newest last: the guess for a descriptor passed in
        self._detached[(pid, mnt_fd)] = dirs
        self._rooted(pid, mnt_fd, dirs)

    def tree_opened(self, pid: int, fd: int, clone_of: str | None) -> None:
        """``open_tree`` returned ``fd``: a mount descriptor of no overlay (an empty list: known);
        ``clone_of`` is the tree's source when it is a detached copy."""
        self._detached[(pid, fd)] = []
        self._rooted(pid, fd, [os.path.normpath(clone_of)] if clone_of else [])

    def _rooted(self, pid: int, fd: int, dirs: list[str]) -> None:
        if dirs:
            self.roots[(pid, fd)] = dirs
        else:
            self.roots.pop((pid, fd), None)

    def below(self, pid: int, fd: int, raw: str) -> str | None:
        """The path of ``raw`` relative to the detached mount ``fd`` of ``pid`` (None: ``fd`` is
        none, or ``raw`` is absolute): in the first of its directories that holds it, else the
        first (where a file made there goes); a ``..`` stops at the mount's root, as in the kernel."""
        dirs = self.roots.get((pid, fd))
        if not dirs or raw[:1] == "/":
            return None
        rel = os.path.normpath("/" + raw)
        rel = "" if rel == "/" else rel
        for d in dirs:
            if os.path.lexists(d + rel):
                return d + rel
        return dirs[0] + rel

    def moved(self, pid: int, from_fd: int, from_path: str | None, target: str) -> None:
        """A successful ``move_mount`` to ``target``, of the mount descriptor ``from_fd`` (an empty
        ``from_path``) or of the mount at ``from_path``."""
        if from_path:  # a mount moved from one place to another
            found = self.mounts.pop(os.path.normpath(from_path), None)
            self.mounted(target, None, "/")
            if found is not None:
                self.mounts[os.path.normpath(target)] = found
            return
        found = self._detached.get((pid, from_fd))
        if found is None:  # a descriptor the process was given: the run's last overlay made, if any
            found = next((dirs for dirs in reversed(self._detached.values()) if dirs), None)
        self.mounted(target, None, "/")
        if found:
            self.mounts[os.path.normpath(target)] = list(found)

    def through_fd(self, pid: int, path: str) -> str | None:
        """:meth:`below` for a path through a descriptor of a detached mount (``/proc/self/fd/N/x``
        opened by ``pid``, or ``/proc/PID/fd/N/x`` of another process of the run); else None."""
        m = _THROUGH_FD.fullmatch(path)
        if m is None:
            return None
        who = m.group(1)
        owner = int(who) if who is not None and who.isdigit() else pid
        return self.below(owner, int(m.group(2)), m.group(3) or "")

    def forked(self, parent: int, child: int) -> None:
        """A child inherits its parent's descriptors, the overlay contexts and mounts among them
        (and none of an exited process that had its pid)."""
        for table in (self._contexts, self._detached, self.roots):
            for key in [k for k in table if k[0] == child]:
                del table[key]
        for (pid, fd), ctx in list(self._contexts.items()):
            if pid == parent:
                self._contexts[(child, fd)] = ctx  # one context: a layer the child adds is the parent's too
        for table in (self._detached, self.roots):
            for (pid, fd), dirs in list(table.items()):
                if pid == parent:
                    table[(child, fd)] = dirs

    def real(self, path: str) -> str | None:
        """The path of the file ``path`` names in its overlay's layers (None: not below an overlay
        of the run, or in none of its layers)."""
        for target in sorted(self.mounts, key=len, reverse=True):
            if path == target or path.startswith(target + "/"):
                rel = path[len(target):]
                for layer in self.mounts[target]:
                    if os.path.lexists(layer + rel):
                        return layer + rel
                return None
        return None

    def apply(self, events: Iterable[Event]) -> None:
        """File events below an overlay get the file's own path, the typed name in ``raw_path``."""
        for ev in events:
            path = ev.path
            if path and ev.type.startswith("file.") and path[:1] == "/":
                real = self.real(path)
                if real is not None and real != path:
                    if ev.raw_path is None:
                        ev.raw_path = path
                    ev.path = real
