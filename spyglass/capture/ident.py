"""Protected files known by device and inode, whatever name reaches them.

A secret or the signing key read through a symlink, a hard link or a
``/proc/self/fd/N/...`` path must be recorded as that file, not as the name
typed.  The session gives the capture a map of (device, inode) to the
canonical path of each protected file (``LaunchSpec.options["protected_ids"]``,
collected at start); an open that reached one of them gets the canonical path
in ``path`` and keeps the name as typed in ``raw_path``.

* eBPF: the program reads the new descriptor's inode at the open's return
  (``Record.f_dev``/``f_ino``): one dict lookup per open, no race.
* strace: ``-yy`` already prints the kernel's path of the returned
  descriptor (symlinks and ``/proc/self/fd`` resolved), which leaves hard
  links: the opened path is stat-ed once and memoised; any link, rename,
  delete, symlink or mount event forgets the memo (a file bind-mounted over
  a name read before is named by the mount point).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

FileId = tuple[int, int]
#: paths whose identity is remembered at most (then the memo starts afresh)
MEMO_MAX = 50_000
#: event types after which a remembered identity may be wrong
CHANGES = frozenset({"file.link", "file.rename", "file.delete", "file.symlink"})
#: calls (``sys.sensitive`` events) that put a file system or a bind mount of a file over a name, or
#: take one off: what the name reaches changes with no rename
MOUNT_CALLS = frozenset({"mount", "umount", "umount2", "move_mount", "fsmount", "open_tree", "mount_setattr",
                         "pivot_root", "chroot"})


def kernel_dev(dev: int) -> int:
    """The kernel's ``dev_t`` (major << 20 | minor) as ``stat`` gives it (``st_dev``)."""
    return os.makedev(dev >> 20, dev & 0xFFFFF)


class Identities:
    def __init__(self, ids: Mapping[FileId, str]) -> None:
        self.ids = dict(ids)
        self.names = frozenset(self.ids.values())
        self._memo: dict[str, str | None] = {}

    def by_kernel_id(self, dev: int, ino: int) -> str | None:
        if not ino:
            return None
        return self.ids.get((kernel_dev(dev), ino))

    def by_path(self, path: str) -> str | None:
        """The protected file ``path`` names (hard links included), memoised per path."""
        if path in self.names:
            return path
        memo = self._memo
        if path in memo:
            return memo[path]
        try:
            st = os.stat(path)
            hit = self.ids.get((st.st_dev, st.st_ino))
        except (OSError, ValueError):
            hit = None
        if len(memo) >= MEMO_MAX:
            memo.clear()
        memo[path] = hit
        return hit

    def forget(self) -> None:
        self._memo.clear()


def from_options(opts: Mapping[str, object]) -> Identities | None:
    raw = opts.get("protected_ids")
    if not isinstance(raw, Mapping) or not raw:
        return None
    return Identities(raw)
