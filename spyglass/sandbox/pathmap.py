"""Map paths as the sandbox sees them back to the host's paths.

The capture backend traces from outside but decodes path arguments as the
sandboxed process wrote them, in the sandbox's view.  Most mounts bind a host
path at the same place, so nothing changes; three do not:

* the decoy home, mounted at the real ``$HOME`` path: ``~/.ssh/id_rsa``
  inside is ``<run>/sandbox/home/.ssh/id_rsa`` on the host (and entries
  passed through with ``sandbox.pass_home`` are the real ones again);
* the private ``/tmp`` and ``/var/tmp``: directories of the run on the host;
* the relay and proxy socket under ``/run/spyglass``.

Hidden trees, ``/proc`` and ``/dev`` have no host counterpart: their paths
are kept as written (a read of a hidden ``/home/bob/.ssh/id_rsa`` is reported
with that path: it is what the agent went for).

An event whose path changed keeps the sandbox's spelling in ``raw_path``
(unless the backend already put the program's own argument there).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from spyglass.events import Event
from spyglass.sandbox.bwrap import BIND, RO_BIND, Mount


class PathMap:
    def __init__(self, mounts: Sequence[Mount]) -> None:
        # last mount first: the one mounted last covers the others
        self._mounts = list(reversed(mounts))

    def covering(self, path: str) -> Mount | None:
        """The mount that decides what ``path`` is inside the sandbox."""
        for m in self._mounts:
            d = m.dest
            if path == d or d == "/" or path.startswith(d + "/"):
                return m
        return None

    def to_host(self, path: str) -> str:
        if not path.startswith("/"):
            return path
        m = self.covering(path)
        if m is None or m.kind not in (BIND, RO_BIND) or m.src is None or m.src == m.dest:
            return path
        if path == m.dest:
            return m.src
        return m.src.rstrip("/") + path[len(m.dest) :]

    def to_sandbox(self, host_path: str) -> str:
        """The inverse, for paths under a remapped mount (used in tests and docs)."""
        for m in self._mounts:
            if m.kind in (BIND, RO_BIND) and m.src and m.src != m.dest:
                s = m.src.rstrip("/")
                if host_path == s or host_path.startswith(s + "/"):
                    inside = m.dest + host_path[len(s) :]
                    if self.covering(inside) is m:
                        return inside
        return host_path

    def map_event(self, ev: Event) -> Event:
        """Rewrite the event's paths in place (``path``, ``target``, ``exe``, ``cwd``)."""
        if ev.path is not None:
            host = self.to_host(ev.path)
            if host != ev.path:
                self._fix_raw(ev, "file.path", ev.path, host)
                if ev.raw_path is None:
                    ev.raw_path = ev.path
                ev.path = host
        if ev.target is not None:
            host = self.to_host(ev.target)
            if host != ev.target:
                self._fix_raw(ev, "file.target", ev.target, host)
                ev.target = host
        if ev.exe is not None:
            ev.exe = self.to_host(ev.exe)
        if ev.cwd is not None:
            ev.cwd = self.to_host(ev.cwd)
        return ev

    @staticmethod
    def _fix_raw(ev: Event, wire: str, old: str, new: str) -> None:
        """Keep the exact bytes of a non-UTF-8 path in step with its new prefix."""
        if not ev.raw_bytes or wire not in ev.raw_bytes:
            return
        raw = base64.b64decode(ev.raw_bytes[wire])
        suffix = len(_common_suffix(old, new))  # the part below the mount point, unchanged
        prefix_old, prefix_new = old[: len(old) - suffix], new[: len(new) - suffix]
        pb = prefix_old.encode()
        if raw.startswith(pb):
            raw = prefix_new.encode() + raw[len(pb) :]
            ev.raw_bytes = {**ev.raw_bytes, wire: base64.b64encode(raw).decode()}


def _common_suffix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return a[len(a) - n :] if n else ""
