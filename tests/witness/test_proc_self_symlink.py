"""A symlink of the agent's own to ``/proc/self/fd/N`` (``ln -s /proc/self/fd/7 x; mkdir x/new``):
``/proc/self`` in it is the writer, never spyglass.

The kernel resolves ``x`` in the writer, where descriptor N is what the writer opened (here the
store's ``cache/``); spyglass used to resolve it in its own process, where ``/proc/self`` is
spyglass: the strace parser named spyglass's own descriptor N (or nothing), and the guard under
eBPF looked at spyglass's descriptor N too.  Each attack is a real ``spyglass run`` under each
backend, the writer alive until its events are judged; the benign twin does the same into its
workspace through descriptors 3 to 12 (spyglass's own descriptors of those numbers are store files,
its events and its index among them) and stays silent.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

PY = sys.executable

#: ``python -c WRITER STORE DIR FD LINK...``: DIR opened as directory descriptor FD, a symlink LINK to
#: /proc/self/fd/FD (or /proc/thread-self/fd/FD for a second LINK), a directory and a file made through
#: each; then it waits, alive, until its events are judged (``sync-FD-done`` in the run's events)
WRITER = r"""
import glob, os, sys, time
store, d, fd = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.dup2(os.open(d, os.O_RDONLY | os.O_DIRECTORY), fd)
for link, alias in zip(sys.argv[4:], ("self", "thread-self")):
    os.symlink(f"/proc/{alias}/fd/{fd}", link)
    os.mkdir(f"{link}/made-{fd}-{alias}")
    os.write(os.open(f"{link}/file-{fd}-{alias}", os.O_CREAT | os.O_WRONLY), b"x")
mark = f"sync-{fd}-done"
open(mark, "w").close()
for _ in range(1200):
    if any(mark in open(p, errors="replace").read() for p in glob.glob(store + "/runs/*/events.jsonl")):
        break
    time.sleep(0.05)
"""


def test_a_write_into_the_store_through_a_symlink_to_proc_self_fd_is_tamper(setup: Any) -> None:
    setup.play(f'{PY} -c \'{WRITER}\' "$STORE" "$STORE/cache" 987 x y')
    msgs = setup.tamper()
    for name in ("made-987-self", "file-987-self", "made-987-thread-self", "file-987-thread-self"):
        hits = [m for m in msgs if name in m]
        assert hits and all("the spyglass store" in m for m in hits), (name, msgs)


def test_benign_twin_the_same_trick_into_the_workspace_stays_silent(setup: Any) -> None:
    (setup.ws / "sub").mkdir()
    script = "\n".join(f'{PY} -c \'{WRITER}\' "$STORE" "$PWD/sub" {fd} l{fd}' for fd in range(3, 13))
    setup.play(script)
    assert setup.tamper() == []
    for fd in range(3, 13):
        assert (setup.ws / "sub" / f"made-{fd}-self").is_dir()


#: ``sh``: descriptor 7 on DIR (``$1``), a symlink to /proc/self/fd/7, and a directory and a file made and
#: a file removed through it, each by a process of its own that exits at once
GONE = 'exec 7<"$1"; ln -s /proc/self/fd/7 x; mkdir x/gone-dir; touch x/gone-file; touch x/gone-2; rm x/gone-2'


@pytest.mark.backends("strace")
def test_under_strace_writers_gone_at_once_are_still_tamper(setup: Any) -> None:
    """Each writer is gone before its line is parsed: the link is read from the descriptors the trace
    showed (the shell's open of descriptor 7, inherited at each fork).  Under eBPF this is missed
    (docs/threat-model.md)."""
    setup.play(f"sh -c '{GONE}' sh \"$STORE/cache\"")
    msgs = setup.tamper()
    for what in ("(mkdir): ", "writing: ", "deleted: "):
        assert any(what in m and "/cache/gone-" in m for m in msgs), (what, msgs)


@pytest.mark.backends("strace")
def test_benign_twin_writers_gone_at_once_into_the_workspace_stay_silent(setup: Any) -> None:
    (setup.ws / "sub").mkdir()
    setup.play(f"sh -c '{GONE}' sh \"$PWD/sub\"")
    assert setup.tamper() == []
    assert not [a for a in setup.alerts() if a["rule_id"] == "scope-write-outside-workspace"], setup.alerts()
    assert (setup.ws / "sub" / "gone-dir").is_dir()
