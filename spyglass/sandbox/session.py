"""A capture backend wrapped by the sandbox: one event stream out of three sources.

:class:`SandboxedBackend` wraps any capture backend.  It launches the command
through the sandbox's wrapper and environment, and its session's
``events()`` yields, in arrival order:

* the capture backend's events, with paths mapped back to the host
  (:mod:`~spyglass.sandbox.pathmap`), each followed by the ``sandbox.denied``
  event it implies, if any (:mod:`~spyglass.sandbox.denials`);
* the egress proxy's ``proxy.request`` events, which arrive from the proxy's
  thread through an :class:`EventBus`.

The capture stream is read by a pump thread so that a proxy event reaches the
pipeline at once even while the traced processes are quiet.  All events are
still fed to the pipeline by the runner's thread, one at a time.  A proxy
denial waits (bounded) until the runner has processed it; that is what lets
an enforcement kill land before the agent sees the proxy's answer.  The bus
holds at most ``MAX_QUEUED`` capture events: a pump that finds it full waits
(the capture's own hand-over then fills and slows or counts, as without a
sandbox), and the time it waited is counted (run.json ``capture.handover``,
``bus_*``).

The fast lane (:mod:`spyglass.rules.fastlane`): the sandbox's own view of each
capture event (machinery dropped, paths mapped back to the host, denials
derived) is made on the capture's reader thread, in order, before the event
is queued (:class:`SandboxLane`), so the rule engine's lane sees the events the
run will record, as they are parsed; the runner's thread takes that view
from there.  Events read ahead of order (the eBPF alert ring) are mapped the
same way, once the sandbox has started the agent.

``kill_tree()`` kills the sandbox's PID-namespace init first (the kernel then
kills every process in the namespace at once) and then asks the backend to
kill what it traces.
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import msgspec

from spyglass.capture.base import BackendStatus, CaptureBackend, CaptureResult, CaptureSession, LaunchSpec
from spyglass.capture.handover import MAX_QUEUED
from spyglass.events import Event
from spyglass.logs import get_logger

if TYPE_CHECKING:
    from spyglass.sandbox.prepared import PreparedSandbox

log = get_logger("spyglass.sandbox")

_CAPTURE, _EXTERNAL, _END = 0, 1, 2
_PROCESS_TYPES = frozenset({"process.start", "process.exec", "process.exit", "process.detach"})
#: system calls whose target is a pid as the caller sees it (inside: a pid of the sandbox's namespace)
_NS_PID_SIGNALS = frozenset({"kill", "tkill", "tgkill"})
#: seconds to keep following after the root exits: the namespace's init outlives
#: bwrap's monitor by a moment, and capture ends as soon as the last process is gone
MIN_GRACE = 2.0


class MachineryFilter:
    """Tells the sandbox's own processes from the agent's.

    The traced tree starts with spyglass's launcher: a shell that opens the
    seccomp and info files, bwrap (its monitor and the namespace's init, which
    mount, pivot and drop privileges) and the relay.  Their process events are
    kept so the tree is complete, their file, network and privilege events are
    not: they are the sandbox being built, not the agent acting.  The relay's
    children are the agent; nothing the agent starts is ever machinery.
    """

    def __init__(self, bwrap_path: str, relay_python: str, relay_script: str) -> None:
        self.bwrap = os.path.realpath(bwrap_path)
        self.python = os.path.realpath(relay_python)
        self.script = relay_script
        self.pids: set[int] = set()
        self.relay_pid: int | None = None
        self.seen_root = False
        self.dropped = 0

    def _is_machinery_exec(self, ev: Event) -> bool:
        argv = ev.argv or []
        exe = os.path.realpath(ev.exe) if ev.exe else ""
        if exe == self.bwrap:
            return True
        if exe == self.python and self.relay_pid is None and self.script in argv[:5]:
            return True
        return len(argv) > 3 and argv[3] == "spyglass-sandbox" and not self.seen_relay_exec

    @property
    def seen_relay_exec(self) -> bool:
        return self.relay_pid is not None

    def keep(self, ev: Event) -> bool:
        """Whether ``ev`` goes on to the run (and the machinery set is kept current)."""
        pid, t = ev.pid, ev.type
        if not self.seen_root:
            self.seen_root = True
            self.pids.add(pid)
        if t == "process.start":
            if ev.ppid in self.pids and ev.ppid != self.relay_pid:
                self.pids.add(pid)
            return True
        if pid not in self.pids:
            return True
        if t == "process.exec":
            if ev.ok:
                if not self._is_machinery_exec(ev):
                    self.pids.discard(pid)
                elif ev.exe and os.path.realpath(ev.exe) == self.python:
                    self.relay_pid = pid
            return True
        if t in _PROCESS_TYPES:
            if t == "process.exit":
                self.pids.discard(pid)
            return True
        self.dropped += 1
        return False

    def is_machinery(self, pid: int) -> bool:
        return pid in self.pids


def _own_signal(ev: Event) -> bool:
    """A signal from inside the sandbox to a process of the run (called for targets that are no
    helper).  The capture tells signals to the run's own processes by host pids, but the eBPF
    backend records the pid the caller wrote, a pid of the sandbox's PID namespace, where every
    process but pid 1 (the relay, spyglass's helper, see ``helper_pids``) belongs to the run:
    such a signal is the run's own business, as outside.  (strace translates pids to host pids
    and reports no signal to a process of the run.)"""
    return (
        ev.type == "sys.sensitive"
        and ev.syscall in _NS_PID_SIGNALS
        and ev.target_pid is not None
        and ev.target_pid > 1
    )


def _signal_to_helper(ev: Event, helpers: list[int]) -> bool:
    return ev.type == "sys.sensitive" and ev.syscall in _NS_PID_SIGNALS | {"pidfd_send_signal"} and (
        ev.target_pid == -1 or ev.target_pid in helpers
    )


Item = tuple[int, "Event | None", "concurrent.futures.Future[None] | None"]


class EventBus:
    """Thread-safe hand-off of events from the capture pump and the proxy thread to the stream.

    Capture events are bounded (``max_capture``: the pump waits, counted); proxy events never
    wait (the proxy's thread must answer its client)."""

    def __init__(self, max_capture: int = MAX_QUEUED) -> None:
        self._items: deque[Item] = deque()
        self._cond = threading.Condition(threading.Lock())
        self.closed = False
        self.late: list[Event] = []  # arrived after the stream ended (not in the run)
        self.max_capture = max(1, max_capture)
        self._capture = 0  # capture events queued
        self.waits = 0  # capture puts that found the bus full
        self.blocked_ns = 0
        self.max_queued = 0

    def put(self, ev: Event, wait: bool = False) -> concurrent.futures.Future[None] | None:
        fut: concurrent.futures.Future[None] | None = concurrent.futures.Future() if wait else None
        with self._cond:
            if self.closed:
                self.late.append(ev)
                if fut is not None:
                    fut.set_result(None)
                return fut
            self._items.append((_EXTERNAL, ev, fut))
            self._cond.notify_all()
        return fut

    def put_capture(self, ev: Event) -> None:
        """Queue a capture event; waits while ``max_capture`` of them are queued."""
        with self._cond:
            if self._capture >= self.max_capture and not self.closed:
                self.waits += 1
                t0 = time.monotonic_ns()
                while self._capture >= self.max_capture and not self.closed:
                    self._cond.wait(0.5)
                self.blocked_ns += time.monotonic_ns() - t0
            self._items.append((_CAPTURE, ev, None))
            self._capture += 1
            if self._capture > self.max_queued:
                self.max_queued = self._capture
            self._cond.notify_all()

    def end(self) -> None:
        with self._cond:
            self._items.append((_END, None, None))
            self._cond.notify_all()

    def get(self, timeout: float) -> Item:
        with self._cond:
            if not self._items and not self._cond.wait_for(lambda: bool(self._items), timeout):
                raise queue.Empty
            item = self._items.popleft()
            if item[0] == _CAPTURE:
                self._capture -= 1
                self._cond.notify_all()
            return item

    def close(self) -> list[tuple[Event, concurrent.futures.Future[None] | None]]:
        """Stop accepting; return what is still queued (external events only)."""
        with self._cond:
            self.closed = True
            items, self._items = list(self._items), deque()
            self._capture = 0
            self._cond.notify_all()
        return [(ev, fut) for kind, ev, fut in items if kind == _EXTERNAL and ev is not None]

    def stats(self) -> dict[str, float | int]:
        """For run.json ``capture.handover`` (``bus_*``): how long the capture pump waited for room."""
        return {"bus_max_events": self.max_capture, "bus_waits": self.waits,
                "bus_blocked_s": round(self.blocked_ns / 1e9, 4), "bus_max_queued": self.max_queued}


def admit(sb: PreparedSandbox, ev: Event) -> list[Event]:
    """What a capture event becomes in the run: [] (the sandbox's own machinery or a signal
    inside it), the event (paths mapped to the host), or the event and the denial it implies."""
    machinery = sb.machinery.is_machinery(ev.pid)
    if not sb.machinery.keep(ev):
        return []
    relay = sb.machinery.relay_pid
    if relay is not None and relay not in sb.helper_pids:
        sb.helper_pids.append(relay)
    if machinery:
        return [ev]  # process events of the launcher: outside the sandbox's view
    if _signal_to_helper(ev, sb.helper_pids):
        sb.resume()  # a SIGSTOP reached the traced relay: it must go on
    elif _own_signal(ev):
        return []
    denial = sb.denials.derive(ev)
    sb.pathmap.map_event(ev)
    return [ev] if denial is None else [ev, denial]


class SandboxLane:
    """The sandbox's view of each capture event, made on the capture's reader thread.

    ``see`` is the backend's ``LaunchSpec.urgent``: it admits the event (:func:`admit`),
    keeps the result for the runner's thread (``take``) and passes what the run records to
    the fast lane.  ``look`` is its ``LaunchSpec.lookout``: events read ahead of order,
    mapped to the host, passed on once the agent runs (the sandbox's own processes are not
    the agent's)."""

    def __init__(self, sb: PreparedSandbox, urgent: Callable[[Event], None] | None,
                 lookout: Callable[[Event], None] | None) -> None:
        self.sb = sb
        self.urgent = urgent
        self.lookout = lookout
        self._lock = threading.Lock()
        self._done: dict[int, tuple[Event, list[Event]]] = {}  # id(event) -> (event, admitted)
        m = sb.machinery
        # the same filter, fed the records read ahead: the lifecycle ring is read there first, so
        # this one knows the sandbox's processes (and the relay's start of the agent) no later than
        # the run's, which waits for the stream's order
        self._ahead = MachineryFilter(m.bwrap, m.python, m.script)
        self.seen = 0

    def see(self, ev: Event) -> None:
        with self._lock:
            out = admit(self.sb, ev)
            self._done[id(ev)] = (ev, out)  # the event is alive until taken: its id is its own
        self.seen += 1
        if self.urgent is not None:
            for e in out:
                self.urgent(e)

    def take(self, ev: Event) -> list[Event]:
        """Runner's thread: the event as admitted on the reader's thread (or admitted now: an
        event the backend made without its reader, such as a detach at the end)."""
        with self._lock:
            entry = self._done.pop(id(ev), None)
            return entry[1] if entry is not None else admit(self.sb, ev)

    def look(self, ev: Event) -> None:
        if self.lookout is None:
            return
        ahead = self._ahead
        kept = ahead.keep(ev)
        if ev.type not in _PROCESS_TYPES and (
            not kept or not ahead.seen_relay_exec or self.sb.machinery.is_machinery(ev.pid) or _own_signal(ev)
        ):
            return  # the sandbox being built, or a signal inside it: not the agent's
        self.sb.pathmap.map_event(ev)
        self.lookout(ev)


class SandboxedSession:
    def __init__(self, inner: CaptureSession, sandbox: PreparedSandbox, lane: SandboxLane | None = None) -> None:
        self.inner = inner
        self.sandbox = sandbox
        self.lane = lane
        self._error: BaseException | None = None

    def _pump(self) -> None:
        bus = self.sandbox.bus
        try:
            for ev in self.inner.events():
                bus.put_capture(ev)
        except BaseException as exc:
            self._error = exc
        finally:
            bus.end()

    def events(self) -> Iterator[Event]:
        sb = self.sandbox
        bus = sb.bus
        threading.Thread(target=self._pump, name="spyglass-capture-pump", daemon=True).start()
        pending: list[concurrent.futures.Future[None]] = []
        try:
            while True:
                try:
                    kind, ev, fut = bus.get(timeout=0.5)
                except queue.Empty:
                    continue
                if kind == _END or ev is None:
                    break
                if kind == _CAPTURE:
                    yield from self.lane.take(ev) if self.lane is not None else admit(sb, ev)
                else:
                    if fut is not None:
                        pending.append(fut)
                    yield ev
                    if fut is not None:
                        fut.set_result(None)
                        pending.remove(fut)
            # capture is over, so is the agent: end the proxy's open connections and
            # pass on what they report
            if sb.proxy is not None:
                sb.proxy.flush()
            for ev, fut in bus.close():
                if fut is not None:
                    pending.append(fut)
                yield ev
                if fut is not None:
                    fut.set_result(None)
                    pending.remove(fut)
        finally:
            bus.close()
            for fut in pending:
                if not fut.done():
                    fut.set_result(None)
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        self.inner.stop()

    def kill_tree(self) -> None:
        self.sandbox.kill()
        self.inner.kill_tree()

    @property
    def tracer_pid(self) -> int | None:
        return self.inner.tracer_pid

    @property
    def lost_events(self) -> int:
        return self.inner.lost_events

    def result(self) -> CaptureResult:
        res = self.inner.result()
        res.handover.update(self.sandbox.bus.stats())
        note = self.sandbox.summary()
        if note:
            res.notes.append(note)
        if self.sandbox.machinery.relay_pid is None and res.failed_to_start is None:
            # bwrap never reached the agent: whatever the exit status, the agent did not run
            res.failed_to_start = (
                f"the sandbox did not start the agent (bwrap exited with status {res.shell_exit_code}; "
                "its message is above)"
            )
        return res


def _file_ids(paths: list[str]) -> list[tuple[int, int]]:
    ids = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue
        ids.append((st.st_dev, st.st_ino))
    return ids


class SandboxedBackend:
    """Any capture backend, launching through the sandbox."""

    def __init__(self, inner: CaptureBackend, sandbox: PreparedSandbox) -> None:
        self.inner = inner
        self.sandbox = sandbox
        self.name = inner.name

    def status(self) -> BackendStatus:
        return self.inner.status()

    def start(self, spec: LaunchSpec) -> CaptureSession:
        from spyglass.sandbox import launch

        sb = self.sandbox
        launch.expose_program(sb, spec.argv, os.environ if spec.env is None else spec.env, spec.cwd)
        env = sb.env_for(spec.env)
        launch.check_start(sb, spec.argv, env, spec.cwd)  # SandboxError (exit 5) before the agent runs
        lane = SandboxLane(sb, spec.urgent, spec.lookout)
        launched = msgspec.structs.replace(
            spec,
            # the eBPF backend puts opens of these on its alert ring, read ahead of a burst
            options={**spec.options, "urgent_ids": _file_ids(sb.decoy.honeytoken_paths())},
            wrapper=[*sb.wrapper_for(spec.cwd), *spec.wrapper],
            env=env,
            wait_descendants=max(spec.wait_descendants, MIN_GRACE),
            # the fast lane sees the events as the sandbox admits them, on the capture's thread
            urgent=lane.see,
            lookout=lane.look if spec.lookout is not None else None,
        )
        return SandboxedSession(self.inner.start(launched), sb, lane)
