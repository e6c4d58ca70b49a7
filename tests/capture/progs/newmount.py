"""The run's agent for tests/capture/test_newmount.py: mounts with the new mount API (as root).

``tmpfs TARGET``: fsopen("tmpfs"), fsconfig (a string, then create), fsmount, move_mount onto
TARGET, fspick of it, a file written there, then umount.  ``clone SOURCE TARGET``: open_tree(OPEN_TREE_CLONE)
of SOURCE (a bind mount made without mount(2)), mount_setattr read-only, move_mount onto TARGET,
a file read through it, umount.  Each step checks its result: a refused call is a failed test.
"""

from __future__ import annotations

import ctypes
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_FSOPEN, SYS_FSCONFIG, SYS_FSMOUNT, SYS_FSPICK = 428, 429, 430, 431, 432, 433
SYS_MOUNT_SETATTR = 442
AT_FDCWD = -100
FSCONFIG_SET_STRING, FSCONFIG_CMD_CREATE = 1, 6
MOVE_MOUNT_F_EMPTY_PATH = 0x4
OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC = 1, 0o2000000
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1


def _call(nr: int, *args: object) -> int:
    ret = int(libc.syscall(nr, *args))
    if ret < 0:
        raise SystemExit(f"syscall {nr} failed: {os.strerror(ctypes.get_errno())}")
    return ret


def main() -> None:
    if sys.argv[1] == "tmpfs":
        target = sys.argv[2].encode()
        fs = _call(SYS_FSOPEN, b"tmpfs", 0)
        _call(SYS_FSCONFIG, fs, FSCONFIG_SET_STRING, b"size", b"1m", 0)
        _call(SYS_FSCONFIG, fs, FSCONFIG_CMD_CREATE, None, None, 0)
        mnt = _call(SYS_FSMOUNT, fs, 0, 0)
        _call(SYS_MOVE_MOUNT, mnt, b"", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH)
        os.close(mnt)  # an open mount descriptor keeps the mount busy
        os.close(fs)
        os.close(_call(SYS_FSPICK, AT_FDCWD, target, 1))  # its configuration context (FSPICK_CLOEXEC)
        with open(os.path.join(sys.argv[2], "f"), "w") as f:
            f.write("x")
    else:
        source, target = sys.argv[2].encode(), sys.argv[3].encode()
        tree = _call(SYS_OPEN_TREE, AT_FDCWD, source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)

        class Attr(ctypes.Structure):
            _fields_ = [("set", ctypes.c_uint64), ("clr", ctypes.c_uint64), ("prop", ctypes.c_uint64),
                        ("userns", ctypes.c_uint64)]

        attr = Attr(MOUNT_ATTR_RDONLY, 0, 0, 0)
        _call(SYS_MOUNT_SETATTR, tree, b"", 0x1000 | AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr))
        _call(SYS_MOVE_MOUNT, tree, b"", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH)
        os.close(tree)
        with open(os.path.join(sys.argv[3], "notes.txt")) as f:
            f.read()
    if libc.umount2(target, 0) != 0:
        raise SystemExit(f"umount failed: {os.strerror(ctypes.get_errno())}")


if __name__ == "__main__":
    main()
