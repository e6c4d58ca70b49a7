"""The FIFO strace writes the trace into has no name a process of the run can open.

It had one (``$TMPDIR/spyglass-strace-*/trace``, mode 0600 in a 0700 directory: the same user's),
removed only once strace's first lines were read: a command quick enough (a static binary globbing
for it as its first act) opened a read end of its own about one time in five, recorded as a plain
``file.read``, and could take trace lines spyglass never saw.  Now spyglass opens the FIFO's ends and
the watchdog's, removes the name before strace starts, and strace opens it through spyglass's own
writer end (``/proc/<spyglass>/fd/N``), where reaching in is ``evasion-kill-monitor``.

The agent reads its tracer's command line for the ``-o`` argument and tries it and every FIFO among
spyglass's descriptors; the benign twin is the same run without the reaching in."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spyglass.store import RunReader, Store

PY = sys.executable
pytestmark = [pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed"),
              pytest.mark.timeout(120)]

#: the agent: its tracer's ``-o`` argument to ``out.txt``, then (with ``reach``) a read end of it and of
#: every FIFO among spyglass's (its parent's) descriptors
AGENT = r"""
import os, stat, sys
tracer = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("TracerPid:"))
argv = open(f"/proc/{tracer}/cmdline", "rb").read().split(b"\0")
out = argv[argv.index(b"-o") + 1].decode()
open("out.txt", "w").write(out)
if sys.argv[1:] == ["reach"]:
    names = [out] + [f"/proc/{os.getppid()}/fd/{n}" for n in os.listdir(f"/proc/{os.getppid()}/fd")]
    for name in names:
        try:
            if stat.S_ISFIFO(os.stat(name).st_mode):
                os.close(os.open(name, os.O_RDONLY | os.O_NONBLOCK))
        except OSError:
            pass
"""


def _run(tmp_path: Path, *args: str) -> tuple[RunReader, str]:
    store = tmp_path / "store"
    res = subprocess.run(
        [PY, "-m", "spyglass", "run", "--backend", "strace", "--store", str(store), "--", PY, "-c", AGENT, *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=100, check=False,
    )  # fmt: skip
    s = Store(store)
    reader = RunReader(s, s.resolve("latest"))
    assert reader.meta.monitor_pid, res.stderr
    return reader, (tmp_path / "out.txt").read_text()


def test_the_trace_fifo_is_reached_only_through_spyglass_s_own_descriptors(tmp_path: Path) -> None:
    reader, out = _run(tmp_path, "reach")
    assert out.startswith(f"/proc/{reader.meta.monitor_pid}/fd/"), out  # no name in /tmp to open
    assert "evasion-kill-monitor" in {a.rule_id for a in reader.alerts()}


def test_benign_twin_the_same_run_without_reaching_in_is_silent(tmp_path: Path) -> None:
    reader, out = _run(tmp_path)
    assert out.startswith(f"/proc/{reader.meta.monitor_pid}/fd/"), out
    assert reader.meta.status == "complete" and reader.meta.exit_code == 0
    assert not [a for a in reader.alerts() if a.level in ("high", "critical")], [a.message for a in reader.alerts()]
