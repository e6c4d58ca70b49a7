"""The hand-assembled io_uring seccomp filter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_helpers import needs_bwrap

from spyglass.sandbox import seccomp

URING = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(120)
for nr in (425, 426, 427):
    r = libc.syscall(nr, 4, buf, 0, 0, 0, 0)
    print(nr, r, ctypes.get_errno())
print("getpid", os.getpid() > 0)
"""


def test_program_shape() -> None:
    prog = seccomp.build_filter(machine="x86_64")
    insns = seccomp.disassemble(prog)
    assert insns[0] == (seccomp.BPF_LD_W_ABS, 0, 0, seccomp.OFF_ARCH)
    rets = [k for code, _jt, _jf, k in insns if code == seccomp.BPF_RET_K]
    assert rets == [seccomp.SECCOMP_RET_ALLOW, seccomp.SECCOMP_RET_ERRNO | 1]
    compared = {k for code, _jt, _jf, k in insns if code == seccomp.BPF_JEQ_K}
    assert {425, 426, 427, 425 | seccomp.X32_SYSCALL_BIT, seccomp.AUDIT_ARCH_I386} <= compared
    for i, (code, jt, jf, _k) in enumerate(insns):  # every jump lands inside the program
        if code == seccomp.BPF_JEQ_K:
            assert i + 1 + max(jt, jf) < len(insns)
    assert len(seccomp.build_filter(machine="aarch64")) % 8 == 0
    with pytest.raises(seccomp.UnsupportedArch):
        seccomp.build_filter(machine="mips")


@needs_bwrap
def test_io_uring_is_refused_with_eperm_and_everything_else_works(tmp_path: Path) -> None:
    path = seccomp.write_filter(str(tmp_path))
    with open(path, "rb") as f:
        out = subprocess.run(
            [
                "bwrap",
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--seccomp",
                str(f.fileno()),
                "--",
                sys.executable,
                "-c",
                URING,
            ],
            pass_fds=(f.fileno(),),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
    assert out[:3] == ["425 -1 1", "426 -1 1", "427 -1 1"]  # EPERM
    assert out[3] == "getpid True"
