"""The run's agent for tests/witness/test_link_by_descriptor.py: ``link_fd.py FILE NEW`` opens FILE
with ``O_PATH`` (nothing read) and gives it the name NEW with ``linkat(fd, "", AT_FDCWD, NEW,
AT_EMPTY_PATH)`` (root: the call needs CAP_DAC_READ_SEARCH).  A refused call is a failed test."""

from __future__ import annotations

import ctypes
import os
import sys

AT_FDCWD, AT_EMPTY_PATH = -100, 0x1000

libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(sys.argv[1], os.O_PATH)
if libc.linkat(fd, b"", AT_FDCWD, os.fsencode(sys.argv[2]), AT_EMPTY_PATH) != 0:
    raise SystemExit(f"linkat failed: {os.strerror(ctypes.get_errno())}")
os.close(fd)
