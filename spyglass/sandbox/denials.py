"""``sandbox.denied`` events, derived from the failed system calls the sandbox caused.

The sandbox refuses by making calls fail; the capture backend records those
failures like any other.  This module recognises the ones that are the
sandbox's doing and adds an explicit ``sandbox.denied`` event right after the
failed call, attributed to the same process:

===================  ================================================  ==========
errno                where                                             reason
===================  ================================================  ==========
``EROFS``            any write outside the writable roots              read-only
``EBUSY``            removing or renaming a bind-mount point           read-only
``EACCES``           opening a file hidden by ``sandbox.hidden``       hidden
``ENOENT``           a path that exists on the host but is hidden      hidden
                     (real home, ``/run``, ``/home``, hidden dirs)
``ENETUNREACH``      connect/send outside the proxy: no route          no-route
``EPERM``            ``io_uring_*`` refused by the seccomp filter      io_uring
===================  ================================================  ==========

Paths in the derived event are host paths (for a hidden file: the real file
the agent went for).  It works on events in the sandbox's view, before
:class:`~spyglass.sandbox.pathmap.PathMap` rewrites them.
"""

from __future__ import annotations

import os

from spyglass.events import Event
from spyglass.sandbox.bwrap import HIDE_DIR, MASK_FILE
from spyglass.sandbox.pathmap import PathMap

_NET_TYPES = frozenset({"net.connect", "net.send", "net.bind"})
_MOVE_TYPES = frozenset({"file.delete", "file.rename"})

READ_ONLY = "read-only"
HIDDEN = "hidden"
NO_ROUTE = "no-route"
IO_URING = "io_uring"


class DenialDeriver:
    def __init__(self, pathmap: PathMap, *, dedupe_hidden: bool = True) -> None:
        self.pathmap = pathmap
        self.dedupe_hidden = dedupe_hidden
        self._seen_hidden: set[str] = set()
        self.counts: dict[str, int] = {}

    def derive(self, ev: Event) -> Event | None:
        """The ``sandbox.denied`` event for ``ev`` (sandbox view), or None."""
        if ev.ok or not ev.errno:
            return None
        err = ev.errno
        if ev.type in _NET_TYPES and err in ("ENETUNREACH", "EHOSTUNREACH") and ev.address is not None:
            return self._make(ev, NO_ROUTE, address=ev.address, port=ev.port)
        if err == "EPERM" and (ev.syscall or "").startswith("io_uring"):
            return self._make(ev, IO_URING)
        path = ev.path
        if path is None or not path.startswith("/"):
            return None
        if err == "EROFS":
            return self._make(ev, READ_ONLY, path=self.pathmap.to_host(path))
        mount = self.pathmap.covering(path)
        if mount is None:
            return None
        if err == "EBUSY" and ev.type in _MOVE_TYPES and mount.dest == path:
            return self._make(ev, READ_ONLY, path=self.pathmap.to_host(path))
        if err == "EACCES" and mount.kind == MASK_FILE and mount.dest == path:
            return self._make(ev, HIDDEN, path=path)
        hiding = mount.kind == HIDE_DIR or mount.role == "home"
        # the sandbox shows nothing there, the host has something: hidden
        if err in ("ENOENT", "ENOTDIR") and hiding and path != mount.dest and os.path.lexists(path):
            if self.dedupe_hidden:
                if path in self._seen_hidden:
                    return None
                self._seen_hidden.add(path)
            return self._make(ev, HIDDEN, path=path)
        return None

    def _make(
        self,
        ev: Event,
        reason: str,
        *,
        path: str | None = None,
        address: str | None = None,
        port: int | None = None,
    ) -> Event:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        return Event(
            type="sandbox.denied",
            ts=ev.ts,
            pid=ev.pid,
            tid=ev.tid,
            ok=False,
            errno=ev.errno,
            syscall=ev.syscall,
            path=path,
            address=address,
            port=port,
            transport=ev.transport if address is not None else None,
            reason=reason,
            detail=ev.type,
        )
