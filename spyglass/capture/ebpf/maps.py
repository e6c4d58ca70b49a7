"""The program's maps as a run uses them: its settings, syscall table, urgent files, tracked set and lost counters.

A session writes the syscall table (``descs``), the files whose opens go to the alert ring
(``urgent``) and the ``settings`` before it attaches the programs (:func:`configure`), names
the thread whose next child the kernel follows (:func:`enroll`, :func:`disarm`), reads the
processes followed (``tracked``) and, at the end, the per-CPU ``lost`` counters.
"""

from __future__ import annotations

import os
import struct

from spyglass.capture import ident
from spyglass.capture.base import CaptureResult
from spyglass.capture.ebpf.libbpf import BpfObject, LibbpfError, map_keys, map_lookup, map_update, possible_cpus
from spyglass.capture.ebpf.syscalls import CATEGORIES, TABLE

PROGRAMS = ["sys_exit", "on_fork", "on_exec", "on_exit"]
OPTIONAL_PROGRAMS = ["on_uring"]  # io_uring may be compiled out

_FILE_ID = struct.Struct("<QII")  # the program's struct file_id: inode, kernel dev_t, pad
_U32 = struct.Struct("<I")
_CFG = struct.Struct("<IIII")  # the program's struct cfg: drop_dir_reads, root_tgid, enroll_tid, pad


def configure(obj: BpfObject, opts: dict[str, object], protected: ident.Identities | None, notes: list[str]) -> int:
    """Fill the maps and attach the programs; the ``drop_dir_reads`` setting written (0 or 1)."""
    descs = obj.map_fd("descs")
    for row in TABLE:
        map_update(descs, _U32.pack(row.nr), row.packed())
    urgent = obj.map_fd("urgent")  # + the sandbox's honeytokens (options["urgent_ids"])
    ids = [*(protected.ids if protected is not None else ()), *opts.get("urgent_ids", ())]  # type: ignore[misc]
    for dev, ino in ids[:8192]:
        map_update(urgent, _FILE_ID.pack(ino, os.major(dev) << 20 | os.minor(dev), 0), b"\1")
    drop_dirs = int(opts.get("drop_dir_reads", True) is not False)
    map_update(obj.map_fd("settings"), _U32.pack(0), _CFG.pack(drop_dirs, 0, 0, 0))
    obj.attach(PROGRAMS)
    try:
        obj.attach(OPTIONAL_PROGRAMS)
    except LibbpfError:
        notes.append("io_uring tracepoints unavailable: io_uring opcodes are not recorded")
    return drop_dirs


def enroll(obj: BpfObject, drop_dirs: int, tid: int) -> None:
    """The kernel follows the next process thread ``tid`` forks (on_fork)."""
    map_update(obj.map_fd("settings"), _U32.pack(0), _CFG.pack(drop_dirs, 0, tid, 0))


def disarm(obj: BpfObject, drop_dirs: int, tid: int) -> None:
    """No fork matched (Popen failed before it): the thread's next fork must not be followed."""
    fd = obj.map_fd("settings")
    raw = map_lookup(fd, _U32.pack(0), _CFG.size)
    if raw is not None and _CFG.unpack(raw)[2] == tid:
        map_update(fd, _U32.pack(0), _CFG.pack(drop_dirs, 0, 0, 0))


def tracked(obj: BpfObject) -> list[int]:
    """The processes the program follows (alive or not yet reaped from the map)."""
    return [_U32.unpack(k)[0] for k in map_keys(obj.map_fd("tracked"), 4)]


def lost(obj: BpfObject) -> tuple[int, list[str]]:
    """The program's per-CPU lost counters, summed: (total, ["file 12", ...])."""
    fd = obj.map_fd("lost")
    ncpu = possible_cpus()
    kinds: list[str] = []
    total = 0
    for i, name in enumerate(CATEGORIES):
        raw = map_lookup(fd, _U32.pack(i), 8 * ncpu)
        n = sum(struct.unpack(f"<{ncpu}Q", raw)) if raw else 0
        if n:
            kinds.append(f"{name} {n}")
            total += n
    return total, kinds


def count_lost(obj: BpfObject, result: CaptureResult) -> list[str]:
    """At the end of a run: the records lost into ``result.lost``, and a note naming their kinds
    (returned: ``["file 12", ...]``)."""
    try:
        total, kinds = lost(obj)
    except LibbpfError as exc:
        result.notes.append(f"lost-record counters unreadable: {exc}")
        return []
    result.lost = total
    if total:
        result.notes.append(f"{total} record(s) lost (ring full): " + ", ".join(kinds))
    return kinds
