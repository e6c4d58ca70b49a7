"""The /proc readers shared by the backends, the sandbox and the run core, on real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from spyglass.capture import procfs

TREE = "import subprocess, sys; p = subprocess.Popen(['sleep', '60']); print(p.pid, flush=True); sys.stdin.read()"


def test_state_and_running_of_live_stopped_zombie_and_gone_processes() -> None:
    assert procfs.state(os.getpid()) == b"R" and procfs.running(os.getpid())
    proc = subprocess.Popen(["sleep", "60"])
    try:
        os.kill(proc.pid, 19)  # SIGSTOP
        deadline = time.monotonic() + 30
        while procfs.state(proc.pid) != b"T":
            assert time.monotonic() < deadline, procfs.state(proc.pid)
            time.sleep(0.01)
        proc.kill()
        while procfs.state(proc.pid) != b"Z":  # not yet waited for
            assert time.monotonic() < deadline, procfs.state(proc.pid)
            time.sleep(0.01)
        assert not procfs.running(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert procfs.state(proc.pid) == b"" and not procfs.running(proc.pid)


def test_descendants_are_the_whole_live_tree_parents_first() -> None:
    proc = subprocess.Popen([sys.executable, "-c", TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        grandchild = int(proc.stdout.readline())
        found = procfs.descendants(os.getpid())
        assert found.index(proc.pid) < found.index(grandchild)
        assert procfs.descendants(grandchild) == []
    finally:
        os.kill(grandchild, 9)
        proc.kill()
        proc.wait()
    assert procfs.descendants(2**22 + 12345) == []  # no such process


def test_kill_all_leaves_no_process_time_to_act_on_another_ones_death(tmp_path: Path, monkeypatch: Any) -> None:
    """The attacker: a shell that writes a file the moment its child dies.  Killed child first,
    with the killer preempted between two kills (as a reader thread losing the interpreter lock
    is), the shell must not get to run: every process is stopped before any is killed."""
    marker = tmp_path / "survived"
    script = f"sleep 60 & echo $!; wait; echo x > {marker}"
    shell = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, text=True)
    assert shell.stdout is not None
    child = int(shell.stdout.readline())
    real_kill = os.kill

    def slow_kill(pid: int, sig: int) -> None:
        real_kill(pid, sig)
        time.sleep(0.2)  # the shell would run here, were it not stopped

    monkeypatch.setattr(os, "kill", slow_kill)  # the module os procfs calls
    procfs.kill_all([child, shell.pid])
    monkeypatch.undo()
    assert shell.wait(timeout=30) == -signal.SIGKILL
    assert not marker.exists()


def test_benign_twin_kill_all_of_processes_already_gone_is_quiet() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    procfs.kill_all([proc.pid, 2**22 + 12345])  # gone and never there: no error
    assert procfs.state(proc.pid) == b""


HOLD_TSTP = ("import signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTSTP, signal.SIGUSR1]); "
             "print('ready', flush=True); sys.stdin.read()")


def test_a_stop_signal_sent_and_not_yet_taken_is_pending() -> None:
    """A real process holding SIGTSTP blocked keeps it pending (a busy machine keeps a stop pending
    the same way until the process is next scheduled)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD_TSTP], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        assert not procfs.stop_pending(proc.pid)
        os.kill(proc.pid, signal.SIGUSR1)  # benign twin: another signal pending is no stop
        assert not procfs.stop_pending(proc.pid)
        os.kill(proc.pid, signal.SIGTSTP)
        assert procfs.stop_pending(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert not procfs.stop_pending(proc.pid)  # gone


ORPHAN = """
import os, signal, sys, time
child = os.fork()
if child == 0:
    os.setpgid(0, 0)  # a job-control shell puts each job in a group of its own
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGCONT, lambda s, f: open(sys.argv[1], "w").close())
    print(os.getpid(), flush=True)
    while True:
        time.sleep(1)
os.waitpid(child, 0)
"""


def test_kill_all_kills_a_child_before_the_parent_whose_death_would_resume_it(tmp_path: Path, monkeypatch: Any) -> None:
    """The attacker: a child in a process group of its own, stopped with the rest, acts on SIGCONT.
    Its parent's death orphans that group and the kernel sends it SIGCONT: were the parent (listed
    first, as the callers list the root) killed first, the child would run before its own kill."""
    marker = tmp_path / "resumed"
    root = subprocess.Popen([sys.executable, "-c", ORPHAN, str(marker)], stdout=subprocess.PIPE, text=True)
    assert root.stdout is not None
    child = int(root.stdout.readline())
    real_kill = os.kill

    def slow_kill(pid: int, sig: int) -> None:
        real_kill(pid, sig)
        if sig == signal.SIGKILL:
            time.sleep(0.3)  # the child would run here, were it resumed before its kill

    monkeypatch.setattr(os, "kill", slow_kill)
    procfs.kill_all([root.pid, child])
    monkeypatch.undo()
    assert root.wait(timeout=30) == -signal.SIGKILL
    deadline = time.monotonic() + 30
    while procfs.state(child) not in (b"", b"Z"):
        assert time.monotonic() < deadline, procfs.state(child)
        time.sleep(0.01)
    assert not marker.exists()


LEADER_GONE = """
import ctypes, threading, time
def spin():
    while True:
        time.sleep(0.05)
threading.Thread(target=spin).start()
print("ready", flush=True)
ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: this thread only; the other runs on
"""


def test_a_process_whose_first_thread_exited_runs_while_its_other_threads_do() -> None:
    """The attacker's way to look dead: the main thread exits alone and the process shows a
    zombie's state, while another thread works on (a watchdog killing the tree passed it over)."""
    proc = subprocess.Popen([sys.executable, "-c", LEADER_GONE], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 30
        while procfs.state(proc.pid) != b"Z":
            assert time.monotonic() < deadline, procfs.state(proc.pid)
            time.sleep(0.01)
        assert procfs.running(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert not procfs.running(proc.pid)


GROUP_LAYOUT = """
import os, signal, sys, time
marker, out = sys.argv[1], os.fdopen(1, "w")
def say(tag):
    out.write(f"{tag} {os.getpid()}\\n"); out.flush()
def forever():
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    while True:
        time.sleep(0.01)
r, w = os.pipe()
q = os.fork()
if q == 0:  # Q -> Q2 -> M, M leading a process group of its own
    if os.fork() == 0:
        if os.fork() == 0:
            os.setpgid(0, 0)
            os.write(w, str(os.getpid()).encode())
            say("M"); forever()
        forever()
    forever()
m = int(os.read(r, 32))
if os.fork() == 0:  # X -> N, N in M's group; X then leaves the session
    if os.fork() == 0:
        os.setpgid(0, m)
        signal.signal(signal.SIGCONT, lambda s, f: open(marker, "w").close())
        say("N"); forever()
    time.sleep(0.2)
    os.setsid()
    say("X"); forever()
say("R"); forever()
"""


def test_kill_all_kills_a_whole_process_group_at_once(tmp_path: Path, monkeypatch: Any) -> None:
    """The attacker: N shares a process group with M, which sits deeper in the tree, and N's own
    parent has left the session, so M alone keeps the group from being orphaned.  Killed deepest
    first, M's death orphans the group and the kernel resumes N (SIGCONT) before its kill: a group
    made only of the tree's processes is killed in one call, before anyone."""
    marker = tmp_path / "resumed"
    root = subprocess.Popen([sys.executable, "-c", GROUP_LAYOUT, str(marker)], stdout=subprocess.PIPE, text=True)
    assert root.stdout is not None
    tags: dict[str, int] = {}
    while len(tags) < 4:
        tag, pid = root.stdout.readline().split()
        tags[tag] = int(pid)
    tree = [root.pid, *procfs.descendants(root.pid)]
    assert tags["N"] in tree and tags["M"] in tree
    real_kill = os.kill

    def slow_kill(pid: int, sig: int) -> None:
        real_kill(pid, sig)
        if sig == signal.SIGKILL:
            time.sleep(0.2)  # N would run here, were it resumed before its kill

    monkeypatch.setattr(os, "kill", slow_kill)
    procfs.kill_all(tree)
    monkeypatch.undo()
    assert root.wait(timeout=30) == -signal.SIGKILL
    deadline = time.monotonic() + 30
    while any(procfs.running(p) for p in tree):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not marker.exists()


def test_proc_self_in_a_link_is_the_named_process_not_the_reader(tmp_path: Path) -> None:
    """``x -> /proc/self/fd/N``: resolved for process ``pid`` it names that process's descriptor N;
    for the reader it would name the reader's own (here none: a path left as written)."""
    target = tmp_path / "target"
    target.mkdir()
    fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
    os.dup2(fd, 987)
    os.close(fd)
    try:
        holder = subprocess.Popen(["sleep", "60"], pass_fds=[987])
    finally:
        os.close(987)
    try:
        for alias in ("self", "thread-self"):
            link = tmp_path / f"via-{alias}"
            link.symlink_to(f"/proc/{alias}/fd/987")
            assert procfs.realpath_as("", f"{link}/new", holder.pid) == (f"{target}/new", True)
            mine = procfs.realpath_in_root("", f"{link}/new")
            assert mine is not None and not mine.startswith(str(target)), mine
        assert procfs.realpath_as("", f"{target}/new", holder.pid) == (f"{target}/new", False)
    finally:
        holder.kill()
        holder.wait()
    gone = procfs.realpath_in_root("", f"{tmp_path}/via-self/new", holder.pid)
    assert gone == f"/proc/{holder.pid}/fd/987/new"  # the writer gone: nothing to read, kept as written
