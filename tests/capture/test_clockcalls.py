"""The clock calls' wording, shared by both backends (spyglass/capture/clockcalls.py)."""

from __future__ import annotations

from spyglass.capture.clockcalls import adjust_detail, clock_detail, is_read, modes_from_text


def test_strace_modes_words_become_the_kernels_bits() -> None:
    assert modes_from_text("0") == 0
    assert modes_from_text("ADJ_SETOFFSET") == 0x100
    assert modes_from_text("ADJ_OFFSET|ADJ_STATUS|ADJ_NANO") == 0x2011
    assert modes_from_text("ADJ_OFFSET_SS_READ") == 0xA001
    assert modes_from_text("ADJ_TAI|0x40000") == 0x40080
    assert modes_from_text("ADJ_SOMETHING_NEW") is None


def test_reads_are_not_reported_and_attempts_are() -> None:
    assert is_read(0) and is_read(0xA001) and not is_read(0x8001) and not is_read(0x100)
    assert adjust_detail("adjtimex", None, 0, failed=False, bad_address=False) is None
    assert adjust_detail("adjtimex", None, 0xA001, failed=False, bad_address=False) is None
    assert adjust_detail("adjtimex", None, 0x8001, failed=False, bad_address=False) == "adjtimex modes=0x8001"
    assert adjust_detail("clock_adjtime", 11, None, failed=True, bad_address=False) == "clock_adjtime CLOCK_TAI"
    assert adjust_detail("clock_adjtime", 0, None, failed=True, bad_address=True) is None
    assert clock_detail("clock_settime", clock=42) == "clock_settime clock 42"
