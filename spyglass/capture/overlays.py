"""Files reached through an overlay mount the run made, recorded under their own path.

An overlay names its files under its mount point and gives them its own device, so a secret read
through ``mount -t overlay -o lowerdir=$HOME/.ssh overlay /mnt`` would be a read of ``/mnt/id_rsa``
(a bind mount needs nothing of this: the kernel names the file by its own path).  Both backends
hand the mounts they see (target, the mount's data) to :class:`Overlays`; a file event below a
mount point is then given the path the file has in the layer that holds it (the upper layer
first, then the lower ones in order), the name as typed kept in ``raw_path``, so the rules judge
the file itself.  The layer is looked up when the event is decoded.  Not covered: an overlay made
with the new mount API (``fsopen``/``fsconfig``/``fsmount``), which neither backend traces.
"""

from __future__ import annotations

import os
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


class Overlays:
    """The overlay mounts of a run (mount point -> its layers) and the real path of a file below one."""

    __slots__ = ("mounts",)

    def __init__(self) -> None:
        self.mounts: dict[str, list[str]] = {}

    def __bool__(self) -> bool:
        return bool(self.mounts)

    def mounted(self, target: str, data: str | None, cwd: str) -> None:
        found = layers(data, cwd) if data else []
        if found:
            self.mounts[os.path.normpath(target)] = found
        else:
            self.mounts.pop(os.path.normpath(target), None)  # something else mounted over it

    def unmounted(self, target: str) -> None:
        self.mounts.pop(os.path.normpath(target), None)

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
