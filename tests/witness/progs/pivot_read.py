"""The run's agent for tests/witness/test_pivot_root_view.py (root): ``pivot_read.py NEWROOT NAME``
enters a mount namespace of its own, makes NEWROOT its root (a bind mount of it, ``pivot_root``),
then reads NAME as it sees it there and prints it.  A refused call is a failed test."""

from __future__ import annotations

import ctypes
import os
import sys
import time

CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE, SYS_PIVOT_ROOT = 0x20000, 0x1000, 0x4000, 0x40000, 155

libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        raise SystemExit(f"{what} failed: {os.strerror(ctypes.get_errno())}")


new, name = sys.argv[1], sys.argv[2]
_check(libc.unshare(CLONE_NEWNS), "unshare")
_check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
_check(libc.mount(new.encode(), new.encode(), None, MS_BIND, None), "mount --bind")
os.makedirs(os.path.join(new, "old"), exist_ok=True)
os.chdir(new)
_check(libc.syscall(SYS_PIVOT_ROOT, b".", b"old"), "pivot_root")
os.chdir("/")
with open(name) as f:
    sys.stdout.write(f.read())
    sys.stdout.flush()
    # still here while the capture parses the open: under strace the file is looked at through this
    # process's /proc/PID/root, which goes with it (a process that exits at once is a known gap:
    # docs/threat-model.md); the test ends the wait (at most 10 s) when spyglass printed the alert
    if len(sys.argv) > 3:
        for _ in range(1000):
            if os.path.exists(sys.argv[3]):
                break
            time.sleep(0.01)
