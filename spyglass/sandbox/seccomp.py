"""A seccomp filter that blocks io_uring inside the sandbox, assembled by hand.

io_uring lets a process open, read, write and connect through a shared ring
buffer instead of system calls, so the capture backend (ptrace or syscall
tracepoints) would see none of it.  The sandbox therefore refuses
``io_uring_setup``, ``io_uring_enter`` and ``io_uring_register`` with
``EPERM``; programs that use io_uring fall back to ordinary calls when setup
fails (liburing, tokio-uring, Node's libuv all do).

The program is classic BPF as the kernel's seccomp takes it (``struct
sock_filter`` records: u16 code, u8 jt, u8 jf, u32 k) and is handed to
bubblewrap with ``--seccomp FD``.  No libseccomp binding is needed: the
program is a dozen instructions long::

    A = seccomp_data.arch
    if A == native arch:  A = nr; if A in BLOCKED (+ x32 variants): ERRNO
    if A == compat arch:  A = nr; if A in BLOCKED: ERRNO
    otherwise (an ABI this host does not run):  ERRNO
    ALLOW

The three io_uring calls have the same numbers (425-427) on every
architecture since Linux 5.1 (the unified syscall table), in native and
compat (32-bit) mode alike.
"""

from __future__ import annotations

import errno
import os
import platform
import struct
import tempfile
from collections.abc import Iterable, Sequence

import msgspec

# classic BPF opcodes (linux/filter.h)
BPF_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
BPF_RET_K = 0x06  # BPF_RET | BPF_K

SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000

# offsets in struct seccomp_data
OFF_NR = 0
OFF_ARCH = 4

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_I386 = 0x40000003
AUDIT_ARCH_AARCH64 = 0xC00000B7
AUDIT_ARCH_ARM = 0x40000028
X32_SYSCALL_BIT = 0x40000000

#: syscall name -> number (identical on all architectures, see module doc)
IO_URING_SYSCALLS: dict[str, int] = {
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
}

#: machine (``uname -m``) -> (native audit arch, compat audit arch or None, has x32)
_ARCHES: dict[str, tuple[int, int | None, bool]] = {
    "x86_64": (AUDIT_ARCH_X86_64, AUDIT_ARCH_I386, True),
    "aarch64": (AUDIT_ARCH_AARCH64, AUDIT_ARCH_ARM, False),
}


class Insn(msgspec.Struct, frozen=True):
    """One BPF instruction; ``jt``/``jf`` may name a label until assembled."""

    code: int
    k: int = 0
    jt: int | str = 0
    jf: int | str = 0


class UnsupportedArch(Exception):
    pass


def _assemble(prog: Sequence[Insn | str]) -> bytes:
    """Resolve string labels (entries that are plain ``str``) into relative jumps and pack."""
    labels: dict[str, int] = {}
    insns: list[Insn] = []
    for item in prog:
        if isinstance(item, str):
            labels[item] = len(insns)
        else:
            insns.append(item)
    out = bytearray()
    for i, ins in enumerate(insns):
        jt, jf = ins.jt, ins.jf
        if isinstance(jt, str):
            jt = labels[jt] - i - 1
        if isinstance(jf, str):
            jf = labels[jf] - i - 1
        if not (0 <= jt <= 255 and 0 <= jf <= 255):
            raise ValueError(f"jump out of range at instruction {i}")
        out += struct.pack("=HBBI", ins.code, jt, jf, ins.k)
    return bytes(out)


def _check_numbers(numbers: Iterable[int], match: str, nomatch: str) -> list[Insn | str]:
    """A == nr: jump to ``match`` if it is one of ``numbers``, else to ``nomatch``."""
    nums = list(numbers)
    prog: list[Insn | str] = []
    for i, n in enumerate(nums):
        last = i == len(nums) - 1
        prog.append(Insn(BPF_JEQ_K, n, jt=match, jf=nomatch if last else 0))
    return prog


def build_filter(
    blocked: Iterable[int] = IO_URING_SYSCALLS.values(),
    *,
    machine: str | None = None,
    err: int = errno.EPERM,
) -> bytes:
    """The BPF program (raw ``struct sock_filter`` array) refusing ``blocked`` with ``err``."""
    machine = machine or platform.machine()
    try:
        native, compat, x32 = _ARCHES[machine]
    except KeyError:
        raise UnsupportedArch(f"no io_uring seccomp filter for architecture {machine}") from None
    nums = sorted(set(blocked))
    native_nums = nums + ([n | X32_SYSCALL_BIT for n in nums] if x32 else [])
    deny = SECCOMP_RET_ERRNO | (err & 0xFFFF)
    prog: list[Insn | str] = [
        Insn(BPF_LD_W_ABS, OFF_ARCH),
        Insn(BPF_JEQ_K, native, jt="native", jf=0 if compat is not None else "deny"),
    ]
    if compat is not None:
        prog.append(Insn(BPF_JEQ_K, compat, jt="compat", jf="deny"))
    prog += ["native", Insn(BPF_LD_W_ABS, OFF_NR), *_check_numbers(native_nums, "deny", "allow")]
    if compat is not None:
        prog += ["compat", Insn(BPF_LD_W_ABS, OFF_NR), *_check_numbers(nums, "deny", "allow")]
    prog += ["allow", Insn(BPF_RET_K, SECCOMP_RET_ALLOW), "deny", Insn(BPF_RET_K, deny)]
    return _assemble(prog)


def disassemble(program: bytes) -> list[tuple[int, int, int, int]]:
    """(code, jt, jf, k) per instruction; for tests and ``sandbox check``."""
    return [struct.unpack_from("=HBBI", program, off) for off in range(0, len(program), 8)]


def write_filter(directory: str, program: bytes | None = None) -> str:
    """Write the program to a file in ``directory`` (bwrap reads it from an fd) and return its path."""
    program = program if program is not None else build_filter()
    fd, path = tempfile.mkstemp(prefix="seccomp-", suffix=".bpf", dir=directory)
    try:
        os.write(fd, program)
    finally:
        os.close(fd)
    return path
