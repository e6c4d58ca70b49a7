"""One run under strace: its events, its end, and what happens to what is left of its tree.

End of run: when the root process's exit line arrives, a grace period of
``spec.wait_descendants`` seconds starts.  If strace is still running when it
is over (descendants alive, such as a double-forked daemon),
``options["descendants"]`` decides: ``kill`` kills the tree (strace reports
the deaths and exits); ``follow`` keeps recording until the tree is gone;
``detach`` (the default) sends strace SIGINT (``-I2`` lets it act on that
signal: it detaches cleanly and exits), and every traced process still alive
is reported as a ``process.detach`` event and listed in
``result().still_running``.  The stream ends when strace has exited and the
FIFO is drained; that is the end-of-run signal.

Blinding: strace exiting while processes of the run are alive, without our
asking, sets ``result().monitor_lost``, emits a ``monitor-lost:`` event and
kills what is left (``options={"on_monitor_lost": "keep"}`` does not); a
tracer found stopped is resumed (``monitor-stopped:``); a ``CLONE_UNTRACED``
child is killed as soon as its clone is parsed.

spyglass itself killed mid-run: its watchdog (``watchdog.py`` beside this
file) keeps strace tracing, kills the tree and leaves ``monitor-lost.json``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator

from spyglass.capture import ident, procfs
from spyglass.capture.base import (
    CaptureResult,
    LaunchSpec,
    StillRunning,
    detach_on_close,
    followed_note,
    tell_following,
)
from spyglass.capture.handover import Empty, Handover
from spyglass.capture.reap import wait_exit
from spyglass.capture.strace import host
from spyglass.capture.strace import watchdog as strace_watchdog
from spyglass.capture.strace.command import strace_command
from spyglass.capture.strace.parser import StraceParser
from spyglass.errors import CaptureError
from spyglass.events.schema import Event

TYPE_CHECKING = False
if TYPE_CHECKING:
    from spyglass.capture.watchdog import Watchdog

#: What happens to processes still alive when the grace period after the root's exit is over
DESCENDANTS = ("kill", "follow", "detach")
_DETACH_SECCOMP = "left running with strace's seccomp filter: its traced system calls now fail with ENOSYS"
_KILL_GRACE = 5.0  # seconds to let a killed tree report its deaths before detaching anyway
_FIFO = "trace"  # the FIFO from strace, in a directory of its own
_FIFO_BYTES = 64 << 10  # its size
_DRAIN_LIMIT = 0.25  # seconds spent draining queued output before detaching
_LINGER = 0.002  # seconds queued events may wait for more (handover.py)
_SECCOMP_NOTE = (
    "{n} process(es) left running still carry strace's seccomp filter: their traced system calls "
    'fail with ENOSYS from now on (run with options={{"seccomp": False}} to avoid this)'
)


class StraceSession:
    """One traced run.  ``events()`` must be consumed for the run to make progress."""

    def __init__(self, spec: LaunchSpec, strace: str, *, seccomp: bool = True) -> None:
        self.spec = spec
        self.seccomp = seccomp
        cwd = os.path.realpath(spec.cwd)
        self.parser = StraceParser(
            cwd=cwd,
            uid=os.geteuid(), gid=os.getegid(),
            realpath_dir=host.realpath_dir, hosts_file=host.hosts_file, fd_link=host.fd_link, pgid_of=host.pgid_of,
            protected=ident.from_options(spec.options),
        )
        self._result = CaptureResult()
        # guards the parser and the FIFO ends across threads; re-entrant because stop() and
        # kill_tree() may run in a signal handler while this thread is inside parser.feed()
        self._lock = threading.RLock()
        # bounded: a slow consumer slows strace, not memory; lingering: one wake-up of the consumer per
        # _LINGER, not one per read of the FIFO (a busy trace comes a line or two at a time)
        self._queue = Handover(urgent=spec.urgent, linger=_LINGER)
        self._detached = False
        self._killing = False
        self._tracer: int | None = None  # strace's own pid (it runs as the command's grandchild)
        self._tracer_sought = False  # the reader looked for it at strace's first output
        self._comm = os.path.basename(strace)[:15]  # its /proc/<pid>/comm
        self._adopting = False
        self._ended_tree = False  # we killed the tree at the end of the grace period
        descendants = spec.options.get("descendants", "detach")
        self.descendants = descendants if descendants in DESCENDANTS else "detach"
        self._follow_from: float | None = None  # follow: when the grace period ends (monotonic)
        self._following: float | None = None  # follow: when following began (-1: nothing was left)
        self._followed = 0
        self._dir = host.private_dir("spyglass-strace-")
        fifo = os.path.join(self._dir, _FIFO)
        wd_fd: int | None = None
        self._watchdog: Watchdog | None = None
        self._wd_fd: int | None = None  # the watchdog's read end of the FIFO, closed after it
        self._wd_pid: int | None = None
        try:
            os.mkfifo(fifo, 0o600)
            self._rfd: int | None = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
            # a writer end of our own until strace has opened the FIFO (first data) or the
            # command is gone: an early strace failure cannot leave the reader blocked forever
            self._wfd: int | None = os.open(fifo, os.O_WRONLY)
            # the watchdog's read end (a description of its own), then no name for the FIFO at all:
            # a name in /tmp, there until strace's first lines were read, let a quick command open a
            # read end of its own and take lines spyglass never saw.  strace opens it through our
            # writer end's /proc link instead (the run reaching /proc/<spyglass>/fd/* is
            # evasion-kill-monitor)
            wd_fd = strace_watchdog.open_end(fifo, spec)
            host.remove_dir(self._dir, (_FIFO,))
            # the watchdog before the command: an agent that kills spyglass at its first step must
            # find one to notice
            self._watchdog, self._wd_fd = strace_watchdog.start(wd_fd, 0, spec, self._result.notes)
            wd_fd = None  # the watchdog's now (closed by start when it could not be started)
            os.set_blocking(self._rfd, True)
            host.grow_pipe(self._rfd, _FIFO_BYTES)  # small: unseen by the fast lane while it waits
            cmd = strace_command(
                f"/proc/{os.getpid()}/fd/{self._wfd}",
                [*spec.wrapper, *spec.argv],
                seccomp=seccomp,
                strace=strace,
                fd_tracking=spec.options.get("fd_tracking") is True,
            )
            # with -DD the Popen child *is* the traced command (strace is its grandchild,
            # orphaned at start-up: adopt it so that it can be reaped)
            host.adopt_orphans(True)
            self._adopting = True
            stdin, stdout, stderr = spec.stdio or (None, None, None)
            self._proc = subprocess.Popen(
                cmd, cwd=cwd, env=spec.env, close_fds=True, stdin=stdin, stdout=stdout, stderr=stderr
            )
        except OSError as exc:
            if wd_fd is not None:
                os.close(wd_fd)
            self._stop_adopting()
            self._cleanup()
            raise CaptureError(f"cannot start strace: {exc}") from exc
        if self._watchdog is not None:
            self._watchdog.send(f"root {self._proc.pid} {procfs.start_time(self._proc.pid)}")
        self._news_at = time.monotonic()
        threading.Thread(target=self._read, name="strace-reader", daemon=True).start()
        threading.Thread(target=self._watch, name="strace-watcher", daemon=True).start()

    @property
    def helper_pids(self) -> list[int]:
        """spyglass's helpers (the watchdog): a signal from the run to one is an attack on the monitor."""
        pid = self._watchdog.pid if self._watchdog is not None else self._wd_pid
        return [pid] if pid is not None else []

    def _helper_news(self, force: bool = False) -> list[Event]:
        """The watchdog found gone while the run goes on (``monitor-helper-lost:``); looked at twice a
        second at most."""
        now = time.monotonic()
        if self._watchdog is None or (not force and now - self._news_at < 0.5):
            return []
        self._news_at = now
        pid = self.parser.root_pid if self.parser.root_pid is not None else self._proc.pid
        return list(self._watchdog.events(pid, self._result.notes))

    def _tell_tracer(self, tracer: int) -> None:
        self._tracer = tracer
        if self._watchdog is not None:
            self._watchdog.send(f"tracer {tracer}")

    @property
    def tracer_pid(self) -> int | None:
        """strace's own pid, once it is known (after its first output)."""
        return self._tracer

    @property
    def lost_events(self) -> int:
        """strace stops each traced process at each call: it drops nothing."""
        return 0

    # --- threads ------------------------------------------------------------

    def _read(self) -> None:
        """Reader thread: FIFO -> parser -> queue of event batches.

        Parsing here, as soon as strace reports a call, means the host look-ups
        (symlinks, hosts files through ``/proc/<pid>/root``) run while the
        process is most likely still alive, however slow the consumer is.
        """
        buf = b""
        rfd = self._rfd
        writer_open = True
        try:
            while rfd is not None:
                chunk = os.read(rfd, 1 << 16)
                if not chunk:
                    break
                if writer_open:  # strace has the FIFO open: EOF now means strace is gone
                    self._close_writer()
                    writer_open = False
                    host.remove_dir(self._dir, (_FIFO,))  # nothing left behind if we die
                buf += chunk
                if b"\n" not in chunk:
                    continue
                *lines, buf = buf.split(b"\n")
                self._parse(lines)
        except OSError:
            pass
        finally:
            if buf:
                self._parse([buf])
            with self._lock:
                tail = self.parser.finish()
            self._queue.put(tail)
            self._queue.put(None)

    def _parse(self, lines: list[bytes]) -> None:
        out: list[Event] = []
        with self._lock:
            for line in lines:
                out.extend(self.parser.feed(line.decode("utf-8", "surrogateescape")))
        for ev in out:
            if self._killing and ev.type == "process.start":  # kill_tree() in progress: newborns die too
                host.kill(ev.pid)
            elif ev.target_pid is not None and ev.target_pid in self.parser.state.untraced:
                # a CLONE_UNTRACED child cannot be observed: it is not allowed to run
                host.kill(ev.target_pid)
                ev.detail = f"{ev.detail}; killed"
        if not self._tracer_sought and out:  # strace is attached: known before its events go out
            self._tracer_sought = True
            tracer = self._find_tracer()
            if tracer is not None:
                self._tell_tracer(tracer)
                if self.spec.on_monitor is not None:
                    self.spec.on_monitor([tracer])
        self._queue.put(out)

    def _watch(self) -> None:
        self._proc.wait()  # also reaps the command if it outlives a detach
        self._close_writer()

    def _close_writer(self) -> None:
        with self._lock:
            wfd, self._wfd = self._wfd, None
        if wfd is not None:
            os.close(wfd)

    # --- the stream -----------------------------------------------------------

    def events(self) -> Iterator[Event]:
        """Events as strace reports them; ends when strace has exited and everything is read.

        Closing the generator early detaches from the tree (which keeps running).
        """
        return detach_on_close(self._stream(), self._abandon)

    def _abandon(self) -> None:
        self._detach()
        threading.Thread(target=self._drain, name="strace-drain", daemon=True).start()

    def _stream(self) -> Iterator[Event]:
        parser = self.parser
        grace = self.spec.wait_descendants
        deadline: float | None = None
        killing = False
        while True:
            timeout = 0.5 if deadline is None or self._detached else max(0.0, deadline - time.monotonic())
            try:
                batch = self._queue.get(timeout=timeout)
            except Empty:
                batch = self._resume_stopped_tracer()
            if batch is None:
                break
            batch = [*batch, *self._helper_news()] if self._watchdog is not None else batch
            if self._adopting and parser.lines:  # strace is attached: its start-up orphaning is over
                if self._tracer is None and (found := self._find_tracer()) is not None:  # before the batch
                    self._tell_tracer(found)  # (its consumer may ask)
                self._stop_adopting()
            yield from batch
            if self._killing and not killing:
                # after kill_tree() the tree is dying: give strace time to report every death
                killing = True
                deadline = time.monotonic() + _KILL_GRACE
            elif deadline is None and parser.root_exited and self.descendants != "follow":
                deadline = time.monotonic() + max(0.0, grace)
            elif self.descendants == "follow" and parser.root_exited and self._following is None:
                self._follow_check(grace)
            if deadline is not None and not self._detached:
                now = time.monotonic()
                # at the deadline, first drain what has already arrived (bounded for chatty trees)
                if now >= deadline and (self._queue.empty() or now >= deadline + _DRAIN_LIMIT):
                    if self.descendants == "kill" and not killing:
                        self._end_tree()  # the grace period is over: the tree ends with the run
                    else:
                        self._detach()
        yield from self._finish()

    def _follow_check(self, grace: float) -> None:
        """``descendants: follow``: once the grace period is over, tell the caller what is followed."""
        now = time.monotonic()
        self._follow_from = now + max(0.0, grace) if self._follow_from is None else self._follow_from
        if now >= self._follow_from:
            with self._lock:
                alive = [p.pid for p in self.parser.live() if host.running(p.pid)]
            self._following, self._followed = (now, len(alive)) if alive else (-1.0, 0)  # -1: none left
            if alive:
                tell_following(self.spec, alive, self.parser.root_exit_code, self.parser.root_signal)

    def _finish(self) -> Iterator[Event]:
        parser, res = self.parser, self._result
        if self._following is not None and self._following >= 0:
            res.notes.append(followed_note(self._followed, time.monotonic() - self._following))
        rc = self._proc.poll()
        if rc is None and parser.root_exited:  # it has exited; give the watcher a moment to reap it
            rc = wait_exit(self._proc, 2)
        res.root_pid = parser.root_pid
        res.lines, res.unparsed, res.handover = parser.lines, parser.unparsed, self._queue.stats()
        if parser.root_exited:
            res.exit_code, res.signal = parser.root_exit_code, parser.root_signal
        elif rc is not None:  # strace missed the exit (or never ran): the command's own status
            if rc < 0:
                res.signal = signal.Signals(-rc).name if -rc in signal.valid_signals() else None
            else:
                res.exit_code = rc
        if parser.root_pid is None:
            res.notes.append(f"strace produced no trace (exit status {rc})")
        yield from self._helper_news(force=True)
        if not self._detached and parser.root_pid is not None:
            yield from self._check_lost()
        if self._detached:
            now = time.time_ns()
            for proc in parser.live():
                if not host.running(proc.pid):
                    continue
                res.still_running.append(StillRunning(proc.pid, proc.argv))
                detail = _DETACH_SECCOMP if self.seccomp else "left running, no longer recorded"
                yield Event(type="process.detach", ts=now, pid=proc.pid, argv=proc.argv, detail=detail)
            if res.still_running:
                res.notes.append(f"detached from {len(res.still_running)} process(es) still running")
                if self.seccomp:
                    res.notes.append(_SECCOMP_NOTE.format(n=len(res.still_running)))
        self._cleanup()

    def _resume_stopped_tracer(self) -> list[Event]:
        """A quiet stream may mean a stopped tracer (SIGSTOP/SIGTSTP from the run): every tracee then
        blocks at its next traced call.  Resume it and say so."""
        tracer = self._tracer
        if tracer is None or host.state(tracer) not in (b"T", b"t"):
            return []
        try:
            os.kill(tracer, signal.SIGCONT)
        except OSError:
            return []
        pid = self.parser.root_pid if self.parser.root_pid is not None else self._proc.pid
        detail = f"monitor-stopped: the tracer (pid {tracer}) was found stopped and was resumed"
        self._result.notes.append(detail)
        return [Event(type="sys.sensitive", ts=time.time_ns(), pid=pid, detail=detail)]

    def _check_lost(self) -> Iterator[Event]:
        """strace is gone though we never asked it to stop: were processes of the run still alive?

        Then the run was blinded (its tracer killed or told to detach): the result says
        ``monitor_lost``, an event says so, and what is left of the tree is killed unless
        ``options={"on_monitor_lost": "keep"}``.
        """
        parser, res = self.parser, self._result
        alive = [p for p in parser.live() if host.running(p.pid)]
        if not alive and parser.root_exited:
            return
        res.monitor_lost = True
        names = ", ".join(f"{p.pid} ({' '.join(p.argv or [])[:60]})" for p in alive[:5]) or "the agent"
        detail = f"monitor-lost: the tracer stopped while {len(alive) or 1} process(es) of the run were alive: {names}"
        keep = self.spec.options.get("on_monitor_lost") == "keep"
        if not keep:
            pids = [p.pid for p in alive] + ([self._proc.pid] if self._proc.poll() is None else [])
            procfs.kill_all(pids, stop=False)  # traced: a SIGSTOP would be the tracer's to handle
            detail += "; killed"
        res.notes.append(detail)
        pid = parser.root_pid if parser.root_pid is not None else self._proc.pid
        yield Event(type="sys.sensitive", ts=time.time_ns(), pid=pid, detail=detail)

    def _end_tree(self) -> None:
        """``descendants: kill``: the processes still alive after the grace period are killed."""
        with self._lock:
            alive = [p for p in self.parser.live() if host.running(p.pid)]
        if alive:
            names = ", ".join(f"{p.pid} ({' '.join(p.argv or [])[:60]})" for p in alive[:5])
            self._result.notes.append(f"killed {len(alive)} process(es) still running after the run: {names}")
        self.kill_tree()

    def _drain(self) -> None:
        """After the stream was abandoned: discard the rest, then clean up (and reap strace)."""
        self._queue.close()
        while self._queue.get() is not None:
            pass
        self._cleanup()

    def _stop_adopting(self) -> None:
        if self._adopting:
            self._adopting = False
            host.adopt_orphans(False)

    def _find_tracer(self) -> int | None:
        """strace's pid: the tracer of the command, or of any live traced process."""
        with self._lock:
            candidates = [self._proc.pid, *(p.pid for p in self.parser.live())]
        for pid in candidates:
            tracer = host.tracer_of(pid)
            if tracer is not None and host.comm_is(tracer, self._comm):
                return tracer
        # every traced process is gone already (a short command): strace, orphaned at
        # start-up, is our adopted child until it is reaped
        mine = [pid for pid in host.children_of_self() if host.comm_is(pid, self._comm)]
        return mine[0] if len(mine) == 1 else None

    def _detach(self) -> None:
        if self._detached:
            return
        self._detached = True
        self._close_watchdog()  # the tree is let go on purpose: spyglass's death no longer concerns it
        tracer = self._tracer
        if tracer is None or not host.comm_is(tracer, self._comm):  # gone, or the pid was reused
            tracer = self._find_tracer()
        if tracer is not None:
            try:
                os.kill(tracer, signal.SIGINT)  # -I2: strace detaches from every tracee and exits
            except OSError:
                pass

    def _close_watchdog(self) -> None:
        """``done`` to the watchdog (it exits), then our copy of its FIFO end is closed (the
        watchdog, spawned before the command, holds its own)."""
        wd, self._watchdog = getattr(self, "_watchdog", None), None
        if wd is not None:
            wd.close()
            self._wd_pid = wd.proc.pid if wd.proc is not None else None  # (helper_pids, once it is told)
        fd, self._wd_fd = getattr(self, "_wd_fd", None), None
        if fd is not None:
            os.close(fd)

    def _cleanup(self) -> None:
        self._close_watchdog()
        self._stop_adopting()
        if self._tracer is None or not host.reap_child(self._tracer):
            host.reap_zombies(self._comm)
        with self._lock:
            fds = [getattr(self, "_rfd", None), getattr(self, "_wfd", None)]
            self._rfd = self._wfd = None
        for fd in fds:
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        host.remove_dir(self._dir, (_FIFO,))

    # --- control --------------------------------------------------------------

    def stop(self) -> None:
        """Detach from the tree (it keeps running); the stream ends once strace has exited."""
        self._detach()

    def kill_tree(self) -> None:
        """SIGKILL every live process of the traced tree (and its process group); the stream then ends.

        Children forked while this runs are killed as their ``process.start`` arrives.
        """
        self._killing = True
        with self._lock:
            pids = [p.pid for p in self.parser.live()]
        pids.append(self._proc.pid)
        groups: set[int] = set()
        try:
            groups.add(os.getpgid(self._proc.pid))
        except OSError:
            pass
        groups.discard(os.getpgrp())
        for pgid in groups:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass
        procfs.kill_all(pids, stop=False)  # traced: a SIGSTOP would be the tracer's to handle

    def result(self) -> CaptureResult:
        return self._result


