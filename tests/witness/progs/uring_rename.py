"""``python uring_rename.py OLD NEW``: rename OLD to NEW with io_uring (IORING_OP_RENAMEAT), no
rename(2): the capture sees ``io_uring_setup`` and, under eBPF, the submitted operation only."""

from __future__ import annotations

import ctypes
import mmap
import os
import struct
import sys

SETUP, ENTER = 425, 426  # x86_64
OP_RENAMEAT, AT_FDCWD, GETEVENTS = 35, -100, 1


def main() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(SETUP, 4, params)
    if fd < 0:
        print(f"io_uring_setup: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 2
    sq_entries = struct.unpack_from("<I", params, 0)[0]
    _head, tail, mask, _entries, _flags, _dropped, array = struct.unpack_from("<7I", params, 40)
    cq_head, cq_tail, cq_mask, _cq_entries, _overflow, cqes = struct.unpack_from("<6I", params, 80)
    ring = mmap.mmap(fd, max(array + sq_entries * 4, cqes + 16 * 2 * sq_entries), offset=0)
    cq = mmap.mmap(fd, cqes + 16 * 2 * sq_entries, offset=0x8000000)
    sqes = mmap.mmap(fd, 64 * sq_entries, offset=0x10000000)
    old, new = (ctypes.create_string_buffer(os.fsencode(p)) for p in sys.argv[1:3])
    sqe = bytearray(64)
    struct.pack_into("<BBHiQQIIQ", sqe, 0, OP_RENAMEAT, 0, 0, AT_FDCWD, ctypes.addressof(new),
                     ctypes.addressof(old), AT_FDCWD & 0xFFFFFFFF, 0, 7)
    sqes[0:64] = bytes(sqe)
    t = struct.unpack_from("<I", ring, tail)[0]
    struct.pack_into("<I", ring, array + 4 * (t & struct.unpack_from("<I", ring, mask)[0]), 0)
    struct.pack_into("<I", ring, tail, t + 1)
    if libc.syscall(ENTER, fd, 1, 1, GETEVENTS, None, 0) < 0:
        print(f"io_uring_enter: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 2
    h = struct.unpack_from("<I", cq, cq_head)[0]
    assert struct.unpack_from("<I", cq, cq_tail)[0] != h
    res = struct.unpack_from("<Qi", cq, cqes + 16 * (h & struct.unpack_from("<I", cq, cq_mask)[0]))[1]
    if res < 0:
        print(f"renameat: {os.strerror(-res)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
