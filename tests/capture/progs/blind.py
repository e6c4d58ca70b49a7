"""An agent that tries to blind its tracer (the attacker), or does the same things harmlessly.

``blind.py MODE PIDFILE``: writes its pid to PIDFILE, then acts.  Attack modes
aim at the process tracing it (TracerPid in /proc/self/status) and then keep
running for up to a minute, as a blinded agent would; spyglass must kill it.
Benign modes signal only the agent's own children and exit.  The monitor is the tracer
(strace), else the parent (under eBPF the recorder is spyglass itself).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

CLONE_UNTRACED = 0x00800000
SYS_CLONE = 56  # x86_64


def tracer() -> int:
    """The process tracing this one (strace), else the parent: under eBPF the recorder is
    spyglass itself, whose direct child the agent is."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("TracerPid:") and int(line.split()[1]):
                return int(line.split()[1])
    return os.getppid()


def linger() -> None:
    """What a blinded agent does next: keep working unobserved (bounded)."""
    for _ in range(600):
        time.sleep(0.1)
        os.close(os.open("/dev/null", os.O_RDONLY))


def main() -> None:
    mode, pidfile = sys.argv[1], sys.argv[2]
    with open(pidfile, "w") as f:
        f.write(str(os.getpid()))
    t = tracer()
    if mode == "pidfd-sigint":
        signal.pidfd_send_signal(os.pidfd_open(t), signal.SIGINT)
        linger()
    elif mode == "killpg-sigint":
        os.killpg(os.getpgid(t), signal.SIGINT)
        linger()
    elif mode == "sigstop":
        os.kill(t, signal.SIGSTOP)
        os.close(os.open("/dev/null", os.O_RDONLY))  # blocks until the tracer runs again
    elif mode == "sigstop-spyglass":  # spyglass itself, its parent (under strace the tracer is strace)
        os.kill(os.getppid(), signal.SIGSTOP)
        for _ in range(20):  # goes on working while spyglass judges nothing
            time.sleep(0.05)
            os.close(os.open("/dev/null", os.O_RDONLY))
    elif mode == "sigstop-both":  # spyglass, then strace (each of them the one that could resume the other)
        os.kill(os.getppid(), signal.SIGSTOP)
        os.kill(t, signal.SIGSTOP)
        os.close(os.open("/dev/null", os.O_RDONLY))  # blocks until strace runs again
    elif mode == "kill9":
        os.kill(t, signal.SIGKILL)
        linger()
    elif mode == "kill-helpers":  # every other child of spyglass (the parent): strace, or the watchdog
        me, t = os.getpid(), os.getppid()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat[stat.rfind(b")") + 2 :].split()[1]) == t:
                os.kill(int(entry), signal.SIGKILL)
        time.sleep(0.5)  # a moment unobserved, then exit
    elif mode == "peek":  # read the monitor's memory and take a descriptor out of it
        libc = ctypes.CDLL(None, use_errno=True)

        class IoVec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

        buf = ctypes.create_string_buffer(8)
        local, remote = IoVec(ctypes.cast(buf, ctypes.c_void_p), 8), IoVec(0x1000, 8)
        libc.syscall(310, t, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)  # process_vm_readv
        libc.syscall(438, os.pidfd_open(t), 0, 0)  # pidfd_getfd: its stdin
    elif mode == "proc-mem":  # the monitor's memory opened for writing through /proc
        with open(f"/proc/{t}/mem", "r+b"):
            pass
    elif mode == "proc-fd":  # one of the monitor's descriptors reopened through /proc
        with open(f"/proc/{t}/fd/0", "rb"):
            pass
    elif mode == "proc-thread":  # the memory of another of its threads (/proc/<tid>/ reaches the process)
        tids = [int(x) for x in os.listdir(f"/proc/{t}/task") if int(x) != t]
        with open(f"/proc/{tids[0] if tids else t}/mem", "rb"):
            pass
    elif mode == "proc-look":  # what process listers read of the monitor, and its own and its child's memory
        for name in ("status", "cmdline", "stat"):
            with open(f"/proc/{t}/{name}", "rb") as f:
                f.read()
        with open("/proc/self/mem", "rb"):
            pass
        child = os.fork()
        if child == 0:
            time.sleep(60)
            os._exit(0)
        with open(f"/proc/{child}/environ", "rb") as f:
            f.read()
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    elif mode == "untrack":  # delete itself from the eBPF program's process table (root), then work on
        me = os.getpid()
        found: list[str] = []
        for fd in os.listdir(f"/proc/{t}/fdinfo"):
            try:
                with open(f"/proc/{t}/fdinfo/{fd}") as f:
                    info = dict(line.split(":", 1) for line in f if ":" in line)
            except OSError:
                continue
            shape = [info.get(k, "").strip() for k in ("map_type", "key_size", "value_size", "max_entries")]
            if shape == ["1", "4", "1", "65536"]:  # the hash of followed thread-group ids
                key = [f"0x{b:02x}" for b in me.to_bytes(4, "little")]
                found = ["id", info["map_id"].strip(), "key", *key]
                subprocess.run(["bpftool", "map", "delete", *found], check=False)
                break
        deadline = time.monotonic() + 20
        while found and time.monotonic() < deadline:  # until spyglass has put it back (bounded)
            time.sleep(0.1)
            back = subprocess.run(["bpftool", "map", "lookup", *found], capture_output=True, check=False)
            if back.returncode == 0:
                break
        with open(pidfile + ".after", "w") as f:  # recorded again
            f.write("x")
    elif mode == "short-lived":  # many children that come and go quickly: none is ever missing
        for _ in range(40):
            subprocess.run(["true"], check=False)
            time.sleep(0.03)
    elif mode == "untraced-work":  # a hidden child that works briefly and exits (followed under eBPF)
        libc = ctypes.CDLL(None, use_errno=True)
        pid = libc.syscall(SYS_CLONE, CLONE_UNTRACED | signal.SIGCHLD, 0, 0, 0, 0)
        if pid == 0:
            with open(pidfile + ".child", "w") as f:
                f.write(str(os.getpid()))
            os._exit(0)
        os.waitpid(pid, 0)
    elif mode == "untraced":
        libc = ctypes.CDLL(None, use_errno=True)
        pid = libc.syscall(SYS_CLONE, CLONE_UNTRACED | signal.SIGCHLD, 0, 0, 0, 0)
        if pid == 0:  # the hidden child: would work unobserved
            with open(pidfile + ".child", "w") as f:
                f.write(str(os.getpid()))
            linger()
            os._exit(0)
        os.waitpid(pid, 0)  # returns once spyglass has killed it
    elif mode == "benign":
        # signals to the agent's own children, by every route, and a child in its own group
        child = os.fork()
        if child == 0:
            os.setpgid(0, 0)
            time.sleep(60)
            os._exit(0)
        os.setpgid(child, child)
        os.kill(child, 0)
        signal.pidfd_send_signal(os.pidfd_open(child), 0)
        os.killpg(child, signal.SIGTERM)
        os.waitpid(child, 0)
        pid = os.fork()  # an ordinary, traced child
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
