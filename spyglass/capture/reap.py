"""Waiting for a child to exit without sleeping in a loop: a pidfd, polled with a timeout."""

from __future__ import annotations

import os
import select
import subprocess


def pidfd(pid: int) -> int | None:
    """A pidfd for ``pid`` (readable once it has exited), or None (old kernel, already reaped)."""
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None


def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """``proc``'s exit status once it exits, waiting at most ``timeout`` seconds (None: still running).

    Wakes when the process exits (pidfd), where ``Popen.wait(timeout)`` sleeps in steps of
    up to 50 ms; another thread blocked in ``proc.wait()`` may reap it meanwhile."""
    rc = proc.poll()
    if rc is not None:
        return rc
    fd = pidfd(proc.pid)
    if fd is None:
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(max(0, int(timeout * 1000))):
            return None
    finally:
        os.close(fd)
    return proc.wait()  # it has exited: at once (or as soon as the thread reaping it is done)
