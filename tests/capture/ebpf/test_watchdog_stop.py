"""The watchdog's judgement of a stopped spyglass, on real processes (no program loaded: the
decision reads /proc only): job control (the agent stops too) is left alone, spyglass stopped
alone is not, and an agent that keeps a stop pending cannot hold spyglass stopped."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from spyglass.capture import procfs
from spyglass.capture.ebpf import watchdog
from tests.capture.test_procfs import HOLD_TSTP


def _stopped(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 30
    while procfs.state(proc.pid) != b"T":
        assert time.monotonic() < deadline
        time.sleep(0.01)


@pytest.fixture
def monitor() -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in for spyglass, stopped."""
    proc = subprocess.Popen(["sleep", "60"])
    _stopped(proc)
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def pending() -> Iterator[subprocess.Popen[bytes]]:
    """An agent root with a stop pending that it never takes (SIGTSTP held blocked)."""
    agent = subprocess.Popen([sys.executable, "-c", HOLD_TSTP], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert agent.stdout is not None and agent.stdout.readline() == b"ready\n"
        os.kill(agent.pid, signal.SIGTSTP)
        assert procfs.stop_pending(agent.pid)
        yield agent
    finally:
        agent.kill()
        agent.wait()


@pytest.fixture
def agent() -> Iterator[subprocess.Popen[bytes]]:
    """An agent root that just runs."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def test_spyglass_stopped_alone_is_found(monitor: subprocess.Popen[bytes], agent: subprocess.Popen[bytes]) -> None:
    assert watchdog._monitor_alone_stopped(monitor.pid, agent.pid)


def test_benign_twin_the_agent_stopped_too_is_job_control(
    monitor: subprocess.Popen[bytes], agent: subprocess.Popen[bytes]
) -> None:
    _stopped(agent)
    assert not watchdog._monitor_alone_stopped(monitor.pid, agent.pid)


def test_an_agent_keeping_a_stop_pending_does_not_hold_spyglass_stopped(
    monitor: subprocess.Popen[bytes], pending: subprocess.Popen[bytes]
) -> None:
    """The attacker stops spyglass and keeps a stop pending on itself without ever taking it (held
    blocked here; a vfork parent, never scheduled, keeps one the same way): the watchdog waits for it
    a bounded while (``_STOPPING_MAX``), then finds spyglass stopped alone."""
    agent = pending
    assert watchdog._monitor_alone_stopped(monitor.pid, agent.pid)


LATE_STOP = ("import signal, sys, time; signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTSTP]); "
             "print('ready', flush=True); sys.stdin.readline(); time.sleep(0.3); "
             "signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTSTP]); time.sleep(60)")


def test_benign_twin_an_agent_that_takes_its_stop_late_is_job_control(
    monitor: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-Z on a busy machine: the agent is not scheduled until well after spyglass stopped
    (played by holding the stop 0.3 s; the bound is raised so the test does not race the machine's
    load). One look 0.15 s later found it running and took job control for an attack."""
    monkeypatch.setattr(watchdog, "_STOPPING_MAX", 60.0)
    # a process group of its own, whose parent (this test) is in another group of the session: the
    # kernel drops SIGTSTP in an orphaned group (as the test's own may be, without a terminal)
    agent = subprocess.Popen([sys.executable, "-c", LATE_STOP], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             process_group=0)
    try:
        assert agent.stdout is not None and agent.stdout.readline() == b"ready\n"
        os.kill(agent.pid, signal.SIGTSTP)
        assert agent.stdin is not None
        agent.stdin.write(b"go\n")
        agent.stdin.flush()
        assert not watchdog._monitor_alone_stopped(monitor.pid, agent.pid)
        assert procfs.state(agent.pid) == b"T"
    finally:
        agent.kill()
        agent.wait()


def test_a_root_that_cannot_run_gets_no_time_to_take_its_stop(
    monitor: subprocess.Popen[bytes], pending: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attacker's root waits in a vfork (state D) with a stop pending for as long as its child
    likes, episode after episode.  Python cannot play a vfork parent safely, so the root's state is
    the one stand-in here: a real process with a stop really pending, reported as ``D``; with the
    bound raised to a minute, the watchdog must still decide at its second look."""
    monkeypatch.setattr(watchdog, "_STOPPING_MAX", 60.0)
    agent = pending
    real_state = watchdog._state
    looks: list[int] = []

    def state(pid: int) -> bytes:
        if pid != agent.pid:
            return real_state(pid)
        looks.append(pid)
        return b"D"

    monkeypatch.setattr(watchdog, "_state", state)
    assert watchdog._monitor_alone_stopped(monitor.pid, agent.pid)
    assert len(looks) <= 3  # decided at the second look (a grace would look again and again)


def test_no_grace_again_soon_after_spyglass_was_found_stopped_alone(
    monitor: subprocess.Popen[bytes], pending: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attacker repeats: a root never scheduled keeps its stop pending and stops spyglass again
    after each resume. The watch loop gives no grace within ``_GRACE_AFTER`` of the last episode
    (``grace=False``): decided at the second look, however long the bound."""
    monkeypatch.setattr(watchdog, "_STOPPING_MAX", 60.0)
    agent = pending
    looks: list[int] = []
    real_pending = watchdog._stop_pending
    monkeypatch.setattr(watchdog, "_stop_pending", lambda pid: looks.append(pid) or real_pending(pid))
    assert watchdog._monitor_alone_stopped(monitor.pid, agent.pid, grace=False)
    assert len(looks) <= 1


#: a stand-in for spyglass with the command as its child (forked by its main thread, as spyglass's is)
WITH_COMMAND = (
    "import subprocess, time; p = subprocess.Popen(['sleep', '60']); print(p.pid, flush=True); time.sleep(60)"
)


def _watch(monitor: int) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """The real watchdog script watching ``monitor``, not told the command yet (no ``root`` line)."""
    import marshal

    mine, theirs = socket.socketpair()
    cfg = {"sock": theirs.fileno(), "monitor": monitor, "root": 0}
    proc = subprocess.Popen([sys.executable, "-I", "-S", watchdog.__file__, marshal.dumps(cfg).hex()],
                            pass_fds=[theirs.fileno()], start_new_session=True)  # fmt: skip
    theirs.close()
    mine.settimeout(30)
    return proc, mine


def _end(proc: subprocess.Popen[bytes], sock: socket.socket) -> None:
    sock.sendall(b"done\n")
    assert proc.wait(timeout=60) == 0
    sock.close()


def _left_alone(monitor: int, sock: socket.socket) -> bool:
    """Still stopped, and nothing said, well after the watchdog's look and its confirmation."""
    sock.settimeout(1.5)
    try:
        said = sock.recv(100)
    except TimeoutError:
        said = b""
    return procfs.state(monitor) == b"T" and said == b""


def test_command_of_is_spyglass_s_child_other_than_the_watchdog() -> None:
    spy = subprocess.Popen([sys.executable, "-c", WITH_COMMAND], stdout=subprocess.PIPE)
    try:
        assert spy.stdout is not None
        child = int(spy.stdout.readline())
        assert watchdog._command_of(spy.pid) == child
    finally:
        spy.kill()
        spy.wait()


def test_benign_twin_a_ctrl_z_before_the_command_exists_is_left_alone(monitor: subprocess.Popen[bytes]) -> None:
    """The watchdog runs before the command starts: spyglass stopped then (a Ctrl-Z while it sets the
    run up) is no act of the run, which does not exist yet.  Resumed, it was reported as a critical
    monitor-stopped in a run where nothing had happened."""
    assert watchdog._command_of(monitor.pid) == 0
    proc, sock = _watch(monitor.pid)
    try:
        assert _left_alone(monitor.pid, sock)
    finally:
        _end(proc, sock)


def test_the_command_stopping_spyglass_before_it_is_named_is_resumed() -> None:
    """The attack the twin above must not open: the command stops spyglass before spyglass could send
    its pid.  The watchdog finds the command as spyglass's child, running: spyglass is resumed."""
    spy = subprocess.Popen([sys.executable, "-c", WITH_COMMAND], stdout=subprocess.PIPE)
    try:
        assert spy.stdout is not None
        child = int(spy.stdout.readline())
        proc, sock = _watch(spy.pid)
        try:
            os.kill(spy.pid, signal.SIGSTOP)
            assert sock.recv(100).startswith(b"stopped ")
            assert procfs.state(spy.pid) != b"T"
        finally:
            _end(proc, sock)
        # the twin: both stopped (a Ctrl-Z once the command runs) is job control, left alone
        proc, sock = _watch(spy.pid)
        try:
            _stopped_pid(child)
            os.kill(spy.pid, signal.SIGSTOP)
            assert _left_alone(spy.pid, sock)
        finally:
            _end(proc, sock)
    finally:
        for pid in (child, spy.pid):
            os.kill(pid, signal.SIGKILL)
        spy.wait()


def _stopped_pid(pid: int) -> None:
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 30
    while procfs.state(pid) != b"T":
        assert time.monotonic() < deadline
        time.sleep(0.01)
