"""The eBPF capture backend: loads the CO-RE program, runs the command, streams its events.

Start: the program is loaded through the system libbpf (ctypes), the syscall table is written into its
``descs`` map and its five programs are attached. The command (behind ``spec.wrapper``, if any) is started
with ``Popen``; the thread that calls it is named in the ``settings`` map first, and the kernel puts that
thread's next child into the ``tracked`` map at its fork, so it follows the command and every process it forks
from its very first instruction (``sched_process_fork`` adds each child; a command the table cannot take is
killed at its exec). No code runs in the child, so Popen can use vfork. Nothing is injected into the
processes: when recording ends the programs are detached and whatever still runs goes on untouched.

Reading: one thread polls the rings every 20 ms (the program only wakes it when more than 256 KiB are
pending), decodes the records and queues the events; the producer never waits for it. Lifecycle records (fork,
exec, exit) have their own ring so that a burst of file events cannot crowd them out. Opens of secrets and of
spyglass's own files go to a third ring, read ahead with the lifecycle ring for the fast lane
(:mod:`.lookout`) between steps of ``_CHUNK`` bytes of the events ring. Records that did not fit are counted
per CPU and per category in the ``lost`` map; ``result().lost`` is their sum and ``notes`` name the kinds.

End of run: when the root process's exit arrives, a grace period of ``spec.wait_descendants`` seconds starts;
the stream ends as soon as no followed process is alive, or when the grace period is over (processes still
running are reported as ``process.detach`` events and in ``result().still_running``).
"""

from __future__ import annotations

import gc
import os
import select
import signal
import struct
import subprocess
import threading
import time
from collections.abc import Iterator

from spyglass.capture import ident, procfs
from spyglass.capture.base import (
    BackendStatus,
    CaptureResult,
    LaunchSpec,
    StillRunning,
    detach_on_close,
    followed_note,
    tell_following,
)
from spyglass.capture.ebpf import maps, preload, probe
from spyglass.capture.ebpf.decoder import RecordDecoder
from spyglass.capture.ebpf.libbpf import BpfObject, LibbpfError
from spyglass.capture.ebpf.lookout import Lookout
from spyglass.capture.ebpf.losses import LossWatch
from spyglass.capture.ebpf.ring import KernelOrder, Ring
from spyglass.capture.ebpf.tablecheck import TableCheck, argv_of
from spyglass.capture.ebpf.watchdog import Watchdog
from spyglass.capture.handover import MAX_QUEUED_DROPPING, Empty, Handover
from spyglass.capture.procfs import running
from spyglass.capture.reap import pidfd, wait_exit
from spyglass.capture.strace.host import fd_link, hosts_file, pgid_of
from spyglass.errors import CaptureError
from spyglass.events.schema import Event

PROGRAMS, OPTIONAL_PROGRAMS = maps.PROGRAMS, maps.OPTIONAL_PROGRAMS

_POLL = 0.02
#: bytes of the events ring decoded per step (between two looks at the alert ring)
_CHUNK = 32 << 10
#: records of a burst copied out of the events ring undecoded, at most this many times the ring's size
SPILL_RINGS = 4
_ALERT_RING = 256 << 10  # the program's size of the alert ring
#: what ``descendants`` may ask for processes alive after the grace period (as the strace backend)
DESCENDANTS = ("kill", "follow", "detach")
_DETACHED = "left running, no longer recorded (nothing of spyglass stays inside it)"
_KILL_GRACE = 5.0
_U32 = struct.Struct("<I")


_frozen: list[bool] = []


def _freeze_heap() -> None:
    """Once per process: what is alive at the first recording (modules, the compiled rule pack) leaves
    the collector's generations; a full collection mid-run would walk it all (~30 ms of CPU)."""
    if not _frozen:
        _frozen.append(True)
        gc.freeze()


class EbpfBackend:
    """Capture from the kernel with eBPF (needs root or CAP_BPF+CAP_PERFMON, and BTF)."""

    name = "ebpf"

    def status(self) -> BackendStatus:
        return probe.status()

    def preload(self) -> None:
        """Load the program now, in a thread, with the default ring sizes: the kernel verifies
        it while spyglass prepares the rest of the run (``start`` then only attaches)."""
        preload.start()

    def start(self, spec: LaunchSpec) -> EbpfSession:
        found = probe.static_problem()
        if found is not None:
            raise CaptureError(f"the eBPF backend cannot run: {found[0]}", hint=found[1])
        ring, life = preload.sizes(spec.options)
        obj: BpfObject | None = None
        pre = preload.take()
        if isinstance(pre, BpfObject):
            if (ring, life) == (preload.RING, preload.LIFE):
                obj = pre
            else:
                pre.close()
        if obj is None:
            try:
                obj = _load(ring, life)
            except LibbpfError as exc:
                raise CaptureError(
                    f"the eBPF program could not be loaded: {exc}", hint="run `spyglass doctor`"
                ) from exc
        return EbpfSession(spec, obj, ring, life)


_load = preload.load_object


class EbpfSession:
    """One run.  ``events()`` must be consumed for the run to make progress."""

    def __init__(self, spec: LaunchSpec, obj: BpfObject, ring: int, life: int) -> None:
        self.spec = spec
        opts = spec.options
        self._obj = obj
        self._result = CaptureResult()
        # bounded (deeper than strace's: a reader kept waiting lets the rings fill and drop); while
        # it waits for room it still reads the alert ring for the fast lane
        self._queue = Handover(MAX_QUEUED_DROPPING, urgent=spec.urgent, idle=self._look_ahead)
        self._done = threading.Event()  # ask the reader for a last drain, then to stop
        self._wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)  # ... at once, not at its next poll
        self._detached = False
        self._closed = False
        self._last_read = False
        self._killing = False
        self.kernel_stats: dict[str, tuple[int, int]] = {}  # options={"kernel_stats": True}
        # tests: a reader that sleeps first (seconds), or (-1) until the root process has exited
        self._stall = float(str(opts.get("stall_reader", 0.0)))
        dump = opts.get("dump_records")  # tests: raw records, each as <u32 length><bytes>
        self._dump = open(str(dump), "wb") if dump else None  # noqa: SIM115 - closed by the reader
        self._boot = time.time_ns() - time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        protected = ident.from_options(opts)
        self.decoder = RecordDecoder(self._boot, hosts_file=hosts_file, pgid_of=pgid_of, fd_link=fd_link,
                                     protected=protected)
        self._ahead = RecordDecoder(self._boot, hosts_file=hosts_file, pgid_of=pgid_of, fd_link=fd_link,
                                    protected=protected)  # the look-ahead's own (process table, fds)
        chosen = opts.get("descendants", "detach")
        self.descendants = chosen if chosen in DESCENDANTS else "detach"
        self._following: float | None = None  # when following the leftovers began (monotonic)
        self._followed = 0
        self._watchdog: Watchdog | None = None
        try:
            self._drop_dirs = maps.configure(self._obj, opts, protected, self._result.notes)
            # the watchdog before the command: an agent that kills spyglass at its first instruction
            # must find one to notice (it kills what the program follows, the root still unknown to it)
            self._watchdog = Watchdog.start(self._obj, opts, (ring, life), self._boot, self._result.notes, 0,
                                            spec.on_monitor)
            life_r, alert_r = Ring(self._obj.map_fd("life"), life), Ring(self._obj.map_fd("alert"), _ALERT_RING)
            #: a burst past an eighth of the events ring is copied out undecoded (Ring.spill), up to spill_bytes
            spill = int(str(opts.get("spill_bytes", SPILL_RINGS * ring)))
            self._events_ring = Ring(self._obj.map_fd("events"), ring, spill_max=spill)
            self._rings = [life_r, self._events_ring, alert_r]
            self._order = KernelOrder(self._rings[1:2], chunk=_CHUNK)
            self._lookout = Lookout([life_r, alert_r], self._ahead, spec.lookout)
            self._table = TableCheck(self._obj.map_fd("tracked"), lambda: [p.pid for p in self.decoder.live()],
                                     running, self._result.notes)
            cwd = os.path.realpath(spec.cwd)
            started = time.time_ns()
            stdin, stdout, stderr = spec.stdio or (None, None, None)
            # the kernel follows the next process this thread forks from its first instruction
            # (on_fork); nothing runs in the child before exec, so Popen can use vfork
            me = threading.get_native_id()
            maps.enroll(self._obj, self._drop_dirs, me)
            try:
                self._proc = subprocess.Popen(
                    [*spec.wrapper, *spec.argv], cwd=cwd, env=spec.env, close_fds=True,
                    stdin=stdin, stdout=stdout, stderr=stderr,
                )  # fmt: skip
            finally:
                maps.disarm(self._obj, self._drop_dirs, me)
        except (OSError, LibbpfError, subprocess.SubprocessError) as exc:
            if self._watchdog is not None:
                self._watchdog.close()  # before the links it holds copies of are closed
            self._obj.close()
            os.close(self._wake)
            raise CaptureError(f"cannot start the command under eBPF capture: {exc}") from exc
        if self._watchdog is not None:
            self._watchdog.send(f"root {self._proc.pid} {procfs.start_time(self._proc.pid)}")
        self._queue.put([self.decoder.add_root(self._proc.pid, cwd, os.geteuid(), os.getegid(), started)])
        self._lookout.start(self._ahead.add_root(self._proc.pid, cwd, os.geteuid(), os.getegid(), started))
        #: readable when the command exits: its exit record is in the ring by then (sched_process_exit
        #: fires before the exit is notified), so the reader need not wait for its next poll
        self._root_fd = pidfd(self._proc.pid)
        #: records the rings could not take, told as an event (evasion-capture-lost) once seen, and at the end
        self._losses = LossWatch(lambda: maps.lost(self._obj), self._proc.pid)
        self._lost_kinds: list[str] = []
        _freeze_heap()
        self._reader = threading.Thread(target=self._read, name="ebpf-reader", daemon=True)
        self._reader.start()

    @property
    def helper_pids(self) -> list[int]:
        """spyglass's helpers (the watchdog): a signal from the run to one is an attack on the monitor."""
        pid = self._watchdog.pid if self._watchdog is not None else None
        return [pid] if pid is not None else []

    def _helper_news(self) -> Iterator[Event]:
        if self._watchdog is not None:
            yield from self._watchdog.events(self._proc.pid, self._result.notes)

    @property
    def tracer_pid(self) -> int | None:
        """No tracer process: the kernel records, and the reader is a thread of this process."""
        return os.getpid()

    # --- reader thread ------------------------------------------------------------

    def _read(self) -> None:
        ep = select.epoll()
        try:
            for r in self._rings:
                ep.register(r.fd, select.EPOLLIN)
            ep.register(self._wake, select.EPOLLIN)
            if self._root_fd is not None:
                ep.register(self._root_fd, select.EPOLLIN | select.EPOLLONESHOT)
            if self._stall > 0:
                time.sleep(self._stall)
            elif self._stall < 0:
                deadline = time.monotonic() + 120
                while running(self._proc.pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
            timeout = _POLL
            while True:
                last = self._done.is_set()
                if not self._order.behind:
                    ep.poll(timeout)
                self._look_ahead()
                batch: list[Event] = []
                self._last_read = last  # nothing read ahead after the last read (it would not be in order)
                raw = self._order.read(last, self._lookout.take(), self._lookout.read_ns)
                for i in range(0, len(raw), 64):  # the alert ring is looked at between steps of 64
                    step = raw[i : i + 64]
                    if self._dump is not None:
                        self._dump.write(b"".join(_U32.pack(len(data)) + data for data in step))
                    self.decoder.feed_many(step, batch)
                    if len(step) == 64:
                        self._look_ahead()
                if not last and not self._killing and not self._detached:
                    batch.extend(self._table.check())  # a followed process deleted from the map: put back
                    batch.extend(self._losses.check())  # records the rings could not take: said at once
                if self._killing:
                    self._kill_tracked()
                if batch:
                    self._look_ahead()
                    self._queue.put(batch)
                if last:
                    break
                # records held back for the order go at their watermark, not a whole poll later
                # (once per poll: under a steady stream something is always held)
                due = self._order.due_in() if timeout == _POLL else None
                timeout = _POLL if due is None else min(_POLL, due + 0.0005)
        except Exception as exc:  # pragma: no cover - the stream must end whatever happens
            self._result.notes.append(f"eBPF reader stopped: {exc}")
        finally:
            ep.close()
            if self._dump is not None:
                self._dump.close()
            self._queue.put(None)

    def _look_ahead(self) -> None:
        """Reader thread: the alert and lifecycle rings, read ahead for the fast lane."""
        if not self._closed and not self._last_read:
            self._events_ring.spill()
            self._lookout.look()

    # --- the stream -----------------------------------------------------------------

    def events(self) -> Iterator[Event]:
        """Events as the kernel reports them; ends when recording ends.

        Closing the generator early detaches (the tree keeps running).
        """
        return detach_on_close(self._stream(), self._abandon)

    def _abandon(self) -> None:
        self._finish_reading()
        self._close()

    def _stream(self) -> Iterator[Event]:
        dec = self.decoder
        deadline: float | None = None
        kill_deadline: float | None = None
        while True:
            try:
                batch = self._queue.get(timeout=0.1)
            except Empty:
                batch = []
            if batch is None:
                break
            yield from batch
            yield from self._helper_news()
            if self._done.is_set():
                continue
            now = time.monotonic()
            if self._killing and kill_deadline is None:
                kill_deadline = now + _KILL_GRACE
            # every turn: the root is reaped as soon as it has exited (its exit record comes a moment
            # before it can be; a zombie otherwise, for as long as the run follows what it left)
            reaped = self._proc.poll() is not None  # (free once it has been)
            if deadline is None and (reaped or dec.root_exited):
                deadline = now + max(0.0, self.spec.wait_descendants)
            if self._detached:
                self._finish_reading()
            elif kill_deadline is not None:  # the tree is dying: until its deaths are read, bounded
                if now >= kill_deadline or not self._tracked_alive():
                    self._finish_reading()
            elif deadline is not None:
                alive = self._tracked_alive()
                if not alive:
                    self._finish_reading()
                elif now >= deadline and self.descendants == "kill":
                    self._end_tree(alive)  # the grace period is over: the tree ends with the run
                elif now >= deadline and self.descendants == "follow":
                    if self._following is None:  # recorded until they exit; the caller may return now
                        self._following, self._followed = time.monotonic(), len(alive)
                        tell_following(self.spec, alive, *self._root_status())
                elif now >= deadline:
                    self._finish_reading()  # detach: reported as process.detach, left untouched
        yield from self._finish()

    def _root_status(self) -> tuple[int | None, str | None]:
        """The root's exit code or signal: from its exit record, else from waiting for it."""
        if self.decoder.root_exited:
            return self.decoder.root_exit_code, self.decoder.root_signal
        rc = self._proc.poll()
        if rc is None:
            return None, None
        if rc < 0:
            return None, signal.Signals(-rc).name if -rc in signal.valid_signals() else None
        return rc, None

    def _end_tree(self, alive: list[int]) -> None:
        """``descendants: kill``: the processes still alive after the grace period are killed."""
        names = ", ".join(f"{p} ({' '.join(self._argv(p) or [])[:60]})" for p in alive[:5])
        self._result.notes.append(f"killed {len(alive)} process(es) still running after the run: {names}")
        self.kill_tree()

    def _argv(self, pid: int) -> list[str] | None:
        info = self.decoder.procs.get(pid)
        return info.argv if info is not None and info.argv else argv_of(pid)

    def _tracked_alive(self) -> list[int]:
        try:
            pids = maps.tracked(self._obj)
        except LibbpfError:
            return []
        return [p for p in pids if running(p)]

    def _finish_reading(self) -> None:
        if not self._done.is_set():
            self._done.set()
            self._queue.close()  # the last drain never waits for the consumer
            if not self._closed:  # _close() closes it (after the reader stopped)
                os.eventfd_write(self._wake, 1)

    def _finish(self) -> Iterator[Event]:
        dec, res = self.decoder, self._result
        alive = self._tracked_alive()
        self._close()
        yield from self._losses.final(res.lost, self._lost_kinds)
        rc = self._proc.poll()
        if rc is None and dec.root_exited:
            rc = wait_exit(self._proc, 2)
        res.root_pid = self._proc.pid
        res.lines, res.unparsed = dec.records, dec.unparsed
        res.handover = self._queue.stats()
        if self._events_ring.spilled:
            res.handover.update(spilled=self._events_ring.spilled, spilled_peak_bytes=self._events_ring.spilled_peak)
        if dec.root_exited:
            res.exit_code, res.signal = dec.root_exit_code, dec.root_signal
        elif rc is not None:
            if rc < 0:
                res.signal = signal.Signals(-rc).name if -rc in signal.valid_signals() else None
            else:
                res.exit_code = rc
        if self._following is not None:
            res.notes.append(followed_note(self._followed, time.monotonic() - self._following))
        now = time.time_ns()
        for pid in alive:
            argv = self._argv(pid)
            res.still_running.append(StillRunning(pid, argv))
            yield Event(type="process.detach", ts=now, pid=pid, argv=argv, detail=_DETACHED)
        if res.still_running:
            res.notes.append(f"stopped following {len(res.still_running)} process(es) still running")

    def _close(self) -> None:
        """Detach the programs, count what was lost, release the maps (idempotent)."""
        if self._closed:
            return
        self._detached = True
        self._closed = True
        self._reader.join(timeout=5)
        if self._watchdog is not None:
            self._watchdog.close()  # before the detach: it holds links of its own
        for fd in (self._wake, self._root_fd):  # here, never in the reader: _finish_reading writes to one
            if fd is not None:
                os.close(fd)
        if self.spec.options.get("kernel_stats"):
            self.kernel_stats = probe.program_stats(self._obj.program_ids(PROGRAMS + OPTIONAL_PROGRAMS))
        self._obj.detach()
        self._lost_kinds = maps.count_lost(self._obj, self._result)
        for r in self._rings:
            r.close()
        self._obj.close()

    @property
    def lost_events(self) -> int:
        """Records the program could not put in its rings so far."""
        if self._closed:
            return self._result.lost
        try:
            return maps.lost(self._obj)[0]
        except (LibbpfError, AssertionError):
            return self._result.lost

    # --- control --------------------------------------------------------------------

    def stop(self) -> None:
        """Stop following (the tree keeps running); the stream ends after a last drain."""
        self._detached = True
        self._finish_reading()

    def kill_tree(self) -> None:
        """SIGKILL every followed process; children born meanwhile die as the reader sees them."""
        self._killing = True
        self._kill_tracked()

    def _kill_tracked(self) -> None:
        # the root first: once its SIGKILL is pending it cannot see a child die and exit on its own
        pids = [self._proc.pid]
        if not self._closed:
            try:
                pids += maps.tracked(self._obj)
            except (LibbpfError, AssertionError):
                pass
        procfs.kill_all(list(dict.fromkeys(pids)))  # all stopped first: none runs on between the kills

    def result(self) -> CaptureResult:
        return self._result
