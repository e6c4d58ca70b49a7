"""Writes into the store through a path that names one of the writer's descriptors (``/dev/fd/N/NAME``,
``/proc/self/fd/N/NAME``) by a writer that does not stay to be judged.

The witness guard judges events after the fact; it used to resolve such a path from the writer's
live ``/proc/PID/fd/N``, so a writer that exited at once (or turned its descriptor elsewhere) left
nothing to resolve, or the wrong thing.  The capture now names the descriptor's file when the call
is made: the eBPF program walks descriptor N's file, the strace parser reads it from the
descriptors the trace showed (spyglass.capture.strace.paths ``map_proc_alias``).  Each attack is a
real ``spyglass run`` under each backend; the benign twin does the same in its workspace and stays
silent."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

PY = sys.executable

#: ``python -c WRITER DIR NAME [57]``: DIR opened as a directory descriptor (moved to 57 with a third
#: argument), then two directories and two files made through it, each way once, and the process gone
WRITER = r"""
import os, sys
d = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
if len(sys.argv) > 3:
    os.dup2(d, 57); d = 57
n = sys.argv[2]
os.mkdir(f"/dev/fd/{d}/{n}-dir")
os.mkdir(f"/proc/self/fd/{d}/{n}-pdir")
os.write(os.open(f"/dev/fd/{d}/{n}-file", os.O_CREAT | os.O_WRONLY), b"x")
os.write(os.open(f"/proc/self/fd/{d}/{n}-pfile", os.O_CREAT | os.O_WRONLY), b"x")
os._exit(0)
"""

#: ``python -c NAMER DIR OLD``: chmod, rename and unlink of the file OLD in DIR through a descriptor on DIR
NAMER = r"""
import os, sys
d = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
old = sys.argv[2]
os.chmod(f"/dev/fd/{d}/{old}", 0o600)
os.rename(f"/proc/self/fd/{d}/{old}", f"/proc/self/fd/{d}/{old}.moved")
os.unlink(f"/dev/fd/{d}/{old}.moved")
os._exit(0)
"""

#: ``python -c TURNER DIR ELSEWHERE NAME MARK``: NAME made in DIR through descriptor 57 on it, which then
#: names ELSEWHERE at once; the process stays (holding it) until MARK exists
TURNER = r"""
import os, sys, time
os.dup2(os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY), 57)
os.mkdir(f"/dev/fd/57/{sys.argv[3]}")
os.dup2(os.open(sys.argv[2], os.O_RDONLY | os.O_DIRECTORY), 57)
open(sys.argv[4] + ".made", "w").close()
for _ in range(6000):
    if os.path.exists(sys.argv[4]):
        break
    time.sleep(0.01)
"""


def _progs(tmp: Path) -> dict[str, Path]:
    out = {}
    for name, text in (("writer", WRITER), ("namer", NAMER), ("turner", TURNER)):
        out[name] = tmp / f"{name}.py"
        out[name].write_text(text)
    return out


def _play(setup: Any, script: str) -> Any:
    progs = _progs(setup.ws.parent)
    return setup.play(script, f"W='{PY} {progs['writer']}'", f"N='{PY} {progs['namer']}'",
                      f"T='{PY} {progs['turner']}'")


NAMES = ("-dir", "-pdir", "-file", "-pfile")


def test_names_made_in_the_store_through_a_descriptor_by_a_writer_that_exits_at_once_are_caught(
        setup: Any) -> None:
    res = _play(setup, """
$W "$STORE" top
$W "$STORE/cache" cached 57
""")
    for where, name in ((setup.store, "top"), (setup.store / "cache", "cached")):
        assert all((where / (name + s)).exists() for s in NAMES), res.stderr
    msgs = setup.tamper()
    for name in ("top", "cached"):
        for suffix in NAMES:
            assert any(f"{name}{suffix}" in m for m in msgs), (name + suffix, msgs, res.stderr)


def test_a_chmod_rename_and_unlink_in_the_store_through_a_descriptor_by_a_writer_that_exits_are_caught(
        setup: Any) -> None:
    setup.run("true")
    (setup.store / "cache" / "old").write_text("kept\n")
    res = _play(setup, """
$N "$STORE/cache" old
""")
    assert not (setup.store / "cache" / "old").exists(), res.stderr
    msgs = setup.tamper()
    assert any("chmod" in m and "cache/old" in m for m in msgs), (msgs, res.stderr)
    assert any("rename" in m and "cache/old" in m for m in msgs), (msgs, res.stderr)
    assert any("cache/old.moved" in m and ("delet" in m or "unlink" in m) for m in msgs), (msgs, res.stderr)


def test_a_name_made_through_a_descriptor_turned_elsewhere_at_once_is_judged_where_it_was_made(
        setup: Any) -> None:
    """The writer stays, its descriptor now on its workspace: judged from its live ``/proc`` the
    name was in the workspace (no ``witness-tamper``, whatever the timing).  eBPF only: the strace
    parser reads a live writer's descriptor when it parses the line, which may be after the turn
    (docs/threat-model.md)."""
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


def test_benign_twin_the_same_writers_in_the_workspace_stay_silent(setup: Any) -> None:
    res = _play(setup, """
mkdir out out/cache store2
echo kept > out/old
$W "$WS/out" top
$W "$WS/out/cache" cached 57
$N "$WS/out" old
$T "$WS/out" "$WS/store2" turned "$WS/release" &
until [ -e "$WS/release.made" ]; do sleep 0.02; done
judged 1; touch "$WS/release"; wait
""")
    assert all((setup.ws / "out" / ("top" + s)).exists() for s in NAMES), res.stderr
    assert (setup.ws / "out" / "turned").is_dir() and not (setup.ws / "out" / "old").exists(), res.stderr
    assert setup.tamper() == [], res.stderr
