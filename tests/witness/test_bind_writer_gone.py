"""A bind mount of the store (or of a directory above it) in a mount namespace of the run's own,
written through by a process gone before the guard judged the name, its namespace gone with it.

``Protected.in_mounts`` judges a name in the writer's mounts (or its nearest live ancestor's), by
device and inode; with every process of that namespace gone, the nearest live ancestor sees the
host's plain directory at the mount point and the write into the store went unseen.  The guard now
keeps each mount of a directory the trace showed (``file.target``: the source of a bind or a move,
``spyglass.witness.binds``) and judges a name below a mount point as the same name below the
directory mounted there too.  Real processes under a real ``spyglass run``, each backend; the twins
bind a directory of the workspace, and write below the host's plain mount point."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare not installed")

#: each attack in a user and mount namespace of its own; everything gone as soon as it wrote
ATTACKS = r"""
RUN=$(basename "$(ls -d "$STORE"/runs/*/ | tail -1)")
TOP=$(dirname "$STORE")
mkdir m m2
# the store's parent bound, a child writes
unshare -Urm sh -c 'mount --bind "$1" m && sh -c "echo x > \"m/$2/runs/$3/forged-parent\""' \
  - "$TOP" "$(basename "$STORE")" "$RUN"
# a bind of the store moved elsewhere, then written
unshare -Urm sh -c 'mount --bind "$1" m && mount --move m m2 && echo x > "m2/runs/$2/forged-moved"' - "$STORE" "$RUN"
# the process that mounted gone first; a child it left writes later
unshare -Urm --fork sh -c '(mount --bind "$1" m && (sleep 0.3; echo x > "m/$2/forged-late") &) ; exit 0' \
  - "$STORE/runs" "$RUN"
sleep 1
"""


#: ``python -c NEWAPI SOURCE TARGET NAME``: the new mount API's bind (``open_tree`` clone, ``move_mount``
#: of the copy onto TARGET), then a child writes NAME below TARGET; both gone at once
NEWAPI = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.syscall(428, -100, sys.argv[1].encode(), 1 | 0x8000)  # open_tree(OPEN_TREE_CLONE | AT_RECURSIVE)
assert fd >= 0 and libc.syscall(429, fd, b"", -100, sys.argv[2].encode(), 4) == 0, ctypes.get_errno()
if os.fork() == 0:
    open(os.path.join(sys.argv[2], sys.argv[3]), "w").close()
    os._exit(0)
os.wait()
"""


def test_a_write_below_a_bind_of_the_store_by_a_writer_gone_with_its_namespace_is_caught(setup: Any) -> None:
    newapi = setup.ws.parent / "newapi.py"
    newapi.write_text(NEWAPI)
    res = setup.play(ATTACKS + r"""
mkdir m3
unshare -Urm $N "$STORE/runs/$RUN" "$PWD/m3" forged-newapi
""", f"N='{setup.python} {newapi}'")
    run = max((setup.store / "runs").iterdir())
    made = sorted(p.name for p in run.iterdir() if p.name.startswith("forged-"))
    assert made == ["forged-late", "forged-moved", "forged-newapi", "forged-parent"], (made, res.stderr)
    msgs = setup.tamper()
    for name in made:
        assert any("spyglass store" in m and name in m for m in msgs), (name, msgs, res.stderr)


def test_benign_twin_binds_of_the_workspace_and_the_host_s_mount_point_stay_silent(setup: Any) -> None:
    res = setup.play(r"""
mkdir m src
unshare -Urm sh -c 'mount --bind src m && sh -c "mkdir m/runs && echo x > m/runs/out"'
unshare -Urm sh -c 'mount --bind "$1" m && cat m/*/run.json > /dev/null' - "$STORE/runs"
echo y > m/plain
judged 1
""")
    assert (setup.ws / "src" / "runs" / "out").is_file() and (setup.ws / "m" / "plain").is_file(), res.stderr
    assert setup.tamper() == [], res.stderr
