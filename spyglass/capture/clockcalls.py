"""Calls that set the system clock -> ``sys.sensitive`` events, worded alike by both backends.

``settimeofday`` and ``clock_settime`` set a clock; ``adjtimex`` and ``clock_adjtime`` change it
when their ``struct timex``'s ``modes`` word asks for anything but a read (0, or
``ADJ_OFFSET_SS_READ``: what ``ntp_gettime`` and ``adjtime(NULL, &old)`` pass).  A clock set back
makes files look older than they are: the witness's end-of-run checks go by status change times.
``settimeofday(NULL, NULL)`` changes nothing and is not reported.
"""

from __future__ import annotations

from typing import Final

#: the system calls this module words (each a ``sys.sensitive`` event when it may change a clock)
CLOCK_CALLS: Final = ("settimeofday", "clock_settime", "adjtimex", "clock_adjtime")

#: clock ids (linux/time.h)
CLOCK_IDS: Final[dict[int, str]] = {
    0: "CLOCK_REALTIME", 1: "CLOCK_MONOTONIC", 2: "CLOCK_PROCESS_CPUTIME_ID", 3: "CLOCK_THREAD_CPUTIME_ID",
    4: "CLOCK_MONOTONIC_RAW", 5: "CLOCK_REALTIME_COARSE", 6: "CLOCK_MONOTONIC_COARSE", 7: "CLOCK_BOOTTIME",
    8: "CLOCK_REALTIME_ALARM", 9: "CLOCK_BOOTTIME_ALARM", 11: "CLOCK_TAI",
}  # fmt: skip
CLOCK_NUMBERS: Final[dict[str, int]] = {v: k for k, v in CLOCK_IDS.items()}

#: ``struct timex`` mode bits (linux/timex.h); the two composite ones as strace names them
ADJ_MODES: Final[dict[str, int]] = {
    "ADJ_OFFSET": 0x0001, "ADJ_FREQUENCY": 0x0002, "ADJ_MAXERROR": 0x0004, "ADJ_ESTERROR": 0x0008,
    "ADJ_STATUS": 0x0010, "ADJ_TIMECONST": 0x0020, "ADJ_TAI": 0x0080, "ADJ_SETOFFSET": 0x0100,
    "ADJ_MICRO": 0x1000, "ADJ_NANO": 0x2000, "ADJ_TICK": 0x4000,
    "ADJ_OFFSET_SINGLESHOT": 0x8001, "ADJ_OFFSET_SS_READ": 0xA001,
}  # fmt: skip
ADJ_OFFSET_SS_READ: Final = 0xA001


def clock_name(clock: int) -> str:
    return CLOCK_IDS.get(clock, f"clock {clock}")


def is_read(modes: int) -> bool:
    """True when an ``adjtimex``/``clock_adjtime`` with these modes only reads the clock's state."""
    return modes in (0, ADJ_OFFSET_SS_READ)


def modes_from_text(text: str) -> int | None:
    """strace's ``modes=`` value (``ADJ_SETOFFSET|ADJ_NANO``, ``0``, ``0x100``) as a number; None
    for a word it does not know."""
    total = 0
    for part in text.split("|"):
        part = part.strip()
        if part in ADJ_MODES:
            total |= ADJ_MODES[part]
            continue
        try:
            total |= int(part, 0)
        except ValueError:
            return None
    return total


def clock_detail(call: str, *, clock: int | None = None, modes: int | None = None) -> str:
    """The event's ``detail``: ``clock_settime CLOCK_REALTIME``, ``adjtimex modes=0x100``,
    ``clock_adjtime CLOCK_REALTIME modes=0x100``, ``settimeofday``."""
    out = [call]
    if clock is not None:
        out.append(clock_name(clock))
    if modes is not None:
        out.append(f"modes={modes:#x}")
    return " ".join(out)


def adjust_detail(call: str, clock: int | None, modes: int | None, *, failed: bool, bad_address: bool) -> str | None:
    """The ``detail`` of an ``adjtimex``/``clock_adjtime``; None when it is not reported: a read of
    the clock's state, or a call whose ``struct timex`` could not be read (EFAULT: nothing happened).
    A refused call (EPERM, EINVAL) is an attempt to change the clock, worded without its modes (strace
    shows only the struct's address then); a read never fails otherwise."""
    if failed:
        return None if bad_address else clock_detail(call, clock=clock)
    if modes is None or is_read(modes):
        return None
    return clock_detail(call, clock=clock, modes=modes)
