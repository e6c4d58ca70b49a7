"""spyglass's side of a capture backend's watchdog: start it, tell it, hear from it, end it.

Each backend has its own watchdog script (``capture/ebpf/watchdog.py``,
``capture/strace/watchdog.py``): a small process beside the run, outside the
recorded tree and in a session of its own, that acts when spyglass itself dies
mid-run.  This class spawns the script (``python -I -S``, the configuration as
marshal, one end of a socket pair whose other end only spyglass holds), sends it
lines (``root PID START``, ``tracer N``, ``done``), reads what it says (``stopped``),
resumes it when the run stopped it (``monitor-stopped:``) and notices its death
(``monitor-helper-lost:``).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import _socket

    from spyglass.events.schema import Event


class Watchdog:
    """Start a watchdog script, tell it the root, hear from it, end it."""

    script = ""  # the script a subclass runs by default
    gone_reported: bool
    _traced_reported: bool
    error: str | None  # why it could not be started (said once in the run's notes)
    proc: Any  # its Popen, once spawned

    def events(self, root: int, notes: list[str]) -> Iterator[Event]:
        """What the watchdog reported, as events: spyglass found stopped, or the watchdog gone."""
        import signal

        from spyglass.events.schema import Event

        if self.error is not None:
            notes.append(self.error)
            self.error = None
        for line in self.news():
            if line.startswith("stopped"):
                detail = f"monitor-stopped: spyglass (pid {os.getpid()}) was found stopped and resumed by its watchdog"
                notes.append(detail)
                yield Event(type="sys.sensitive", ts=time.time_ns(), pid=root, detail=detail)
        yield from self._resume(root, notes)
        status = self.died()
        if status is not None and not self.gone_reported:
            self.gone_reported = True
            how = f"signal {signal.Signals(-status).name}" if -status in signal.valid_signals() else f"status {status}"
            detail = (f"monitor-helper-lost: the watchdog (pid {self.pid}) ended ({how}): "
                      "spyglass's own death would go unnoticed")
            notes.append(detail)
            yield Event(type="sys.sensitive", ts=time.time_ns(), pid=root, detail=detail)

    def _resume(self, root: int, notes: list[str]) -> Iterator[Event]:
        """The watchdog found stopped (a SIGSTOP from the run: its own session gets no Ctrl-Z) is
        resumed, as it resumes spyglass; held in a tracer's stop (ptrace) it is reported once.  A
        watchdog that sleeps through spyglass's death would leave the tree running unwatched.  Looked
        at only while the child is not reaped: its pid is still its own."""
        import signal

        from spyglass.capture import procfs
        from spyglass.events.schema import Event

        pid = self.proc.pid if self.proc is not None and self._sock is not None else None
        if pid is None or self.proc.returncode is not None:
            return
        state = procfs.state(pid)
        if state == b"T":
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                return
            detail = f"monitor-stopped: spyglass's watchdog (pid {pid}) was found stopped and resumed"
        elif state == b"t" and not self._traced_reported:
            self._traced_reported = True
            detail = (f"monitor-stopped: spyglass's watchdog (pid {pid}) is held stopped by a tracer: "
                      "spyglass's own death would go unnoticed")
        else:
            return
        notes.append(detail)
        yield Event(type="sys.sensitive", ts=time.time_ns(), pid=root, detail=detail)

    def __init__(self, cfg: dict[str, Any], fds: list[int],
                 on_pid: Callable[[Sequence[int]], None] | None = None, script: str | None = None) -> None:
        """Spawned here, before the command starts: an agent that kills spyglass at its first step
        still finds a watchdog to notice.  Until it runs, what spyglass sends waits in the socket;
        spyglass gone by then, it finds the socket closed.  Spawned from the calling thread: a
        spawn thread cost 5-10 ms more, waiting for the interpreter's lock while the main thread
        set the run up (``bench_startup.py``, strace "capture start" 17.8 ms against 8.5).
        ``script``: the file run (``self.script`` by default), given ``cfg`` with ``sock``,
        ``monitor`` and ``package_root`` added."""
        import _socket  # the pair as _socket makes it: the socket module's enums cost 1-2 ms of a start
        import marshal
        import subprocess

        mine, theirs = _socket.socketpair()  # AF_UNIX, SOCK_STREAM, not inheritable (as socket.socketpair)
        self._sock: _socket.socket | None = mine
        mine.setblocking(False)
        self._buf = b""
        self.gone_reported = False
        self._traced_reported = False
        self.proc = None
        self.error = None
        script = os.path.realpath(script or self.script)
        cfg = {**cfg, "sock": theirs.fileno(), "monitor": os.getpid(),
               "package_root": os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(script))))}  # fmt: skip
        try:
            self.proc = subprocess.Popen(
                # -I -S: no site-packages, no environment, no user paths: the interpreter alone;
                # the configuration as marshal (a builtin module, the same interpreter reads it)
                [sys.executable, "-I", "-S", script, marshal.dumps(cfg).hex()],
                pass_fds=[theirs.fileno(), *fds], start_new_session=True,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        except OSError as exc:
            self.error = f"no watchdog (spyglass's own death would go unnoticed): {exc}"
        finally:
            theirs.close()
        if self.proc is not None and on_pid is not None:
            on_pid([self.proc.pid])

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def send(self, line: str) -> None:
        if self._sock is not None:
            try:
                self._sock.sendall(line.encode() + b"\n")
            except OSError:
                pass

    def news(self) -> list[str]:
        """Lines the watchdog sent since the last call (``stopped <ns>``)."""
        if self._sock is None:
            return []
        try:
            data = self._sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError:
            data = b""
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        return [x.decode("ascii", "replace") for x in lines]

    def died(self) -> int | None:
        """The watchdog's exit status if it ended while the run goes on (killed by the run?)."""
        if self._sock is None or self.proc is None:
            return None
        status: int | None = self.proc.poll()
        return status

    def close(self) -> None:
        """The run is over: the watchdog exits as soon as it reads this, letting go of the program
        (not waited for: a watchdog still starting must not delay the end of a short run)."""
        sock, self._sock = self._sock, None
        if sock is None:
            return
        try:
            sock.setblocking(True)
            sock.sendall(b"done\n")
        except OSError:
            pass
        sock.close()
        if self.proc is not None:
            import threading

            threading.Thread(target=self.proc.wait, name="watchdog-reaper", daemon=True).start()
