"""Whether the eBPF backend can run here, and if not, exactly why and what to do."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spyglass.capture.base import BackendStatus

BPF_DIR = Path(__file__).parent / "bpf"
OBJECT = BPF_DIR / "spyglass.bpf.o"
SOURCE = BPF_DIR / "spyglass.bpf.c"
BTF = Path("/sys/kernel/btf/vmlinux")
_CAP_SYS_ADMIN, _CAP_PERFMON, _CAP_BPF = 21, 38, 39


def object_path() -> Path:
    """The built program: ``SPYGLASS_BPF_OBJECT`` overrides the package's own."""
    env = os.environ.get("SPYGLASS_BPF_OBJECT")
    return Path(env) if env else OBJECT


def _caps() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


def privileged() -> bool:
    caps = _caps()
    need = (1 << _CAP_BPF) | (1 << _CAP_PERFMON)
    return caps & need == need or bool(caps & (1 << _CAP_SYS_ADMIN) and os.geteuid() == 0)


def lockdown() -> str | None:
    try:
        text = Path("/sys/kernel/security/lockdown").read_text()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else None


def static_problem() -> tuple[str, str] | None:
    """(problem, fix) found without loading anything, or None."""
    if not privileged():
        return (
            "not root: loading BPF programs needs root or CAP_BPF+CAP_PERFMON",
            "run spyglass as root (sudo), or use --backend strace",
        )
    if not BTF.exists():
        return (
            "the kernel has no BTF (/sys/kernel/btf/vmlinux is missing)",
            "use a kernel built with CONFIG_DEBUG_INFO_BTF=y (Debian/Ubuntu kernels are), or --backend strace",
        )
    if lockdown() == "confidentiality":
        return (
            "kernel lockdown is in confidentiality mode: BPF reads of kernel memory are refused",
            "boot without lockdown=confidentiality (or with Secure Boot off), or use --backend strace",
        )
    obj = object_path()
    if not obj.exists():
        return (
            f"the BPF program is not built ({obj} is missing)",
            "run ./scripts/setup.sh (installs clang, bpftool, libbpf-dev with apt-get and builds it)",
        )
    try:
        from spyglass.capture.ebpf import libbpf

        libbpf.lib()
    except OSError:
        return ("libbpf.so.1 is not installed", "sudo apt-get install libbpf1")
    return None


_LOAD_RESULT: tuple[bool, str] | None = None


def try_load() -> tuple[bool, str]:
    """Load and attach the program once (cached): (ok, why not)."""
    global _LOAD_RESULT
    if _LOAD_RESULT is None:
        from spyglass.capture.ebpf.libbpf import BpfObject, LibbpfError
        from spyglass.capture.ebpf.maps import PROGRAMS

        try:
            obj = BpfObject(str(object_path()), {"events": 1 << 16, "life": 1 << 16})
            try:
                obj.attach(PROGRAMS)
            finally:
                obj.close()
            _LOAD_RESULT = (True, "")
        except LibbpfError as exc:
            last = [ln for ln in exc.log.splitlines() if ln.strip()][-1:] or [""]
            _LOAD_RESULT = (False, f"{exc}{': ' + last[0] if last[0] else ''}")
    return _LOAD_RESULT


def status() -> BackendStatus:
    from spyglass.capture.base import BackendStatus  # the event model only when asked

    found = static_problem()
    if found is not None:
        return BackendStatus("ebpf", False, problem=found[0], fix=found[1])
    ok, why = try_load()
    release = os.uname().release
    if not ok:
        return BackendStatus(
            "ebpf", False, detail=f"kernel {release}", problem=f"load refused: {why}",
            fix="check dmesg and `bpftool prog` for the reason; use --backend strace meanwhile",
        )  # fmt: skip
    return BackendStatus("ebpf", True, detail=f"kernel {release}, BTF, libbpf (CO-RE object {object_path().name})")


def program_stats(ids: dict[str, int]) -> dict[str, tuple[int, int]]:
    """name -> (run_time_ns, run_cnt) from ``bpftool`` (counted while kernel.bpf_stats_enabled=1)."""
    import json
    import subprocess

    out: dict[str, tuple[int, int]] = {}
    for name, pid in ids.items():
        try:
            text = subprocess.run(
                ["bpftool", "prog", "show", "id", str(pid), "-j"], capture_output=True, check=True, timeout=10
            ).stdout
            info = json.loads(text)
        except (OSError, subprocess.SubprocessError, ValueError):
            continue
        out[name] = (int(info.get("run_time_ns", 0)), int(info.get("run_cnt", 0)))
    return out
