"""Names made anew (a ``mkdir``, an ``O_CREAT|O_EXCL`` open that succeeded): the guard does not look
up their inode, and a directory made gets its real path from its parent's (spyglass.witness.guard
``_made_anew``, spyglass.witness.protected ``made_dir``).  The attacker makes names anew inside the
store through another way to it (a descriptor named ``/dev/fd/N``, a symlink to a store directory,
a directory it made and judged clean, then swapped for a symlink into the store), with processes
that are gone by the time the guard judges their events.  Each is a real ``spyglass run`` under
each backend; the benign twin makes the same names in its workspace and stays silent."""

from __future__ import annotations

import sys
from typing import Any

PY = sys.executable

#: ``excl PATH``: an ``O_CREAT|O_EXCL`` open of PATH that writes a line (a process of its own)
EXCL = f"""export STORE
excl() {{ {PY} -c 'import os,sys; os.write(os.open(sys.argv[1], os.O_CREAT|os.O_EXCL|os.O_WRONLY), b"x")' "$1"; }}
#: ``fdmake DIR NAME``: DIR opened as descriptor 57 (none of spyglass's own), then ``/dev/fd/57/NAME-dir``
#: made with ``mkdir`` and ``/dev/fd/57/NAME-file`` with an exclusive open (a process of its own, which
#: stays, holding its descriptor, until its events are judged; one that exits at once is
#: tests/witness/test_fd_path_writer_gone.py)
fdmake() {{ {PY} -c 'import os,sys,time; os.dup2(os.open(sys.argv[1], os.O_RDONLY), 57); n = "/dev/fd/57/" + sys.argv[2]
os.mkdir(n + "-dir"); os.close(os.open(n + "-file", os.O_CREAT|os.O_EXCL|os.O_WRONLY)); open(sys.argv[4], "w").close()
for _ in range(2000):
    if os.path.exists(sys.argv[3]): break
    time.sleep(0.01)' "$1" "$2" "$WS/release-$2" "$WS/made-$2" &
  until [ -e "$WS/made-$2" ]; do sleep 0.02; done
  judged "fd-$2"; touch "$WS/release-$2"; wait; }}
"""


def test_names_made_anew_in_the_store_through_dev_fd_are_caught(setup: Any) -> None:
    res = setup.play("""
fdmake "$STORE/runs" made
judged 1
""", EXCL)
    assert (setup.store / "runs" / "made-dir").is_dir() and (setup.store / "runs" / "made-file").exists()
    msgs = setup.tamper()
    assert any("made-dir" in m for m in msgs), (msgs, res.stderr)
    assert any("made-file" in m for m in msgs), (msgs, res.stderr)


def test_a_directory_made_and_judged_then_swapped_for_the_store_is_caught(setup: Any) -> None:
    """``d`` is made (its real path noted from its parent's, no look) and a file made anew in it is
    judged clean; ``d`` then becomes a symlink to the store's runs, and the same names are made again."""
    res = setup.play("""
mkdir d; excl d/f; mkdir d/sub
judged 1
mv d d.old; ln -s "$STORE/runs" d
excl d/f; mkdir d/sub; excl d/sub/g
judged 2
""", EXCL)
    assert (setup.store / "runs" / "sub" / "g").exists()
    msgs = setup.tamper()
    assert any(f"{setup.ws}/d/f" in m or "runs/f" in m for m in msgs), (msgs, res.stderr)
    assert any("sub/g" in m for m in msgs), (msgs, res.stderr)


def test_benign_twin_names_made_anew_through_dev_fd_in_the_workspace_stay_silent(setup: Any) -> None:
    """Under strace, ``/dev/fd/5`` was resolved as a symlink in spyglass's own process (its fd 5, the
    store's index.sqlite-shm): a false witness-tamper, and a miss had spyglass's fd 5 been elsewhere."""
    res = setup.play("""
mkdir out; fdmake out made; sh -c 'exec 5<out; mkdir /dev/fd/5/shell-dir'
judged 1
""", EXCL)
    assert (setup.ws / "out" / "made-dir").is_dir() and (setup.ws / "out" / "shell-dir").is_dir()
    assert setup.tamper() == [], res.stderr


def test_benign_twin_names_made_anew_in_the_workspace_stay_silent(setup: Any) -> None:
    res = setup.play("""
mkdir d; excl d/f; mkdir d/sub
judged 1
mv d d.old; mkdir other; ln -s other d
excl d/f; mkdir d/sub; excl d/sub/g; mkdir d/sub
judged 2
""", EXCL)
    assert (setup.ws / "other" / "sub" / "g").exists()
    assert setup.tamper() == [], res.stderr
