"""Directories the run mounted elsewhere (a bind mount, a moved mount), as the trace showed them.

A bind mount of the store, or of a directory above it, makes its files reachable under another
name; the kernel names a file opened through it by that name (``/mnt/x/runs/R/run.json``), not the
store's.  :meth:`Protected.in_mounts` judges such a name in the writer's own mounts, by device and
inode, which needs a process of that mount namespace alive when the write is judged: a writer that
exits at once, in a namespace whose every process is gone too (``unshare -m sh -c 'mount --bind
STORE /mnt/x && sh -c "echo > /mnt/x/..."'``), leaves nobody to look through.  So each mount of
the run whose source is a directory (the capture gives it as the event's ``file.target``) is kept,
mount point -> directory, and a name below a mount point is judged as the same name below the
directory too (chains of them: a bind moved elsewhere with ``mount --move``), when the writer is
gone (a live writer's own view is judged by ``in_mounts``).  Pessimistic by design: which namespace
the gone writer was in is not known, so a name below the mount point is taken so whatever it was
(a benign name there would have to spell a protected file's path below the directory mounted), and
nothing is forgotten at an unmount (a copy of the mount may live on in another namespace).
"""

from __future__ import annotations

import os

#: mount points kept at most (a run making more is judged by the first ones only)
BINDS_MAX = 256
#: mount points followed one into the other at most (a bind of a bind of a bind ...)
DEPTH = 4


class Binds:
    """Mount point -> the directory mounted there, for the run's mounts of a directory."""

    def __init__(self) -> None:
        self.points: dict[str, str] = {}
        #: the source of each process's last ``open_tree(OPEN_TREE_CLONE)``, and the run's last one
        self._clones: dict[int, str] = {}
        self._clone: str | None = None

    def new_api(self, pid: int, call: str, path: str, clone: bool) -> None:
        """The new mount API: a copy of a tree (``open_tree`` clone, ``path`` its source) put at
        ``path`` by ``move_mount``.  Which descriptor was moved is not in the event: taken to be the
        mover's last copy, else the run's (a child may move its parent's); pessimistic, as the rest."""
        if call == "open_tree":
            if clone:
                self._clones[pid] = self._clone = path
            return
        source = self._clones.get(pid) or self._clone
        if source is not None:
            self.mounted(path, source)

    def mounted(self, point: str, source: str) -> None:
        point, source = os.path.normpath(point), os.path.normpath(source)
        if point != source and source.startswith("/") and len(self.points) < BINDS_MAX:
            self.points[point] = source

    def names(self, path: str) -> list[str]:
        """The other names ``path`` may have through the run's mounts (none: no mount point above it)."""
        if not self.points:
            return []
        out: list[str] = []
        todo = [os.path.normpath(path)]
        for _ in range(DEPTH):
            nxt = []
            for p in todo:
                for point, source in self.points.items():
                    if p == point or p.startswith(point + "/"):
                        other = source + p[len(point):] if source != "/" else p[len(point):] or "/"
                        if other not in out and other != path:
                            out.append(other)
                            nxt.append(other)
            if not nxt:
                break
            todo = nxt
        return out
