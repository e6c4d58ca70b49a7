"""The agent on a pseudo-terminal that spyglass owns, and the sink that records it.

``PtyRelay`` opens a pty pair; the agent gets the slave end as its stdin,
stdout and stderr (its controlling terminal is still the operator's: only
its standard streams move, so job control and signals behave as before).
Two threads copy bytes: operator terminal -> pty master (recorded as ``i``)
and pty master -> operator terminal (recorded as ``o``).  When spyglass's
stdin is a terminal it is put in raw mode for the run and restored after, so
that keys reach the agent as typed; when it is not (CI, a pipe), what
arrives on it is relayed and its end becomes an end-of-file for the agent.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import struct
import sys
import termios
import threading
import tty
from pathlib import Path
from typing import Any

from spyglass.pipeline import RunContext
from spyglass.tty.cast import CastWriter
from spyglass.tty.redact import Redactor

_IDLE = 0.2  # seconds without output before the redactor's held-back tail is written


def _winsize(fd: int) -> tuple[int, int]:
    try:
        rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
        if rows and cols:
            return cols, rows
    except OSError:
        pass
    return 80, 24


class PtyRelay:
    def __init__(self, writer_factory: Any, *, stdin: int = 0, stdout: int = 1) -> None:
        self._factory = writer_factory
        self.stdin, self.stdout = stdin, stdout
        self.master, self.slave = os.openpty()
        self.cols, self.rows = _winsize(stdout if os.isatty(stdout) else stdin)
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", self.rows, self.cols, 0, 0))
        self.writer: CastWriter | None = None
        self._saved: list[Any] | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._wake_r, self._wake_w = os.pipe()

    @property
    def stdio(self) -> tuple[int, int, int]:
        return self.slave, self.slave, self.slave

    def start(self) -> None:
        self.writer = self._factory(self.cols, self.rows)
        if os.isatty(self.stdin):
            with contextlib.suppress(termios.error):
                self._saved = termios.tcgetattr(self.stdin)
                tty.setraw(self.stdin)
        for target, name in ((self._pump_out, "tty-out"), (self._pump_in, "tty-in")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def _pump_out(self) -> None:
        assert self.writer is not None
        while True:
            try:
                ready, _, _ = select.select([self.master], [], [], _IDLE)
            except (OSError, ValueError):
                break
            if not ready:
                self.writer.idle()
                if self._stop.is_set():
                    break
                continue
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: every slave end is closed
                break
            if not data:
                break
            with contextlib.suppress(OSError):
                _write_all(self.stdout, data)
            self.writer.output(data)

    def _pump_in(self) -> None:
        assert self.writer is not None
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self.stdin, self._wake_r], [], [], 1.0)
            except (OSError, ValueError):
                return
            if self._wake_r in ready:
                return
            if not ready:
                continue
            try:
                data = os.read(self.stdin, 4096)
            except OSError:
                return
            if not data:  # the operator's stdin ended: end-of-file for the agent
                with contextlib.suppress(OSError):
                    os.write(self.master, b"\x04")
                return
            self.writer.input(data)
            with contextlib.suppress(OSError):
                _write_all(self.master, data)

    def close_slave(self) -> None:
        """After the agent started: only the agent holds the slave now, so its exit ends the output."""
        with contextlib.suppress(OSError):
            os.close(self.slave)

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        for t in self._threads:
            t.join(timeout=2.0)
        if self._saved is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self.stdin, termios.TCSADRAIN, self._saved)
        for fd in (self.master, self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.writer is not None:
            self.writer.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class TerminalRecorder:
    """Pipeline sink: records the run's terminal into ``evidence/terminal.cast``.

    The relay starts before the agent (the session hands ``stdio`` to the
    capture backend) and the recording is closed in ``done``, before the run's
    final checkpoint, which therefore covers it.
    """

    name = "terminal"
    FILE = "terminal.cast"

    def __init__(self, run_dir_of: Any, *, literals: tuple[str, ...] = (), patterns: tuple[str, ...] = (),
                 max_bytes: int = 64 * 1024 * 1024) -> None:
        self._run_dir_of = run_dir_of  # run id -> the run's directory
        self.redactor_args = (literals, patterns)
        self.max_bytes = max_bytes
        self.relay = PtyRelay(self._writer)
        self._run_dir: Path | None = None
        self.summary: dict[str, Any] = {}

    @property
    def stdio(self) -> tuple[int, int, int]:
        return self.relay.stdio

    def _writer(self, cols: int, rows: int) -> CastWriter:
        assert self._run_dir is not None
        evdir = self._run_dir / "evidence"
        evdir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k in ("TERM", "SHELL") if (v := os.environ.get(k))}
        return CastWriter(evdir / self.FILE, width=cols, height=rows, redactor=Redactor(*self.redactor_args),
                          max_bytes=self.max_bytes, env=env)

    def start(self, ctx: RunContext) -> None:
        self._run_dir = ctx.run_dir if ctx.run_dir is not None else Path(self._run_dir_of(ctx.run_id))
        self.relay.start()

    def launched(self) -> None:
        self.relay.close_slave()

    def done(self, ctx: RunContext) -> None:
        self.relay.stop()
        w = self.relay.writer
        if w is not None:
            self.summary = {"file": f"evidence/{self.FILE}", "start_ns": w.start_ns, "seconds": round(w.duration, 3),
                            "output_chars": w.counts["o"], "input_chars": w.counts["i"], "cut": w.cut}
            ctx.note_fact("terminal", self.summary)


def stdin_is_tty() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()
