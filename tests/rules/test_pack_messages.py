"""Alert messages name what they are about, never a bare `?`: a process left running, a descriptor
taken with pidfd_getfd, a file opened by handle.  Real processes, the real CLI, the default backend."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

PY = sys.executable

GETFD = r'''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
pfd = os.pidfd_open(os.getppid())
libc.syscall(438, pfd, 0, 0)
'''

BY_HANDLE = r'''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
class FH(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint), ("type", ctypes.c_int), ("f", ctypes.c_ubyte * 128)]
fh, mount_id = FH(), ctypes.c_int()
fh.bytes = 128
open("data.txt", "w").write("x\n")
libc.name_to_handle_at(-100, os.path.abspath("data.txt").encode(), ctypes.byref(fh), ctypes.byref(mount_id), 0)
mfd = os.open(".", os.O_RDONLY)
libc.open_by_handle_at(mfd, ctypes.byref(fh), os.O_RDONLY)
'''


@pytest.fixture
def record(cli_place: Any):  # type: ignore[no-untyped-def]
    ws, store, env = cli_place("open_by_handle_at needs CAP_DAC_READ_SEARCH (root)")

    def run(*args: str) -> list[dict[str, object]]:
        res = subprocess.run([PY, "-m", "spyglass", "run", "--store", str(store), *args], cwd=ws, env=env,
                             capture_output=True, text=True, timeout=180, check=False)
        assert "Traceback" not in res.stderr, res.stderr
        out = subprocess.run([PY, "-m", "spyglass", "alerts", "--store", str(store), "--format", "json"], cwd=ws,
                             env=env, capture_output=True, text=True, timeout=60, check=False)
        alerts: list[dict[str, object]] = json.loads(out.stdout)
        return alerts

    return run


def _messages(alerts: list[dict[str, object]], rule: str) -> list[str]:
    return [str(a["message"]) for a in alerts if a["rule_id"] == rule]


def test_a_process_left_running_is_described(record) -> None:  # type: ignore[no-untyped-def]
    alerts = record("--wait-descendants", "0.2", "--descendants", "detach", "--", "/bin/sh", "-c",
                    "(setsid sleep 3 </dev/null >/dev/null 2>&1 &); exit 0")
    msgs = _messages(alerts, "proc-outlived-run")
    assert msgs and all(not m.endswith(": ?") and "outlived the run: " in m for m in msgs), msgs


def test_pidfd_getfd_names_its_source(record) -> None:  # type: ignore[no-untyped-def]
    msgs = _messages(record("--", PY, "-c", GETFD), "sys-pidfd-getfd")
    assert msgs and all("from pid ?" not in m and "from pid " in m for m in msgs), msgs


def test_open_by_handle_names_the_file_or_says_it_is_unresolved(record) -> None:  # type: ignore[no-untyped-def]
    msgs = _messages(record("--", PY, "-c", BY_HANDLE), "evasion-open-by-handle")
    assert msgs and all("?" not in m and "opened by handle" in m for m in msgs), msgs


def test_benign_twin_a_plain_run_has_none_of_these(record) -> None:  # type: ignore[no-untyped-def]
    alerts = record("--", "/bin/sh", "-c", "echo hi > out.txt; sleep 0.1")
    rules = {str(a["rule_id"]) for a in alerts}
    assert not rules & {"proc-outlived-run", "sys-pidfd-getfd", "evasion-open-by-handle"}, alerts
