"""The new mount API (``fsopen``, ``fsconfig``, ``fsmount``, ``move_mount``, ``open_tree``, ``fspick``,
``mount_setattr``) -> ``sys.sensitive`` events, worded alike by both backends.

A mount made this way never calls ``mount(2)``: without these a root agent could mount (a bind
mount through ``open_tree(OPEN_TREE_CLONE)`` and ``move_mount``, a file system through ``fsopen`` and
``fsmount``) unrecorded.  ``file.path`` is the path argument (``open_tree``'s source, ``move_mount``'s
target, ``fspick``'s and ``mount_setattr``'s mount) when one is given; ``fsconfig`` says its key and,
for a string or path, the value (``lowerdir=...``).  ``pivot_root`` is worded here too.
"""

from __future__ import annotations

from typing import Final

NEW_MOUNT_CALLS: Final = ("open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr")

#: fsconfig's commands (linux/mount.h)
FSCONFIG_CMDS: Final[dict[int, str]] = {
    0: "FSCONFIG_SET_FLAG", 1: "FSCONFIG_SET_STRING", 2: "FSCONFIG_SET_BINARY", 3: "FSCONFIG_SET_PATH",
    4: "FSCONFIG_SET_PATH_EMPTY", 5: "FSCONFIG_SET_FD", 6: "FSCONFIG_CMD_CREATE", 7: "FSCONFIG_CMD_RECONFIGURE",
    8: "FSCONFIG_CMD_CREATE_EXCL",
}  # fmt: skip
FSCONFIG_NUMBERS: Final[dict[str, int]] = {v: k for k, v in FSCONFIG_CMDS.items()}
OPEN_TREE_CLONE: Final = 1


def fsconfig_detail(cmd: int, key: str | None, value: str | None) -> str:
    """``fsconfig lowerdir=/a:/b`` (a string or path), ``fsconfig ro`` (a flag), else the command
    (``fsconfig FSCONFIG_CMD_CREATE``) and the key when there is one."""
    if cmd in (1, 3) and key:
        return f"fsconfig {key}={value or ''}"
    if cmd == 0 and key:
        return f"fsconfig {key}"
    return f"fsconfig {FSCONFIG_CMDS.get(cmd, f'cmd {cmd}')}" + (f" {key}" if key else "")


def mount_call_detail(name: str, *, fs: str | None = None, clone: bool = False) -> str:
    """The detail of the calls but ``fsconfig``: ``fsopen tmpfs``, ``open_tree clone``, ``move_mount``."""
    if name == "fsopen":
        return f"fsopen {fs or '?'}"
    if name == "open_tree" and clone:
        return "open_tree clone"
    return name


def pivot_root_detail(new_root: str, put_old: str) -> str:
    """``pivot_root NEW OLD`` as typed.  The call makes NEW the root of the caller's mount namespace; it
    is recorded, not followed as a change of root as ``chroot`` is (docs/threat-model.md says why)."""
    return f"pivot_root {new_root} {put_old}"
