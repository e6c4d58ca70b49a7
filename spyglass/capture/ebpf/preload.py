"""Loading the eBPF program in the background, as early as a run knows it will need it.

The kernel's verifier takes most of the load (0.1 s here) and holds no
interpreter lock, so the load overlaps the rest of the start (imports, policy,
rules) when it begins first.  This module is light on purpose (libbpf and the
probe only): ``select_backend`` starts the load before it imports the backend.
One load at a time per process; ``take`` hands it to the first session.
"""

from __future__ import annotations

import os
import threading

from spyglass.capture.ebpf import probe
from spyglass.capture.ebpf.libbpf import BpfObject, LibbpfError

#: default ring sizes (events, lifecycle records), in bytes
RING, LIFE = 8 << 20, 1 << 20

_lock = threading.Lock()
_thread: threading.Thread | None = None
_result: BpfObject | LibbpfError | None = None


def _forget_in_child() -> None:
    """A forked child (a worker pool) must not take the parent's load: it would share the
    parent's program and maps with every other child (one tracked table, one launch slot)."""
    global _thread, _result, _lock
    _thread, _result, _lock = None, None, threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


def sizes(opts: dict[str, object]) -> tuple[int, int]:
    """The ring sizes a run asks for (``ring_bytes``, ``life_ring_bytes``): powers of two, 64 KiB at least."""
    ring = _pow2(int(str(opts.get("ring_bytes", RING))), 1 << 16)
    return ring, _pow2(int(str(opts.get("life_ring_bytes", LIFE))), 1 << 16)


def _pow2(n: int, low: int) -> int:
    size = low
    while size < n:
        size <<= 1
    return size


def load_object(ring: int, life: int) -> BpfObject:
    return BpfObject(str(probe.object_path()), {"events": ring, "life": life})


def start() -> bool:
    """Start loading with the default ring sizes unless a load is under way or waiting to be
    taken; False when eBPF cannot run here (nothing started)."""
    global _thread
    with _lock:
        if _thread is not None:
            return True
        if probe.static_problem() is not None:
            return False

        def load() -> None:
            global _result
            try:
                _result = load_object(RING, LIFE)
            except LibbpfError as exc:
                _result = exc

        _thread = threading.Thread(target=load, name="ebpf-preload", daemon=True)
        _thread.start()
        return True


def pending() -> bool:
    """Whether a load is still running (the caller may use the wait for other work)."""
    thread = _thread
    return thread is not None and thread.is_alive()


def take() -> BpfObject | LibbpfError | None:
    """The preloaded program (or why it failed), once the load is over; None if none was started."""
    global _thread, _result
    with _lock:
        thread, _thread = _thread, None
        if thread is None:
            return None
        thread.join()
        result, _result = _result, None
    return result
