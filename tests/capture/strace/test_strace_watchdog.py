"""The strace watchdog's reading of strace's lines after spyglass died: the signals sent to spyglass
(the live attack is tests/capture/test_monitor_death.py)."""

from __future__ import annotations

from spyglass.capture.strace.watchdog import _signals


def test_signals_to_spyglass_are_found_whatever_the_pid_padding() -> None:
    lines = [
        "9084  1796269409.604714 ioctl(3</x/agent.pid>, TCGETS, 0x7fff656f05c0) = -1 ENOTTY",
        "9084  1796269409.604939 kill(9057, SIGKILL) = 0",
        "12345 1796269409.604940 tgkill(9057, 9058, SIGSTOP) = 0",
        "12346 1796269409.604941 kill(-9057, SIGTERM) = 0",
        "12347 1796269409.604942 kill(4242, SIGKILL) = 0",
        "9084  1796269409.626085 +++ killed by SIGKILL +++",
    ]
    assert [(s["detail"], s["process.pid"], s["syscall"]) for s in _signals(lines, 9057)] == [
        ("SIGKILL", 9084, "kill"), ("SIGSTOP", 12345, "tgkill"), ("SIGTERM", 12346, "kill"),
    ]
