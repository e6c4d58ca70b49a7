"""The strace command line the backend runs: the traced system calls and the options."""

from __future__ import annotations

from collections.abc import Sequence

#: The system calls traced: only those events are made of (ptrace cost is per stopped call).
#: dup2/dup3 are here (not only in FD_SET): a program started with a socket on its standard
#: input and output (a reverse or bind shell) is seen by them, whatever its command line.
TRACE_SET: tuple[str, ...] = (
    "fork", "vfork", "clone", "clone3", "execve", "execveat",
    "open", "openat", "openat2", "creat",
    "unlink", "unlinkat", "rmdir", "rename", "renameat", "renameat2", "link", "linkat",
    "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "?fchmodat2",
    "chown", "fchown", "lchown", "fchownat", "mkdir", "mkdirat", "truncate", "ftruncate",
    "chdir", "fchdir", "dup2", "dup3",
    "connect", "bind", "listen", "sendto", "sendmsg", "sendmmsg", "recvfrom", "recvmsg",
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid", "capset",
    "ptrace", "memfd_create", "io_uring_setup", "mount", "umount2", "unshare", "setns", "chroot", "pivot_root", "bpf",
    "init_module", "finit_module", "kill", "tkill", "tgkill",
    "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "process_vm_readv", "process_vm_writev",
    "name_to_handle_at", "open_by_handle_at", "ioctl",
    "settimeofday", "clock_settime", "adjtimex", "clock_adjtime",
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
)  # fmt: skip

#: Descriptor bookkeeping (dup/close), traced only with ``options={"fd_tracking": True}``: each is
#: one more stopped call, and a directory walk makes many (benchmarks/bench_capture.py: find /usr/lib
#: ran ~10x slower with them).  Without them ``/proc/self/fd/N`` is resolved by reading the live
#: process's descriptor link as the call is parsed, and ``*at()`` calls carry strace's own fd paths.
FD_SET: tuple[str, ...] = ("dup", "dup2", "dup3", "fcntl", "close")


def strace_command(
    output: str,
    argv: Sequence[str],
    *,
    seccomp: bool = True,
    strace: str = "strace",
    fd_tracking: bool = False,
) -> list[str]:
    """The strace command line that writes to ``output`` and runs ``argv``."""
    cmd = [strace, "-DD", "-f", "-q", "-yy", "-ttt", "-s", "4096", "--decode-pids=pidns", "-I2"]
    if seccomp:
        cmd.append("--seccomp-bpf")
    calls = tuple(dict.fromkeys(TRACE_SET + FD_SET)) if fd_tracking else TRACE_SET
    cmd += ["-e", "trace=" + ",".join(calls), "-o", output, "--", *argv]
    return cmd
