"""Live OpenTelemetry export of a run: a pipeline sink and its worker process.

Every event and alert is written, as one JSON line, to the pipe of a worker
process (:mod:`spyglass.otel.worker`) that maps it to a log record and sends
it in batches through the OpenTelemetry SDK's OTLP exporters; at the end of
the run the worker also gets the run's metadata and agent view and sends the
spans (the run, its tool calls, its processes).

The recorder's side is cheap and never waits: lines collect in a buffer
that is written to the pipe without blocking; when the worker falls behind
(a collector slow or down) and the buffer reaches its bound, further
records are dropped and counted.  At the end the sink waits for the worker's
account of what was sent (as long as the worker reports progress, at most
``flush_timeout`` seconds without any and ``max_wait`` in all), writes it
to ``run.json`` (``extra.otlp``) and, when something was not sent, says so with
the command that re-sends the run from the store.  The SDK is imported only
in the worker, so a run pays for it only when export is on, and then in
another process.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import select
import subprocess
import sys
import time
from typing import IO, Any

import msgspec

from spyglass.events import Alert, Event
from spyglass.otel.config import OtlpTarget
from spyglass.otel.mapping import resource_attributes
from spyglass.pipeline import RunContext, Sink

_F_SETPIPE_SZ = 1031
_enc = msgspec.json.Encoder()


class OtlpSink(Sink):
    name = "otlp-export"

    def __init__(
        self,
        target: OtlpTarget,
        *,
        max_buffer_bytes: int = 16 << 20,
        flush_timeout: float | None = None,
        max_wait: float = 60.0,
        stall_grace: float = 1.0,
        stream: IO[str] | None = None,
        quiet: bool = False,
    ) -> None:
        self.target = target
        self.max_buffer_bytes = max_buffer_bytes
        #: the most the end of the run waits for a worker that makes no progress (default: the request timeout)
        self.flush_timeout = flush_timeout if flush_timeout is not None else target.timeout
        #: the most the end of the run waits in all, progress or not
        self.max_wait = max_wait
        #: at the end, a request left unanswered this long by a collector that has not taken a
        #: record yet means it is stalled: the rest is counted as not sent at once
        self.stall_grace = stall_grace
        self.stream = stream
        self.quiet = quiet
        self.proc: subprocess.Popen[bytes] | None = None
        self.fd = -1
        self.out_fd = -1
        self.buf = bytearray()
        self.dropped = {"logs": 0}
        self.handed = 0
        self.run: Any = None
        self.result: dict[str, Any] | None = None
        self._lines = b""  # the worker's output not yet read as whole lines
        self._inflight: float | None = None  # since when a request waits for the collector's answer
        self._sent = 0  # log records the worker last said were sent
        self._answer = b""  # the worker's account (its last line)

    # -- the worker --------------------------------------------------------------
    def start(self, ctx: RunContext) -> None:
        if ctx.run is None:
            return
        self.run = run = ctx.run
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "spyglass.otel.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None if os.environ.get("SPYGLASS_OTLP_DEBUG") else subprocess.DEVNULL,
            start_new_session=True,  # an operator's Ctrl-C to the run is not for the exporter
            close_fds=True,
        )
        assert self.proc.stdin is not None
        self.fd = self.proc.stdin.fileno()
        try:
            fcntl.fcntl(self.fd, _F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass
        os.set_blocking(self.fd, False)
        assert self.proc.stdout is not None
        self.out_fd = self.proc.stdout.fileno()
        os.set_blocking(self.out_fd, False)
        t = self.target
        header = {
            "target": {**t.to_json(), "headers": t.headers, "timeout": t.timeout},
            "resource": resource_attributes(run),
            "run_id": run.id,
            "policy_digest": run.policy_digest,
            "task": run.task,
            "agent_id": run.agent_id,
            "host": run.host,
        }
        self.buf += json.dumps(header).encode() + b"\n"
        self._pump()

    def _pump(self, drain: bool = True) -> None:
        """Write what the pipe takes now, without waiting (and, with ``drain``, read the
        worker's progress lines, so that its output pipe never fills on a long run)."""
        if drain:
            try:
                while chunk := os.read(self.out_fd, 1 << 16):
                    self._heard(chunk)
            except OSError:  # nothing there now (EAGAIN), or the worker is gone
                pass
        while self.buf:
            try:
                n = os.write(self.fd, self.buf)
            except BlockingIOError:
                return
            except OSError as exc:  # the worker is gone: nothing more can be sent
                if exc.errno in (errno.EPIPE, errno.EBADF):
                    self.buf.clear()
                    return
                raise
            del self.buf[:n]

    def _heard(self, chunk: bytes) -> bool:
        """Take in the worker's output: ``S`` (a request under way), ``P N SENT`` (a batch
        done), the account (a JSON line).  True when something progressed."""
        self._lines += chunk
        *lines, self._lines = self._lines.split(b"\n")
        progressed = False
        for line in lines:
            if line == b"S":
                self._inflight = time.monotonic()
            elif line.startswith(b"P "):
                self._inflight = None
                parts = line.split()
                if len(parts) > 2:
                    self._sent = int(parts[2])
                progressed = True
            elif line.startswith(b"{"):
                self._answer = line
                progressed = True
        return progressed

    def _put(self, kind: bytes, data: bytes) -> None:
        if len(self.buf) >= self.max_buffer_bytes:
            # full: the worker is behind (a collector slow or down); try the pipe again only
            # now and then, so that a dropped record costs next to nothing
            if not self.dropped["logs"] % 256:
                self._pump()
            if len(self.buf) >= self.max_buffer_bytes:
                self.dropped["logs"] += 1
                return
        self.buf += kind
        self.buf += data
        self.buf += b"\n"
        self.handed += 1
        if len(self.buf) >= 1 << 16 or not self.handed % 512:
            self._pump()

    # -- hooks -------------------------------------------------------------------
    def event(self, ev: Event) -> None:
        if self.proc is not None:
            self._put(b"E", _enc.encode(ev))

    def alert(self, alert: Alert) -> None:
        if self.proc is not None:
            self._put(b"A", _enc.encode(alert))

    def done(self, ctx: RunContext) -> None:
        if self.proc is None:
            return
        agent = self.run.extra.get("agent")  # the agent-awareness sink's view, noted in its done
        end = time.time_ns()
        if self.run.ended is None:  # the run ended now: the wait for the collector below is not part of it
            self.run.ended = end
        done = {"run": msgspec.to_builtins(self.run), "agent": agent}
        done["end"] = end
        self.buf += b"D" + json.dumps(done, default=str).encode() + b"\n"
        self.result = self._finish(time.monotonic() + self.flush_timeout)
        self.run.extra["otlp"] = self.result
        self._report()

    def _finish(self, deadline: float) -> dict[str, Any]:
        """Hand the worker the rest, close its input, and wait for its account.

        While the worker reports progress (``P`` after each batch: it is sending, or
        catching up on a long run) the wait goes on; ``flush_timeout`` without progress,
        ``max_wait`` in all, or (from a collector that has not taken a record yet) a request
        left unanswered for ``stall_grace`` ends it."""
        proc = self.proc
        assert proc is not None and proc.stdout is not None and proc.stdin is not None
        out_fd = proc.stdout.fileno()
        hard = time.monotonic() + self.max_wait
        closed = False
        stalled = False
        while not self._answer:
            now = time.monotonic()
            # a collector that has not taken a single record this run, with a request left
            # unanswered: stalled (one that has answered before may just be slow: the timeout)
            suspect = self._inflight if not self._sent else None
            if suspect is not None and now - suspect >= self.stall_grace:
                stalled = True
                break
            until = min(deadline, hard)
            if suspect is not None:
                until = min(until, suspect + self.stall_grace)
            if now >= min(deadline, hard):
                break
            if not self.buf and not closed:
                proc.stdin.close()
                closed = True
            writers = [self.fd] if self.buf and not closed else []
            ready_r, ready_w, _ = select.select([out_fd], writers, [], max(0.0, until - now))
            if ready_w:
                self._pump(drain=False)
            if not ready_r:
                continue
            try:
                chunk = os.read(out_fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                break
            if self._heard(chunk):
                deadline = time.monotonic() + self.flush_timeout
        lost_at_end = 1 if self.buf else 0  # the spans line did not make it
        if not closed:
            try:
                proc.stdin.close()
            except OSError:
                pass
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
        base = {**self.target.to_json(), "target": self.target.describe()}
        try:
            got = json.loads(self._answer)
        except ValueError:
            got = None
        dropped = self.dropped["logs"]
        total = self.handed + dropped
        if got is None:  # no account: what the worker last said was sent, and nothing more
            sent = min(self._sent, total)
            why = (
                f"the collector left a request unanswered for {self.stall_grace:g} s at the end of the run"
                if stalled
                else f"the export gave no account (no progress for {self.flush_timeout:g} s)"
            )
            return {
                **base,
                "spans": {"emitted": 0, "sent": 0, "unsent": 1},  # the spans were not even built
                "logs": {"emitted": total, "sent": sent, "unsent": total - sent},
                "complete": False,
                "error": why,
            }
        sent = min(int(got["logs"]["sent"]), total)
        logs = {"emitted": total, "sent": sent, "unsent": total - sent}
        spans = got["spans"]
        complete = logs["unsent"] == 0 and spans["unsent"] == 0 and not lost_at_end
        return {**base, "spans": spans, "logs": logs, "complete": complete, "error": got.get("error")}

    def _report(self) -> None:
        r = self.result
        if r is None or self.quiet:
            return
        out = self.stream or sys.stderr
        if r["complete"]:
            out.write(
                f"spyglass: otlp: sent {r['spans']['sent']} spans and {r['logs']['sent']} log records "
                f"to {self.target.describe()}\n"
            )
            out.flush()
            return
        unsent = r["spans"]["unsent"] + r["logs"]["unsent"]
        total = r["spans"]["emitted"] + r["logs"]["emitted"]
        why = f" ({r['error']})" if r.get("error") else ""
        out.write(
            f"spyglass: otlp: {unsent} of {total} records not sent to {self.target.describe()}{why}; "
            f"re-send with `spyglass export {self.run.id} --otlp {self.target.endpoint}`\n"
        )
        out.flush()
