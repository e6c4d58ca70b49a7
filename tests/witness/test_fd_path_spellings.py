"""Other spellings of a path through a descriptor, by a writer that does not stay to be judged.

The kernel resolves ``/dev//fd/N/x``, ``/dev/./fd/N/x``, ``//proc/self/fd/N/x``,
``/proc/self/task/TID/fd/N/x``, ``/dev/../proc/self/fd/N/x``, ``/proc/self/root/proc/self/fd/N/x``,
``/proc/self/fd/N/../x``, ``fd/N/x`` from ``/dev`` and ``self/fd/N/x`` from ``/proc`` as it does
``/dev/fd/N/x``; a child writing through ``/proc/PARENT/fd/N/x`` reaches its parent's descriptor.
The capture resolves the ones it knows when the call is made (the eBPF program reads repeated
slashes, ``.`` components and ``task/TID``; the strace parser folds them and ``..`` after the
descriptor); what is left names a descriptor of a process gone by the time the guard judges it,
which is taken pessimistically (``spyglass.witness.protected.through_gone``).  Each attack is a real
``spyglass run`` under each backend, with descriptor 57 (spyglass's own descriptors have low
numbers: a name read in spyglass's process must not find the store by chance)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

PY = sys.executable

#: ``python -c SPELLER DIR NAME I [MARK]``: DIR opened as descriptor 57, then directory NAME-I made through
#: it by spelling I, and the process gone at once (or, with MARK, when MARK exists); one process per
#: spelling (the guard says at most five alerts of one process)
SPELLER = r"""
import os, sys, threading, time
os.dup2(os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY), 57)
n, i, pid, tid = sys.argv[2], int(sys.argv[3]), os.getpid(), threading.get_native_id()
name = f"{n}-{i}"
absolute = {1: f"/dev//fd/57/{name}", 2: f"/dev/./fd/57/{name}", 3: f"//proc/self/fd/57/{name}",
            4: f"/./proc/self//fd/57/{name}", 5: f"/proc/self/task/{tid}/fd/57/{name}",
            6: f"/proc/{pid}/task/{tid}/fd/57/{name}", 7: f"/dev/../proc/self/fd/57/{name}",
            8: f"/proc/self/root/proc/self/fd/57/{name}", 11: f"/proc/self/fd/57/../{name}"}
if i in absolute:
    os.mkdir(absolute[i])
elif i == 9:
    os.chdir("/dev"); os.mkdir(f"fd/57/{name}")
elif i == 10:
    os.chdir("/proc"); os.mkdir(f"self/fd/57/{name}")
elif os.fork() == 0:  # 12: a child through its parent's descriptor, both gone at once
    os.mkdir(f"/proc/{pid}/fd/57/{name}"); os._exit(0)
else:
    os.wait()
while len(sys.argv) > 4 and not os.path.exists(sys.argv[4]):
    time.sleep(0.01)
os._exit(0)
"""
COUNT = 12

#: ``python -c TURNER DIR ELSEWHERE NAME MARK``: NAME made in DIR through descriptor 57 spelt ``/dev//fd/57``,
#: which then names ELSEWHERE at once; the process stays (holding it) until MARK exists
TURNER = r"""
import os, sys, time
os.dup2(os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY), 57)
os.mkdir(f"/dev//fd/./57/{sys.argv[3]}")
os.dup2(os.open(sys.argv[2], os.O_RDONLY | os.O_DIRECTORY), 57)
open(sys.argv[4] + ".made", "w").close()
for _ in range(6000):
    if os.path.exists(sys.argv[4]):
        break
    time.sleep(0.01)
"""


def _play(setup: Any, script: str) -> Any:
    speller, turner = setup.ws.parent / "speller.py", setup.ws.parent / "turner.py"
    speller.write_text(SPELLER)
    turner.write_text(TURNER)
    return setup.play(script, f"S='{PY} {speller}'", f"T='{PY} {turner}'")


def _made(where: Path, name: str) -> list[str]:
    made = [f"{name}-{i}" for i in range(1, COUNT + 1) if (where / f"{name}-{i}").is_dir()]
    made += [f"{name}-11"] if (where.parent / f"{name}-11").is_dir() else []
    return made


def test_each_spelling_of_a_descriptor_into_the_store_by_a_writer_gone_at_once_is_caught(setup: Any) -> None:
    res = _play(setup, f'for i in $(seq {COUNT}); do $S "$STORE/cache" sp $i; done')
    assert len(_made(setup.store / "cache", "sp")) == COUNT, res.stderr
    msgs = setup.tamper()
    for i in range(1, COUNT + 1):
        assert any(f"sp-{i} " in m + " " or f"sp-{i})" in m for m in msgs), (i, msgs, res.stderr)


def test_a_descriptor_spelt_otherwise_and_turned_elsewhere_at_once_is_judged_where_it_was_made(
        setup: Any) -> None:
    """eBPF only (the strace parser reads a live writer's descriptor when it parses the line:
    docs/threat-model.md)."""
    if setup.backend == "strace":
        pytest.skip("strace reads a live writer's descriptor when the line is parsed: a turn before that is missed")
    res = _play(setup, """
mkdir elsewhere
$T "$STORE/runs" "$WS/elsewhere" turned "$WS/release" &
until [ -e "$WS/release.made" ]; do sleep 0.02; done
judged 1; touch "$WS/release"; wait
""")
    assert (setup.store / "runs" / "turned").is_dir(), res.stderr
    assert any("runs/turned" in m for m in setup.tamper()), res.stderr


def test_benign_twin_the_spellings_in_the_workspace_stay_silent(setup: Any) -> None:
    """The same names in the workspace: those the capture resolves by a writer gone at once, all of
    them by a writer that stays until they are judged (a name through a descriptor of a process gone
    that the capture did not resolve is an alert whatever it named: see docs/threat-model.md)."""
    res = _play(setup, f"""
mkdir out out/in elsewhere
for i in $(seq {COUNT}); do $S "$WS/out/in" stay $i "$WS/release" & done
until [ $(ls out/in out | grep -c stay-) = {COUNT} ]; do sleep 0.02; done
judged 1; touch "$WS/release"; wait
$T "$WS/out" "$WS/elsewhere" turned "$WS/release2" &
until [ -e "$WS/release2.made" ]; do sleep 0.02; done
judged 2; touch "$WS/release2"; wait
""")
    assert len(_made(setup.ws / "out" / "in", "stay")) == COUNT, res.stderr
    assert (setup.ws / "out" / "turned").is_dir(), res.stderr
    assert setup.tamper() == [], res.stderr
