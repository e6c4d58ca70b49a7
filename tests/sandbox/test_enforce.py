"""Acceptance: enforcement ends the whole sandboxed tree; daemons die with the sandbox."""

from __future__ import annotations

import os
from pathlib import Path

from sandbox_helpers import Servers, needs_bwrap, needs_strace, run_sandboxed

from spyglass.sandbox.guards import CONNECTION_FLOOD, PROCESS_FLOOD, ContainmentGuard

pytestmark = [needs_bwrap, needs_strace]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pids_of(run: object, name: str) -> list[int]:
    evs = run.events("process.exec")  # type: ignore[attr-defined]
    return sorted({e.pid for e in evs if e.ok and e.exe and os.path.basename(e.exe) == name})


def test_fork_bomb_is_stopped_and_the_whole_tree_dies(tmp_path: Path) -> None:
    script = "for i in $(seq 200); do sleep 120 & done; wait; touch survived.txt"
    guard = ContainmentGuard(enforce=True, max_live_processes=50)
    run = run_sandboxed(tmp_path, script, mode="enforce", guards=False, sinks=[guard])
    assert run.outcome.meta.stopped_by == PROCESS_FLOOD
    alert = next(a for a in run.alerts() if a.rule_id == PROCESS_FLOOD)
    assert alert.action == "kill" and alert.level == "high"
    assert not (run.ws / "survived.txt").exists()
    sleeps = pids_of(run, "sleep")
    assert sleeps and not any(alive(p) for p in sleeps)
    assert run.outcome.capture.signal == "SIGKILL" or run.outcome.exit_code != 0


FLOOD = r"""
python3 - <<'PY'
import socket
for i in range(400):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT denied.test:443 HTTP/1.1\r\n\r\n")
    s.recv(200)
    s.close()
open("flood-done.txt", "w").write("done")
PY
"""


def test_connection_flood_is_stopped(tmp_path: Path, servers: Servers) -> None:
    guard = ContainmentGuard(enforce=True, max_connections=50, window_s=10)
    run = run_sandboxed(tmp_path, FLOOD, servers=servers, mode="enforce", guards=False, sinks=[guard])
    assert run.outcome.meta.stopped_by == CONNECTION_FLOOD
    assert not (run.ws / "flood-done.txt").exists()
    assert 50 < len(run.events("proxy.request")) < 400


def test_in_contain_mode_a_flood_is_reported_not_killed(tmp_path: Path) -> None:
    guard = ContainmentGuard(enforce=False, max_live_processes=5)
    run = run_sandboxed(
        tmp_path,
        "for i in 1 2 3 4 5 6 7 8; do sleep 0.2 & done; wait; touch done.txt",
        guards=False,
        sinks=[guard],
    )
    assert run.outcome.meta.stopped_by is None and (run.ws / "done.txt").exists()
    assert [a.action for a in run.alerts() if a.rule_id == PROCESS_FLOOD] == ["alert"]


def test_a_daemon_dies_with_the_sandbox(tmp_path: Path) -> None:
    script = "setsid sleep 300 > /dev/null 2>&1 & (setsid sh -c 'sleep 301' &); sleep 0.3; echo started"
    run = run_sandboxed(tmp_path, script)
    assert run.outcome.exit_code == 0
    sleeps = pids_of(run, "sleep")
    assert len(sleeps) == 3 and not any(alive(p) for p in sleeps)
    assert not run.outcome.meta.still_running


URING = r"""
python3 - <<'PY' > uring.txt
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(425, 4, ctypes.create_string_buffer(120))
print(r, ctypes.get_errno())
PY
"""


def test_io_uring_is_blocked_and_recorded(tmp_path: Path) -> None:
    # without strace's own seccomp filter the tracer sees the refused call (with it,
    # the sandbox's EPERM wins before strace is asked, and the call goes unrecorded)
    run = run_sandboxed(tmp_path, URING, backend_options={"seccomp": False})
    assert (run.ws / "uring.txt").read_text().split() == ["-1", "1"]
    denied = [e for e in run.events("sandbox.denied") if e.reason == "io_uring"]
    assert denied and denied[0].syscall == "io_uring_setup" and denied[0].errno == "EPERM"
