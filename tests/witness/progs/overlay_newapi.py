"""The run's agent for tests/witness/test_overlay_new_mount_api.py (root): an overlay made with the
new mount API, never mount(2), and a file read through it.

``overlay_newapi.py HOW LOWER EMPTY TARGET NAME``: fsopen("overlay"), its lower layers LOWER and
EMPTY set with fsconfig, fsmount, move_mount onto TARGET, TARGET/NAME read and printed, umount.
HOW says how the layers are given and who moves the mount: ``string`` (``lowerdir=LOWER:EMPTY``,
LOWER relative to the working directory), ``fd`` (``lowerdir+`` twice, each an ``O_PATH``
descriptor, ``FSCONFIG_SET_FD``), ``child`` (as ``string``, the mount moved into place and the file
read by a forked child), ``detached`` (as ``string``, the file opened relative to the mount
descriptor, never moved anywhere), ``procfd`` (as ``detached``, through ``/proc/self/fd/N/NAME``),
``tree`` (no overlay: a detached copy of LOWER made with ``open_tree(OPEN_TREE_CLONE)``, the file
opened relative to it).  A refused call is a failed test."""

from __future__ import annotations

import ctypes
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_FSOPEN, SYS_FSCONFIG, SYS_FSMOUNT = 428, 429, 430, 431, 432
OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC = 1, 0o2000000
AT_FDCWD = -100
FSCONFIG_SET_STRING, FSCONFIG_SET_FD, FSCONFIG_CMD_CREATE = 1, 5, 6
MOVE_MOUNT_F_EMPTY_PATH = 0x4


def _call(nr: int, *args: object) -> int:
    ret = int(libc.syscall(nr, *args))
    if ret < 0:
        raise SystemExit(f"syscall {nr} failed: {os.strerror(ctypes.get_errno())}")
    return ret


def _place_and_read(mnt: int, target: str, name: str) -> None:
    _call(SYS_MOVE_MOUNT, mnt, b"", AT_FDCWD, target.encode(), MOVE_MOUNT_F_EMPTY_PATH)
    os.close(mnt)  # an open mount descriptor keeps the mount busy
    with open(os.path.join(target, name)) as f:
        sys.stdout.write(f.read())
    if libc.umount2(target.encode(), 0) != 0:
        raise SystemExit(f"umount failed: {os.strerror(ctypes.get_errno())}")


def _read_below(mnt: int, name: str) -> None:
    fd = os.open(name, os.O_RDONLY, dir_fd=mnt)
    sys.stdout.write(os.read(fd, 4096).decode())
    os.close(fd)


def main() -> None:
    how, lower, empty, target, name = sys.argv[1:6]
    if how == "tree":
        _read_below(_call(SYS_OPEN_TREE, AT_FDCWD, lower.encode(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC), name)
        return
    fs = _call(SYS_FSOPEN, b"overlay", 0)
    if how == "fd":
        for layer in (lower, empty):
            dfd = os.open(layer, os.O_PATH | os.O_DIRECTORY)
            _call(SYS_FSCONFIG, fs, FSCONFIG_SET_FD, b"lowerdir+", None, dfd)
            os.close(dfd)
    else:
        os.chdir(os.path.dirname(lower))
        value = f"{os.path.basename(lower)}:{empty}"
        _call(SYS_FSCONFIG, fs, FSCONFIG_SET_STRING, b"lowerdir", value.encode(), 0)
    _call(SYS_FSCONFIG, fs, FSCONFIG_CMD_CREATE, None, None, 0)
    mnt = _call(SYS_FSMOUNT, fs, 0, 0)
    os.close(fs)
    if how == "detached":
        _read_below(mnt, name)
        return
    if how == "procfd":
        with open(f"/proc/self/fd/{mnt}/{name}") as f:
            sys.stdout.write(f.read())
        return
    if how != "child":
        _place_and_read(mnt, target, name)
        return
    pid = os.fork()
    if pid == 0:
        try:
            _place_and_read(mnt, target, name)
        finally:
            sys.stdout.flush()
            os._exit(0)
    os.close(mnt)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise SystemExit(f"child failed: {status}")


if __name__ == "__main__":
    main()
