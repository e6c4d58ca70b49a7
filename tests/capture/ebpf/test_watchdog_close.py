"""The eBPF watchdog is never spawned once the run is over.

:meth:`Watchdog.close` (the run's end: its eBPF links and maps are closed right after, their
descriptor numbers free for other files) and the thread that spawns the watchdog share a lock:
a spawn not begun by then never begins, and one under way ends before ``close`` goes on.  The
two orders that raced are played here with a real watchdog spawn (``Watchdog({"root": 0}, [])``
starts the real script; it needs no eBPF program).  The spawn thread is held at the two points
that matter through the watchdog's ``hook`` (events, not timing); the one test seam is that
hook, which a run does not pass.
"""

from __future__ import annotations

import inspect
import sys
import threading
import time
from collections.abc import Callable

from spyglass.capture.ebpf.watchdog import Watchdog

WAIT = 60.0  # generous: a loaded machine of two cores


def _held_at(point: str) -> tuple[Callable[[str], None], threading.Event, threading.Event]:
    """A hook that holds the spawn thread at ``point`` until released: (hook, reached, release)."""
    reached, release = threading.Event(), threading.Event()

    def hook(at: str) -> None:
        if at == point:
            reached.set()
            assert release.wait(WAIT), "never released"

    return hook, reached, release


def _reap(w: Watchdog) -> None:
    w._spawn.join(WAIT)
    if w.proc is not None:
        if w.proc.poll() is None:
            w.proc.kill()
        w.proc.wait(timeout=WAIT)


def test_no_watchdog_is_spawned_when_the_run_ends_before_the_spawn_begins() -> None:
    hook, reached, release = _held_at("spawn")
    w = Watchdog({"root": 0}, [], hook=hook)
    try:
        assert reached.wait(WAIT)  # the spawn thread runs, and has not looked yet
        w.close()
        release.set()
        w._spawn.join(WAIT)
        assert not w._spawn.is_alive()
        assert w.proc is None, "a watchdog was spawned after the run was over"
        assert w.error is None
    finally:
        release.set()
        _reap(w)


def _lock_line() -> int:
    """The line of ``close`` that takes the spawn lock (0 if it takes none)."""
    lines, first = inspect.getsourcelines(Watchdog.close)
    return next((first + i for i, line in enumerate(lines) if "with self._spawning" in line), 0)


def _waits_for_the_lock_or_is_done(closer: threading.Thread) -> bool:
    if not closer.is_alive():
        return True
    frame = sys._current_frames().get(closer.ident or 0)
    while frame is not None and frame.f_code is not Watchdog.close.__code__:
        frame = frame.f_back
    return frame is not None and frame.f_lineno == _lock_line() != 0


def test_close_during_a_spawn_under_way_waits_for_it() -> None:
    """The spawn thread has found the run going on and is about to start the watchdog when the run
    ends: ``close`` returns only once the watchdog is started (it then gets ``done`` and exits),
    never before, which would leave a watchdog started after the run was over."""
    hook, reached, release = _held_at("start")
    w = Watchdog({"root": 0}, [], hook=hook)
    spawned_when_closed: list[bool] = []

    def close() -> None:
        w.close()
        spawned_when_closed.append(w.proc is not None)

    closer = threading.Thread(target=close, name="closer", daemon=True)
    try:
        assert reached.wait(WAIT)
        closer.start()
        # the closer either returns (no lock: the bug) or waits for the lock at its line in close()
        deadline = time.monotonic() + WAIT
        while not _waits_for_the_lock_or_is_done(closer):
            assert time.monotonic() < deadline, "close() neither returned nor waited for the spawn lock"
            time.sleep(0.01)
        release.set()
        closer.join(WAIT)
        assert spawned_when_closed == [True], "close() returned before the spawn under way ended"
        w._spawn.join(WAIT)
        assert w.proc is not None and w.proc.wait(timeout=WAIT) == 0  # it read `done` and ended by itself
    finally:
        release.set()
        closer.join(WAIT)
        _reap(w)
