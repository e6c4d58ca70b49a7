"""The capture-backend interface: the only thing the rest of spyglass knows of capture.

A backend turns kernel facts into :class:`~spyglass.events.Event` objects.  It
knows nothing of rules, stores or reports.  The contract is small on purpose so
that strace, eBPF and replay backends fit the same mould:

* ``status()`` says whether the backend works on this machine, and if not, why
  and how to fix it (``spyglass doctor`` prints it).
* ``start(spec)`` launches the command under capture and returns a session.
* ``session.events()`` yields events *while the command runs*; it ends when
  capture ends (root process exited and the grace period for descendants is
  over, or ``stop()`` was called).  Events come without ``seq``: the pipeline
  numbers them.
* ``session.tracer_pid`` is the pid of the process doing the capture (the
  tracer), once known, else ``None`` (rules about killing the monitor read it);
  ``session.lost_events`` counts records known to be dropped so far;
  ``session.kill_tree()`` kills every process of the traced tree (enforcement).
* ``session.result()`` after the stream ends: exit status, lost/unparsed
  counts, processes still alive when capture stopped, the hand-over's waits.
* A backend that reads on a thread of its own hands batches over through
  :class:`spyglass.capture.handover.Handover` (bounded; ``spec.urgent`` sees
  each event before it is queued).

``options["descendants"]`` says what happens to processes still alive when
the grace period after the root's exit is over: ``kill``, ``follow`` (keep
recording until they exit) or ``detach``.  With ``follow``, a backend calls
``options["on_following"](pids, exit_code, signal)`` once when it starts
following them (the root has exited; the caller may give its user the
prompt back while recording goes on) and notes how long it followed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

import msgspec

from spyglass.events import Event


class BackendStatus(msgspec.Struct):
    """Whether a capture backend can run here, what was found and, if not, why."""

    name: str
    available: bool
    detail: str = ""  # what was found (version, mode)
    problem: str = ""  # why it does not work
    fix: str = ""  # how to make it work


class LaunchSpec(msgspec.Struct):
    """What to run and how."""

    argv: Sequence[str]
    cwd: str
    env: dict[str, str] | None = None  # None: inherit
    wait_descendants: float = 0.0  # seconds to keep following after the root exits
    wrapper: Sequence[str] = ()  # argv prefix (a sandbox launcher) placed between tracer and command
    options: dict[str, object] = msgspec.field(default_factory=dict)  # backend-specific knobs
    #: file descriptors for the command's stdin, stdout, stderr (None: inherit spyglass's)
    stdio: tuple[int, int, int] | None = None
    #: called on the reader's thread with every event right after it is parsed, before it is
    #: queued for ``events()`` (the session's fast lane for single-event alerts; see
    #: :mod:`spyglass.capture.handover`); quick, and it must not raise
    urgent: Callable[[Event], None] | None = None
    #: called on the reader's thread with events decoded ahead of the stream's order (the eBPF
    #: backend's alert and lifecycle rings, :mod:`spyglass.capture.ebpf.lookout`); each event
    #: still comes in order through ``urgent`` and ``events()``; it must not change run state
    lookout: Callable[[Event], None] | None = None
    #: called with the capture's own processes (a tracer, helpers) as each becomes known, on the
    #: thread that learns it, before the events read after it go to ``urgent``: the rules about
    #: attacks on the monitor then know them from the first events
    on_monitor: Callable[[Sequence[int]], None] | None = None


class StillRunning(msgspec.Struct):
    """A process of the run still alive when recording ended."""

    pid: int
    argv: list[str] | None = None


class CaptureResult(msgspec.Struct):
    """How a capture ended: the root's exit, what was read and lost, and the notes."""

    exit_code: int | None = None  # the root process's exit code
    signal: str | None = None  # or the signal that killed it ("SIGKILL")
    root_pid: int | None = None
    lines: int = 0  # raw records read from the kernel side
    unparsed: int = 0  # records that could not be understood
    lost: int = 0  # records known to be dropped
    still_running: list[StillRunning] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)
    monitor_lost: bool = False  # the tracer stopped while processes of the run were alive
    failed_to_start: str | None = None  # why the command never ran (a sandbox that did not start)
    #: the reader -> consumer queue: its bound, how often and how long the reader waited for room
    handover: dict[str, float | int] = msgspec.field(default_factory=dict)

    @property
    def shell_exit_code(self) -> int:
        """The code a shell would report: the exit code, or 128+N for signal N."""
        if self.exit_code is not None:
            return self.exit_code
        if self.signal:
            import signal as _signal

            try:
                return 128 + int(_signal.Signals[self.signal])
            except KeyError:
                return 128
        return 1


#: ``on_following(pids, root exit code, root signal)``: the root exited, these are followed on
OnFollowing = Callable[[list[int], "int | None", "str | None"], None]


def tell_following(spec: LaunchSpec, pids: list[int], exit_code: int | None, signal: str | None) -> None:
    """Call the spec's ``on_following`` hook, if any (a failing hook never stops capture)."""
    hook = spec.options.get("on_following")
    if callable(hook):
        try:
            hook(list(pids), exit_code, signal)
        except Exception:  # the recording matters more than the caller's hook
            pass


def detach_on_close(stream: Iterator[Event], detach: Callable[[], None]) -> Iterator[Event]:
    """A session's ``events()``: ``stream``'s events; a consumer that closes them before their end
    (or a stream that fails) calls ``detach`` once, and the tree keeps running."""
    finished = False
    try:
        yield from stream
        finished = True
    finally:
        if not finished:
            detach()


def followed_note(count: int, seconds: float) -> str:
    """The result note of a run that followed descendants after the root exited."""
    return (f"followed {count} descendant(s) left by the agent for {seconds:.1f} s after the grace period, "
            "until they exited")


class CaptureSession(Protocol):
    def events(self) -> Iterator[Event]:
        """Events as they happen; ends when capture ends."""
        ...

    def stop(self) -> None:
        """Stop capturing: detach from the tree (it keeps running) and end the stream."""
        ...

    def kill_tree(self) -> None:
        """Kill every process of the traced tree now (enforcement)."""
        ...

    @property
    def tracer_pid(self) -> int | None:
        """The capturing process's pid once known (spyglass's own monitor)."""
        ...

    @property
    def lost_events(self) -> int:
        """Records known to be dropped so far (0 for a backend that never drops)."""
        ...

    def result(self) -> CaptureResult: ...


class CaptureBackend(Protocol):
    name: str

    def status(self) -> BackendStatus: ...

    def start(self, spec: LaunchSpec) -> CaptureSession: ...
