"""A root agent reads a secret through an overlay made with the new mount API.

``fsopen("overlay")``, ``fsconfig`` of its lower layers, ``fsmount`` and ``move_mount`` make an
overlay without ``mount(2)``: its files have the overlay's device and are named below the mount
point.  Both backends follow the calls (spyglass/capture/overlays.py) and record a file below the
mount under its path in the layer that holds it, so the read is ``cred-secret-read`` on the secret
itself, whether the layers are given as a string (relative to the caller's directory) or as
descriptors (``FSCONFIG_SET_FD``), and when a forked child places the mount.  The mount is also
``sys-namespace-change``.  A mount need not be placed at all: a file opened relative to the
descriptor of the detached overlay (or of a detached copy of the secret's directory,
``open_tree(OPEN_TREE_CLONE)``), or through it (``/proc/self/fd/N/id_rsa``), is recorded under its
path in the layers (below the copy's source).  The agent is tests/witness/progs/overlay_newapi.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

PROG = Path(__file__).resolve().parent / "progs" / "overlay_newapi.py"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting an overlay needs root")


def _overlay_read(setup: Any, tmp_path: Path, how: str, lower: Path, name: str) -> tuple[set[str], str]:
    mnt, empty = tmp_path / "m", tmp_path / "empty"
    mnt.mkdir()
    empty.mkdir()
    res = setup.run(f"{setup.python} {PROG} {how} {lower} {empty} {mnt} {name}")
    if "syscall 43" in res.stderr:  # fsopen/fsconfig/fsmount refused: no overlay here
        pytest.skip(f"cannot mount an overlay here: {res.stderr[-300:]}")
    assert res.returncode == 0, res.stderr
    return {str(a["rule_id"]) for a in setup.alerts()}, res.stdout


@pytest.mark.parametrize("how", ["string", "fd", "child", "detached", "procfd", "tree"])
def test_a_secret_read_through_a_new_api_overlay_is_a_secret_read(setup: Any, tmp_path: Path, how: str) -> None:
    ssh = Path(setup.env["HOME"]) / ".ssh"
    ssh.mkdir()
    (ssh / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n")
    rules, out = _overlay_read(setup, tmp_path, how, ssh, "id_rsa")
    assert "PRIVATE KEY" in out  # the attack read the secret
    assert {"sys-namespace-change", "cred-secret-read"} <= rules, rules
    (read,) = [a for a in setup.alerts() if a["rule_id"] == "cred-secret-read"]
    assert read["message"].endswith(f"read secret {ssh / 'id_rsa'}"), read


@pytest.mark.parametrize("how", ["string", "detached"])
def test_benign_twin_a_plain_file_through_a_new_api_overlay_is_no_secret_read(
    setup: Any, tmp_path: Path, how: str
) -> None:
    lower = tmp_path / "lower"
    lower.mkdir()
    (lower / "notes.txt").write_text("hello\n")
    rules, out = _overlay_read(setup, tmp_path, how, lower, "notes.txt")
    assert "hello" in out
    assert "cred-secret-read" not in rules
    out = setup.spyglass("events", "latest", "--store", str(setup.store), "--format", "json").stdout
    reads = [e for e in map(json.loads, out.splitlines()) if e.get("file.raw_path", "").endswith("notes.txt")]
    assert [e["file.path"] for e in reads] == [str(lower / "notes.txt")], reads  # the file itself
