"""Names judged as the writer sees them, not as spyglass's own process does.

A symlink in the workspace to ``/dev/fd/57`` (or ``/proc/self/...``) names the writer's descriptor 57:
resolved in spyglass's process it named spyglass's, so a directory made through it in the store was
judged against whatever spyglass had as descriptor 57.  A bind mount of the store made in a mount
namespace of the run's own is not in spyglass's mounts: a name below it was judged as the plain
directory spyglass sees there.  The guard now resolves a symlinked directory as the writer sees it
(``/proc/PID/root``, its ``/proc/self``), and, once the run mounted something, looks at a name's
directories by device and inode in the view of the writer or of its nearest live ancestor.  Real
processes under a real ``spyglass run``, each backend."""

from __future__ import annotations

import shutil
import sys
from typing import Any

import pytest

PY = sys.executable

#: ``python -c LINKER DIR NAME [MARK]``: DIR opened as descriptor 57, NAME made through the workspace's
#: symlink ``l`` (to /dev/fd/57); gone at once, or when MARK exists
LINKER = r"""
import os, sys, time
os.dup2(os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY), 57)
os.mkdir("l/" + sys.argv[2])
open(sys.argv[2] + ".made", "w").close()
while len(sys.argv) > 3 and not os.path.exists(sys.argv[3]):
    time.sleep(0.01)
os._exit(0)
"""

#: ``binder DIR NAME``: DIR bound on ``m`` in a new user and mount namespace, NAME made below it; the
#: namespace's shell stays until ``release`` exists
BINDER = """
binder() {
  unshare -Urm sh -c 'mount --bind "$1" m && mkdir "m/$2" && touch "$2.made" &&
                      until [ -e release ]; do sleep 0.02; done' - "$1" "$2" &
  until [ -e "$2.made" ]; do sleep 0.02; done
}
"""


def _play(setup: Any, script: str) -> Any:
    linker = setup.ws.parent / "linker.py"
    linker.write_text(LINKER)
    return setup.play("ln -s /dev/fd/57 l; mkdir m\n" + script, f"L='{PY} {linker}'", BINDER)


def _need_unshare() -> None:
    if shutil.which("unshare") is None:
        pytest.skip("unshare not installed")


def test_a_directory_made_in_the_store_through_a_workspace_symlink_to_dev_fd_is_caught(setup: Any) -> None:
    res = _play(setup, """
$L "$STORE/cache" gone
$L "$STORE/runs" stays "$WS/release"  &
until [ -e stays.made ]; do sleep 0.02; done
judged 1; touch release; wait
""")
    assert (setup.store / "cache" / "gone").is_dir() and (setup.store / "runs" / "stays").is_dir(), res.stderr
    msgs = setup.tamper()
    assert any("l/gone" in m for m in msgs), (msgs, res.stderr)  # gone: through its descriptor, pessimistically
    assert any("spyglass store" in m and "l/stays" in m for m in msgs), (msgs, res.stderr)


def test_a_directory_made_below_a_bind_mount_of_the_store_in_the_run_s_own_namespace_is_caught(
        setup: Any) -> None:
    _need_unshare()
    res = _play(setup, """
binder "$STORE/cache" evil
judged 1; touch release; wait
""")
    assert (setup.store / "cache" / "evil").is_dir(), res.stderr
    assert any("spyglass store" in m and "m/evil" in m for m in setup.tamper()), res.stderr


def test_benign_twin_the_same_through_the_workspace_stays_silent(setup: Any) -> None:
    _need_unshare()
    res = _play(setup, """
mkdir out out2
$L "$WS/out" stays "$WS/release" &
until [ -e stays.made ]; do sleep 0.02; done
binder "$WS/out2" fine
judged 1; touch release; wait
""")
    assert (setup.ws / "out" / "stays").is_dir() and (setup.ws / "out2" / "fine").is_dir(), res.stderr
    assert setup.tamper() == [], res.stderr
