"""The binary records of the eBPF program: layout, and decoding of their parts.

A record is a 168-byte header (``struct rec`` in ``bpf/spyglass.bpf.c``)
followed by up to four blobs whose lengths are in the header.  Strings are
raw bytes from the kernel, NUL-terminated; directory walks are written leaf
first, one NUL-terminated name per component.  Everything here is pure: no
I/O, testable on byte fixtures without root.
"""

from __future__ import annotations

import errno as _errno
import functools
import ipaddress
import signal as _signal
import struct
from typing import NamedTuple

import msgspec

REC_SYS, REC_FORK, REC_EXEC, REC_EXIT, REC_URING = 1, 2, 3, 4, 5

HEADER = struct.Struct("<HHIIIQq6Q4I4H4H16sHHI16sQII")
assert HEADER.size == 168
_HSIZE = HEADER.size
_unpack = HEADER.unpack_from
_new = tuple.__new__  # a NamedTuple's fields in one C call (its generated __new__ is Python)


class Record(NamedTuple):
    """A record's header fields and blobs (a tuple: built in one step, the decoder's per-record cost)."""

    kind: int
    nr: int
    pid: int
    tid: int
    ppid: int
    ts: int  # CLOCK_BOOTTIME ns
    ret: int
    args: tuple[int, ...]
    uid: int
    euid: int
    gid: int
    egid: int
    blobs: tuple[bytes, bytes, bytes, bytes]
    sk_family: int
    sk_type: int
    sk_proto: int
    sk_dport: int  # network byte order as read
    sk_daddr: bytes
    sk_lport: int = 0  # host byte order
    sk_laddr: bytes = b""
    f_ino: int = 0  # a successful open: the inode of the file reached
    f_dev: int = 0  # ... and its device, as the kernel's dev_t (major << 20 | minor)


def parse(data: bytes) -> Record:
    """One record; raises ValueError when it is too short for what its header says."""
    if len(data) < _HSIZE:
        raise ValueError("record shorter than its header")
    h = _unpack(data, 0)
    a = _HSIZE  # the four blobs follow the header back to back
    b = a + h[17]
    c = b + h[18]
    d = c + h[19]
    end = d + h[20]
    if end > len(data):
        raise ValueError("record shorter than its blobs")
    return _new(Record, (
        h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7:13], h[13], h[14], h[15], h[16],
        (data[a:b], data[b:c], data[c:d], data[d:end]), h[21], h[22], h[23], h[24], h[25], h[26], h[29], h[30], h[31],
    ))  # fmt: skip


def build(
    kind: int,
    *,
    nr: int = 0,
    pid: int = 0,
    tid: int = 0,
    ppid: int = 0,
    ts: int = 0,
    ret: int = 0,
    args: tuple[int, ...] = (0, 0, 0, 0, 0, 0),
    ids: tuple[int, int, int, int] = (0, 0, 0, 0),
    blobs: tuple[bytes, bytes, bytes, bytes] = (b"", b"", b"", b""),
    sock: tuple[int, int, int, int, bytes] = (0, 0, 0, 0, b""),
    local: tuple[int, bytes] = (0, b""),
    file_id: tuple[int, int] = (0, 0),
) -> bytes:
    """The bytes the program would emit (for fixtures and tests)."""
    head = HEADER.pack(
        kind,
        nr,
        pid,
        tid,
        ppid,
        ts,
        ret,
        *args,
        *ids,
        *(len(b) for b in blobs),
        *sock[:4],
        sock[4].ljust(16, b"\0"),
        local[0],
        0,
        0,
        local[1].ljust(16, b"\0"),
        file_id[1],
        file_id[0],
        0,
    )
    return head + b"".join(blobs)


def fs(raw: bytes) -> str:
    """Kernel bytes as an fs string (undecodable bytes kept as surrogates)."""
    return raw.decode("utf-8", "surrogateescape")


def cstr(blob: bytes) -> str | None:
    """A NUL-terminated string blob; None when empty (not read)."""
    if not blob:
        return None
    end = blob.find(b"\0")
    return fs(blob if end < 0 else blob[:end])


@functools.lru_cache(maxsize=4096)
def walk(blob: bytes) -> str | None:
    """A directory walk (leaf first) as an absolute path; None when nothing was walked."""
    if not blob:
        return None
    parts = [p for p in blob.split(b"\0") if p and p != b"/"]
    return "/" + "/".join(fs(p) for p in reversed(parts))


def argv(blob: bytes) -> list[str]:
    if not blob:
        return []
    if blob.endswith(b"\0"):
        blob = blob[:-1]
    return [fs(a) for a in blob.split(b"\0")]


@functools.lru_cache(maxsize=256)
def errno_name(ret: int) -> str | None:
    if ret >= 0:
        return None
    return _errno.errorcode.get(-ret, f"errno {-ret}")


def signal_name(num: int) -> str | None:
    try:
        return _signal.Signals(num).name
    except ValueError:
        return None


def s32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


_OPEN_FLAGS = (
    (0o4010000, "O_SYNC"), (0o20200000, "O_TMPFILE"), (0o100, "O_CREAT"), (0o200, "O_EXCL"),
    (0o400, "O_NOCTTY"), (0o1000, "O_TRUNC"), (0o2000, "O_APPEND"), (0o4000, "O_NONBLOCK"),
    (0o10000, "O_DSYNC"), (0o20000, "O_ASYNC"), (0o40000, "O_DIRECT"), (0o100000, "O_LARGEFILE"),
    (0o200000, "O_DIRECTORY"), (0o400000, "O_NOFOLLOW"), (0o1000000, "O_NOATIME"),
    (0o2000000, "O_CLOEXEC"), (0o10000000, "O_PATH"),
)  # fmt: skip


@functools.lru_cache(maxsize=1024)
def open_flags(value: int) -> str:
    """Open flags as strace writes them (``O_WRONLY|O_CREAT|O_TRUNC``)."""
    acc = value & 3
    out = ["O_RDONLY" if acc == 0 else "O_WRONLY" if acc == 1 else "O_RDWR" if acc == 2 else "O_ACCMODE"]
    rest = value & ~3
    for bits, name in _OPEN_FLAGS:
        if rest & bits == bits:
            out.append(name)
            rest &= ~bits
    if rest:
        out.append(f"0{rest:o}")
    if len(out) > 1 and out[0] == "O_RDONLY" and "O_PATH" in out:
        out.pop(0)
    return "|".join(out)


def mode(value: int) -> str:
    return f"0{value & 0o7777:o}"


def names(value: int, table: tuple[tuple[int, str], ...]) -> str | None:
    """Flag bits as ``A|B``; None for 0."""
    if not value:
        return None
    out = [name for bits, name in table if value & bits == bits]
    rest = value & ~sum(b for b, _ in table)
    if rest:
        out.append(hex(rest))
    return "|".join(out)


class Addr(msgspec.Struct):
    family: str  # "ipv4" | "ipv6" | "unix"
    address: str | None
    port: int | None


def sockaddr(blob: bytes) -> Addr | None:
    """A ``struct sockaddr``; None for families that are not a destination (unspec, netlink ...)."""
    if len(blob) < 2:
        return None
    fam = struct.unpack_from("<H", blob, 0)[0]
    if fam == 2 and len(blob) >= 8:
        port = struct.unpack_from(">H", blob, 2)[0]
        return Addr("ipv4", str(ipaddress.IPv4Address(blob[4:8])), port)
    if fam == 10 and len(blob) >= 24:
        port = struct.unpack_from(">H", blob, 2)[0]
        return Addr("ipv6", str(ipaddress.IPv6Address(blob[8:24])), port)
    if fam == 1:
        path = blob[2:]
        if not path:
            return Addr("unix", None, None)
        if path[:1] == b"\0":  # abstract
            return Addr("unix", "@" + fs(path[1:].rstrip(b"\0")), None)
        end = path.find(b"\0")
        return Addr("unix", fs(path if end < 0 else path[:end]), None)
    return None


def peer(rec: Record) -> Addr | None:
    """The connected peer of the record's socket, as the kernel holds it."""
    port = int.from_bytes(struct.pack("<H", rec.sk_dport), "big")
    if rec.sk_family == 2:
        addr = rec.sk_daddr[:4]
        if addr == b"\0\0\0\0":
            return None
        return Addr("ipv4", str(ipaddress.IPv4Address(addr)), port)
    if rec.sk_family == 10:
        if rec.sk_daddr == b"\0" * 16:
            return None
        return Addr("ipv6", str(ipaddress.IPv6Address(rec.sk_daddr)), port)
    return None


def local(rec: Record) -> Addr | None:
    """The local address of the record's socket (bound or listening)."""
    if rec.sk_family == 2:
        return Addr("ipv4", str(ipaddress.IPv4Address(rec.sk_laddr[:4])), rec.sk_lport)
    if rec.sk_family == 10:
        return Addr("ipv6", str(ipaddress.IPv6Address(rec.sk_laddr[:16])), rec.sk_lport)
    return None


def transport(rec: Record) -> str | None:
    """``tcp``/``udp``/``unix`` for the record's socket (None when unknown)."""
    if rec.sk_family == 1:
        return "unix"
    if rec.sk_family in (2, 10):
        if rec.sk_proto == 6 or (rec.sk_proto == 0 and rec.sk_type == 1):
            return "tcp"
        if rec.sk_proto == 17 or (rec.sk_proto == 0 and rec.sk_type == 2):
            return "udp"
        if rec.sk_proto == 1 or rec.sk_proto == 58:
            return "icmp"
        return None
    if rec.sk_family == 16:
        return "netlink"
    return None


def net_type(rec: Record) -> str | None:
    return {1: "unix", 2: "ipv4", 10: "ipv6"}.get(rec.sk_family)


PTRACE_REQUESTS = {
    0: "PTRACE_TRACEME", 1: "PTRACE_PEEKTEXT", 2: "PTRACE_PEEKDATA", 3: "PTRACE_PEEKUSER",
    4: "PTRACE_POKETEXT", 5: "PTRACE_POKEDATA", 6: "PTRACE_POKEUSER", 7: "PTRACE_CONT", 8: "PTRACE_KILL",
    9: "PTRACE_SINGLESTEP", 12: "PTRACE_GETREGS", 13: "PTRACE_SETREGS", 14: "PTRACE_GETFPREGS",
    15: "PTRACE_SETFPREGS", 16: "PTRACE_ATTACH", 17: "PTRACE_DETACH", 24: "PTRACE_SYSCALL",
    0x4200: "PTRACE_SETOPTIONS", 0x4201: "PTRACE_GETEVENTMSG", 0x4202: "PTRACE_GETSIGINFO",
    0x4203: "PTRACE_SETSIGINFO", 0x4204: "PTRACE_GETREGSET", 0x4205: "PTRACE_SETREGSET",
    0x4206: "PTRACE_SEIZE", 0x4207: "PTRACE_INTERRUPT", 0x4208: "PTRACE_LISTEN",
}  # fmt: skip

BPF_CMDS = (
    "BPF_MAP_CREATE", "BPF_MAP_LOOKUP_ELEM", "BPF_MAP_UPDATE_ELEM", "BPF_MAP_DELETE_ELEM",
    "BPF_MAP_GET_NEXT_KEY", "BPF_PROG_LOAD", "BPF_OBJ_PIN", "BPF_OBJ_GET", "BPF_PROG_ATTACH",
    "BPF_PROG_DETACH", "BPF_PROG_TEST_RUN", "BPF_PROG_GET_NEXT_ID", "BPF_MAP_GET_NEXT_ID",
    "BPF_PROG_GET_FD_BY_ID", "BPF_MAP_GET_FD_BY_ID", "BPF_OBJ_GET_INFO_BY_FD", "BPF_PROG_QUERY",
    "BPF_RAW_TRACEPOINT_OPEN", "BPF_BTF_LOAD", "BPF_BTF_GET_FD_BY_ID", "BPF_TASK_FD_QUERY",
    "BPF_MAP_LOOKUP_AND_DELETE_ELEM", "BPF_MAP_FREEZE", "BPF_BTF_GET_NEXT_ID",
    "BPF_MAP_LOOKUP_BATCH", "BPF_MAP_LOOKUP_AND_DELETE_BATCH", "BPF_MAP_UPDATE_BATCH",
    "BPF_MAP_DELETE_BATCH", "BPF_LINK_CREATE", "BPF_LINK_UPDATE", "BPF_LINK_GET_FD_BY_ID",
    "BPF_LINK_GET_NEXT_ID", "BPF_ENABLE_STATS", "BPF_ITER_CREATE", "BPF_LINK_DETACH", "BPF_PROG_BIND_MAP",
)  # fmt: skip

CLONE_FLAGS = (
    (0x00020000, "CLONE_NEWNS"), (0x02000000, "CLONE_NEWCGROUP"), (0x04000000, "CLONE_NEWUTS"),
    (0x08000000, "CLONE_NEWIPC"), (0x10000000, "CLONE_NEWUSER"), (0x20000000, "CLONE_NEWPID"),
    (0x40000000, "CLONE_NEWNET"), (0x00000080, "CLONE_NEWTIME"), (0x00000200, "CLONE_FS"),
    (0x00000400, "CLONE_FILES"), (0x00000800, "CLONE_SIGHAND"), (0x00000100, "CLONE_VM"),
    (0x00008000, "CLONE_SYSVSEM"), (0x00010000, "CLONE_THREAD"),
)  # fmt: skip

MFD_FLAGS = ((1, "MFD_CLOEXEC"), (2, "MFD_ALLOW_SEALING"), (4, "MFD_HUGETLB"), (8, "MFD_NOEXEC_SEAL"), (16, "MFD_EXEC"))
RENAME_FLAGS = ((1, "RENAME_NOREPLACE"), (2, "RENAME_EXCHANGE"), (4, "RENAME_WHITEOUT"))
MNT_FLAGS = ((1, "MNT_FORCE"), (2, "MNT_DETACH"), (4, "MNT_EXPIRE"), (8, "UMOUNT_NOFOLLOW"))

IORING_OPS = (
    "NOP", "READV", "WRITEV", "FSYNC", "READ_FIXED", "WRITE_FIXED", "POLL_ADD", "POLL_REMOVE",
    "SYNC_FILE_RANGE", "SENDMSG", "RECVMSG", "TIMEOUT", "TIMEOUT_REMOVE", "ACCEPT", "ASYNC_CANCEL",
    "LINK_TIMEOUT", "CONNECT", "FALLOCATE", "OPENAT", "CLOSE", "FILES_UPDATE", "STATX", "READ", "WRITE",
    "FADVISE", "MADVISE", "SEND", "RECV", "OPENAT2", "EPOLL_CTL", "SPLICE", "PROVIDE_BUFFERS",
    "REMOVE_BUFFERS", "TEE", "SHUTDOWN", "RENAMEAT", "UNLINKAT", "MKDIRAT", "SYMLINKAT", "LINKAT",
    "MSG_RING", "FSETXATTR", "SETXATTR", "FGETXATTR", "GETXATTR", "SOCKET", "URING_CMD", "SEND_ZC",
    "SENDMSG_ZC", "READ_MULTISHOT", "WAITID", "FUTEX_WAIT", "FUTEX_WAKE", "FUTEX_WAITV",
    "FIXED_FD_INSTALL", "FTRUNCATE", "BIND", "LISTEN",
)  # fmt: skip


def ioring_op(opcode: int) -> str:
    return "IORING_OP_" + IORING_OPS[opcode] if 0 <= opcode < len(IORING_OPS) else f"opcode {opcode}"
