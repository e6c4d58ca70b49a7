"""A check shared by the tests of bounded queues (the capture hand-over, tests/capture/test_handover.py,
and the sandbox's capture -> stream bus, tests/sandbox/test_sandbox_lane.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable


def close_releases(put: Callable[[], object], close: Callable[[], None]) -> bool:
    """``put`` (which waits for room) runs in a thread, then ``close``: whether the waiting put returned
    (waited on for up to 30 s, a condition, not a timing)."""
    done = threading.Event()
    t = threading.Thread(target=lambda: (put(), done.set()), daemon=True)
    t.start()
    close()
    return done.wait(30)
