"""An agent that leaves a daemon behind: a double-forked child in a session of its own (setsid).

``daemonize.py TAG stay|leave``: names itself ``TAG-a`` and the daemon ``TAG-d`` (the process name,
which the test looks for in /proc: pids inside a sandbox are not the host's), touches ``ready``
once the daemon runs.  ``stay``: the agent and the daemon keep working (a system call every 0.1 s,
for up to a minute), as an agent whose monitor died would.  ``leave``: the agent exits at once and
the daemon sleeps for a minute (what a tool that starts a server does).
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

PR_SET_NAME = 15


def name(text: str) -> None:
    ctypes.CDLL(None).prctl(PR_SET_NAME, text.encode()[:15], 0, 0, 0)


def work(busy: bool) -> None:
    for _ in range(600):
        time.sleep(0.1)
        if busy:
            os.close(os.open("/dev/null", os.O_RDONLY))


def main() -> None:
    tag, mode = sys.argv[1], sys.argv[2]
    up = f"{tag}.daemon-up"
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)  # a daemon lets go of the terminal (or the caller's pipes)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            name(f"{tag}-d")
            open(up, "w").close()
            work(busy=mode == "stay")
            os._exit(0)
        os._exit(0)
    name(f"{tag}-a")
    while not os.path.exists(up):
        time.sleep(0.01)
    open("ready", "w").close()
    if mode == "stay":
        work(busy=True)


if __name__ == "__main__":
    main()
