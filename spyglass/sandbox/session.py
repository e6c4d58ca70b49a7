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
an enforcement kill land before the agent sees the proxy's answer.

``kill_tree()`` kills the sandbox's PID-namespace init first (the kernel then
kills every process in the namespace at once) and then asks the backend to
kill what it traces.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import queue
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from spyglass.capture.base import BackendStatus, CaptureBackend, CaptureResult, CaptureSession, LaunchSpec
from spyglass.events import Event

if TYPE_CHECKING:
    from spyglass.sandbox.prepared import PreparedSandbox

log = logging.getLogger("spyglass.sandbox")

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


class EventBus:
    """Thread-safe hand-off of events from the proxy thread to the stream."""

    def __init__(self) -> None:
        self._q: queue.SimpleQueue[tuple[int, Event | None, concurrent.futures.Future[None] | None]] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self.closed = False
        self.late: list[Event] = []  # arrived after the stream ended (not in the run)

    def put(self, ev: Event, wait: bool = False) -> concurrent.futures.Future[None] | None:
        fut: concurrent.futures.Future[None] | None = concurrent.futures.Future() if wait else None
        with self._lock:
            if self.closed:
                self.late.append(ev)
                if fut is not None:
                    fut.set_result(None)
                return fut
            self._q.put((_EXTERNAL, ev, fut))
        return fut

    def put_capture(self, ev: Event) -> None:
        self._q.put((_CAPTURE, ev, None))

    def end(self) -> None:
        self._q.put((_END, None, None))

    def get(self, timeout: float) -> tuple[int, Event | None, concurrent.futures.Future[None] | None]:
        return self._q.get(timeout=timeout)

    def close(self) -> list[tuple[Event, concurrent.futures.Future[None] | None]]:
        """Stop accepting; return what is still queued (external events only)."""
        with self._lock:
            self.closed = True
        left: list[tuple[Event, concurrent.futures.Future[None] | None]] = []
        while True:
            try:
                kind, ev, fut = self._q.get_nowait()
            except queue.Empty:
                return left
            if kind == _EXTERNAL and ev is not None:
                left.append((ev, fut))


class SandboxedSession:
    def __init__(self, inner: CaptureSession, sandbox: PreparedSandbox) -> None:
        self.inner = inner
        self.sandbox = sandbox
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
                    machinery = sb.machinery.is_machinery(ev.pid)
                    if not sb.machinery.keep(ev):
                        continue
                    relay = sb.machinery.relay_pid
                    if relay is not None and relay not in sb.helper_pids:
                        sb.helper_pids.append(relay)
                    if machinery:
                        yield ev  # process events of the launcher: outside the sandbox's view
                        continue
                    if _signal_to_helper(ev, sb.helper_pids):
                        sb.resume()  # a SIGSTOP reached the traced relay: it must go on
                    elif _own_signal(ev):
                        continue
                    denial = sb.denials.derive(ev)
                    sb.pathmap.map_event(ev)
                    yield ev
                    if denial is not None:
                        yield denial
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
        launched = replace(
            spec,
            wrapper=[*sb.wrapper_for(spec.cwd), *spec.wrapper],
            env=env,
            wait_descendants=max(spec.wait_descendants, MIN_GRACE),
            # no fast lane: the sandbox maps paths and derives denials after capture, in order
            urgent=None,
        )
        return SandboxedSession(self.inner.start(launched), sb)
