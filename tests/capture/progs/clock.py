"""The run's agent for tests/capture/test_clock.py: ``set`` plays an agent setting the clock,
``read`` a program that only reads it.

Safe for the machine it runs on: the successful sets are ``clock_settime`` to the time just
read (the clock steps back by microseconds) and an ``ADJ_SETOFFSET`` of zero; the
``adjtimex``/``settimeofday`` sets are made by a child that dropped to uid 65534, where the
kernel refuses them (EPERM) before looking further.
The reads pass a zeroed buffer larger than ``struct timex`` with modes 0 or ADJ_OFFSET_SS_READ.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
ADJ_SETOFFSET = 0x0100
ADJ_OFFSET_SS_READ = 0xA001
CLOCK_REALTIME = 0
SYS_SETTIMEOFDAY = 164  # x86_64
SYS_ADJTIMEX = 159


def _timex(modes: int) -> ctypes.Array[ctypes.c_char]:
    buf = ctypes.create_string_buffer(512)  # struct __kernel_timex is 208 bytes on x86_64
    ctypes.c_uint.from_buffer(buf).value = modes
    return buf


class Timeval(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("usec", ctypes.c_long)]


def refused_sets() -> None:
    """In a child without the right to: every call fails with EPERM and changes nothing."""
    pid = os.fork()
    if pid == 0:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
        assert libc.adjtimex(_timex(ADJ_SETOFFSET)) == -1 and ctypes.get_errno() == 1  # glibc: clock_adjtime
        assert libc.syscall(SYS_ADJTIMEX, _timex(ADJ_SETOFFSET)) == -1 and ctypes.get_errno() == 1
        tv = Timeval(int(time.time()), 0)  # the system call itself: glibc's settimeofday is clock_settime
        assert libc.syscall(SYS_SETTIMEOFDAY, ctypes.byref(tv), None) == -1 and ctypes.get_errno() == 1
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert status == 0, status


def main() -> None:
    what = sys.argv[1]
    if what == "set":
        refused_sets()
        time.clock_settime(time.CLOCK_REALTIME, time.time())  # the clock set to now: a step of microseconds
        # a step by an offset of zero: a fresh zeroed struct (the kernel writes the current time back
        # into it, and a second ADJ_SETOFFSET with that struct would add the whole time again)
        assert libc.adjtimex(_timex(ADJ_SETOFFSET)) >= 0, ctypes.get_errno()
    elif what == "read":
        assert libc.adjtimex(_timex(0)) >= 0
        assert libc.syscall(SYS_ADJTIMEX, _timex(0)) >= 0
        assert libc.adjtimex(_timex(ADJ_OFFSET_SS_READ)) >= 0  # what adjtime(NULL, &old) passes
        assert libc.clock_adjtime(CLOCK_REALTIME, _timex(0)) >= 0
        assert libc.syscall(SYS_SETTIMEOFDAY, None, None) == 0  # sets nothing (glibc's wrapper would crash)
        time.clock_gettime(time.CLOCK_REALTIME)
        time.clock_getres(time.CLOCK_MONOTONIC)
    else:
        raise SystemExit(f"unknown mode {what}")


if __name__ == "__main__":
    main()
