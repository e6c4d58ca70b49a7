"""``spyglass run --descendants follow``: the prompt comes back when the agent exits.

Before anything else (no thread, no open store), ``run`` forks: the child is
the recorder and runs the whole session as usual; the parent only waits.
If the agent exits and leaves processes behind after the grace period, the
recorder tells the parent through a pipe (the run's id, the exit code so
far, the pids it follows), leaves the terminal (its stdio goes to
``/dev/null``, it starts a session of its own) and keeps recording until
they exit; the run is finalised then.  The parent prints one line and exits
with that code: the agent's own, or 6/7 for alerts and kills up to then.
What the followed processes do later is in the run (``spyglass show``), not
in that exit code.  When nothing is left to follow, the parent simply waits
for the recorder and exits with its status, as a plain ``run`` does.

``--wait-for-tree`` keeps the older form: ``run`` returns when the whole tree
is gone, with the verdict of the whole run.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from types import FrameType

import click

from spyglass.session import RunOptions


def fork_recorder(opts: RunOptions) -> None:
    """Return in the recorder (with ``opts.on_following`` set); the parent never returns."""
    r, w = os.pipe()  # not inherited by the agent (close_fds, and non-inheritable)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(r)

        def on_following(run_id: str, code: int, pids: list[int]) -> None:
            msg = json.dumps({"run": run_id, "code": code, "pids": pids, "recorder": os.getpid()})
            try:
                os.write(w, msg.encode() + b"\n")
                os.close(w)
            except OSError:
                pass
            _leave_terminal()

        opts.on_following = on_following
        return
    os.close(w)
    _wait_for_recorder(pid, r)


def _leave_terminal() -> None:
    """The user has the prompt back: no more terminal output, no hang-up, no Ctrl-C from it."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    try:
        os.setsid()
    except OSError:
        pass


def _wait_for_recorder(pid: int, r: int) -> None:
    # a Ctrl-C at the terminal reaches the recorder too (same process group): it stops the agent;
    # a SIGTERM or SIGHUP sent to this process is passed on to it
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def forward(signum: int, frame: FrameType | None) -> None:
        try:
            os.kill(pid, signum)
        except OSError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGHUP, forward)
    data = b""
    while True:
        try:
            chunk = os.read(r, 4096)
        except InterruptedError:
            continue
        if not chunk:
            break
        data += chunk
    os.close(r)
    if data.strip():
        msg = json.loads(data.decode())
        n = len(msg["pids"])
        click.echo(
            f"spyglass: the agent exited; still recording the {n} process(es) it left (recorder pid "
            f"{msg['recorder']}): run {msg['run']} completes when they exit (`spyglass show {msg['run']}`)",
            err=True,
        )
        sys.exit(int(msg["code"]))
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            sys.exit(1)
    code = os.waitstatus_to_exitcode(status)
    sys.exit(code if code >= 0 else 128 - code)
