"""The system calls the eBPF program reports, and how it reads each one (x86_64 numbers).

One table is the single source of truth: the backend writes it into the
program's ``descs`` map at start, and the decoder reads the same rows to name
and decode records.  Argument indexes are 0-based; ``-1`` means none and, for
a directory argument, ``-2`` means "relative to the working directory".
"""

from __future__ import annotations

import struct
from typing import Final

import msgspec

# lost-record categories, indexes of the program's per-CPU ``lost`` array
CAT_FILE, CAT_NET, CAT_PRIV, CAT_SENSITIVE, CAT_FORK, CAT_EXEC, CAT_EXIT = range(7)
CATEGORIES: Final = ("file", "net", "priv", "sensitive", "fork", "exec", "exit", "other")

# special handling (the program's SP_* values)
# SP_TIMEX: adjtimex/clock_adjtime, the record's args[5] holds the modes word of the struct timex
# that argument ``flags_arg`` points to; SP_MOUNT: mount, blob 3 holds its data (overlay layers)
SP_NONE, SP_OPENAT2, SP_MSG, SP_MMSG, SP_RECV, SP_IOCTL, SP_FAILONLY, SP_OPEN, SP_CRED, SP_TIMEX, SP_MOUNT = range(11)

DESC = struct.Struct("<BBBbbbbbbbbb")


class Sys(msgspec.Struct, frozen=True):
    """One system call the kernel program knows: number, name, category and special handling."""

    nr: int
    name: str
    cat: int
    special: int = SP_NONE
    path_a: int = -1
    dir_a: int = -1
    path_b: int = -1
    dir_b: int = -1
    fd_a: int = -1
    sock_fd: int = -1
    addr: int = -1
    addrlen: int = -1
    flags_arg: int = -1

    def packed(self) -> bytes:
        return DESC.pack(
            1, self.cat, self.special, self.path_a, self.dir_a, self.path_b, self.dir_b,
            self.fd_a, self.sock_fd, self.addr, self.addrlen, self.flags_arg,
        )  # fmt: skip


F, N, P, S = CAT_FILE, CAT_NET, CAT_PRIV, CAT_SENSITIVE
CWD = -2
CWD_ALWAYS = -3  # path b only: the working directory walked even for an absolute path

TABLE: Final[tuple[Sys, ...]] = (
    # files: open
    Sys(2, "open", F, SP_OPEN, path_a=0, dir_a=CWD, flags_arg=1),
    Sys(257, "openat", F, SP_OPEN, path_a=1, dir_a=0, flags_arg=2),
    Sys(437, "openat2", F, SP_OPENAT2, path_a=1, dir_a=0),
    Sys(85, "creat", F, path_a=0, dir_a=CWD),
    # files: names
    Sys(87, "unlink", F, path_a=0, dir_a=CWD),
    Sys(84, "rmdir", F, path_a=0, dir_a=CWD),
    Sys(263, "unlinkat", F, path_a=1, dir_a=0),
    Sys(82, "rename", F, path_a=0, dir_a=CWD, path_b=1, dir_b=CWD),
    Sys(264, "renameat", F, path_a=1, dir_a=0, path_b=3, dir_b=2),
    Sys(316, "renameat2", F, path_a=1, dir_a=0, path_b=3, dir_b=2),
    Sys(86, "link", F, path_a=0, dir_a=CWD, path_b=1, dir_b=CWD),
    Sys(265, "linkat", F, path_a=1, dir_a=0, path_b=3, dir_b=2),
    Sys(88, "symlink", F, path_a=1, dir_a=CWD, path_b=0),
    Sys(266, "symlinkat", F, path_a=2, dir_a=1, path_b=0),
    Sys(83, "mkdir", F, path_a=0, dir_a=CWD),
    Sys(258, "mkdirat", F, path_a=1, dir_a=0),
    # files: attributes
    Sys(90, "chmod", F, path_a=0, dir_a=CWD),
    Sys(91, "fchmod", F, fd_a=0),
    Sys(268, "fchmodat", F, path_a=1, dir_a=0),
    Sys(452, "fchmodat2", F, path_a=1, dir_a=0),
    Sys(92, "chown", F, path_a=0, dir_a=CWD),
    Sys(94, "lchown", F, path_a=0, dir_a=CWD),
    Sys(93, "fchown", F, fd_a=0),
    Sys(260, "fchownat", F, path_a=1, dir_a=0),
    Sys(76, "truncate", F, path_a=0, dir_a=CWD),
    Sys(77, "ftruncate", F, fd_a=0),
    # failed execs (a successful one is the exec record)
    Sys(59, "execve", CAT_EXEC, SP_FAILONLY, path_a=0, dir_a=CWD),
    Sys(322, "execveat", CAT_EXEC, SP_FAILONLY, path_a=1, dir_a=0),
    # network
    Sys(42, "connect", N, sock_fd=0, addr=1, addrlen=2),
    Sys(49, "bind", N, sock_fd=0, addr=1, addrlen=2),
    Sys(50, "listen", N, sock_fd=0),
    Sys(44, "sendto", N, sock_fd=0, addr=4, addrlen=5),
    Sys(46, "sendmsg", N, SP_MSG, sock_fd=0),
    Sys(307, "sendmmsg", N, SP_MMSG, sock_fd=0),
    Sys(45, "recvfrom", N, SP_RECV, sock_fd=0),
    Sys(47, "recvmsg", N, SP_MSG, sock_fd=0),
    # credentials
    Sys(105, "setuid", P, SP_CRED),
    Sys(106, "setgid", P, SP_CRED),
    Sys(113, "setreuid", P, SP_CRED),
    Sys(114, "setregid", P, SP_CRED),
    Sys(117, "setresuid", P, SP_CRED),
    Sys(119, "setresgid", P, SP_CRED),
    Sys(122, "setfsuid", P, SP_CRED),
    Sys(123, "setfsgid", P, SP_CRED),
    Sys(126, "capset", P, SP_CRED),
    # risky kernel interfaces
    Sys(101, "ptrace", S),
    Sys(319, "memfd_create", S, path_b=0),
    Sys(425, "io_uring_setup", S),
    Sys(165, "mount", S, SP_MOUNT, path_a=1, dir_a=CWD, path_b=0),
    Sys(166, "umount2", S, path_a=0, dir_a=CWD),
    Sys(272, "unshare", S),
    Sys(161, "chroot", S, path_a=0, dir_a=CWD),
    Sys(155, "pivot_root", S, path_a=0, dir_a=CWD, path_b=1, dir_b=CWD),  # new root, where the old one goes
    Sys(308, "setns", S, fd_a=0),
    Sys(321, "bpf", S),
    Sys(175, "init_module", S, path_b=2),
    Sys(313, "finit_module", S, fd_a=0, path_b=1),
    Sys(62, "kill", S),
    Sys(200, "tkill", S),
    Sys(234, "tgkill", S),
    # witness integrity: reaching into other processes, files by handle, the terminal
    Sys(304, "open_by_handle_at", S),
    Sys(303, "name_to_handle_at", S, path_a=1, dir_a=0),
    Sys(310, "process_vm_readv", S),
    Sys(311, "process_vm_writev", S),
    Sys(434, "pidfd_open", S),
    Sys(438, "pidfd_getfd", S),
    Sys(424, "pidfd_send_signal", S),
    Sys(16, "ioctl", S, SP_IOCTL, fd_a=0),  # only TIOCSTI, with the terminal it types into
    # the new mount API (spyglass/capture/mountapi.py): mounts made without mount(2)
    Sys(428, "open_tree", S, path_a=1, dir_a=0),
    Sys(429, "move_mount", S, path_a=3, dir_a=2, path_b=1, dir_b=0),  # blob 1: the path moved from
    Sys(430, "fsopen", S, path_b=0),  # blob 1: the file system's name
    # blobs 0 and 1: key and value, as strings; 2: the file of the descriptor in aux; 3: the cwd
    Sys(431, "fsconfig", S, path_a=2, path_b=3, dir_b=CWD_ALWAYS, fd_a=4),
    Sys(432, "fsmount", S),
    Sys(433, "fspick", S, path_a=1, dir_a=0),
    Sys(442, "mount_setattr", S, path_a=1, dir_a=0),
    # the clock (spyglass/capture/clockcalls.py): the end-of-run checks go by status change times
    Sys(164, "settimeofday", S),
    Sys(227, "clock_settime", S),
    Sys(159, "adjtimex", S, SP_TIMEX, flags_arg=0),
    Sys(305, "clock_adjtime", S, SP_TIMEX, flags_arg=1),
)

BY_NR: Final[dict[int, Sys]] = {s.nr: s for s in TABLE}

#: syscall numbers of the process-creating calls (the fork record's ``nr``)
CLONE_NAMES: Final[dict[int, str]] = {56: "clone", 57: "fork", 58: "vfork", 435: "clone3"}
EXEC_NAMES: Final[dict[int, str]] = {59: "execve", 322: "execveat"}
