"""A root agent reads a secret through an overlay mount of its directory.

An overlay file has the overlay's device and is named below the mount point:
neither the secret's name nor its device matches.  Both backends note the
overlays the run mounts (spyglass/capture/overlays.py) and record a file below
one under the path it has in the layer that holds it, so the read is
``cred-secret-read`` on the secret itself.  The mount is also
``sys-namespace-change`` (high).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting an overlay needs root")


def _overlay_read(setup: Any, tmp_path: Path, lower: Path, name: str) -> tuple[set[str], str]:
    mnt, empty = tmp_path / "m", tmp_path / "empty"
    mnt.mkdir()
    empty.mkdir()
    script = (f"mount -t overlay overlay -o lowerdir={lower}:{empty} {mnt} && cat {mnt}/{name}; "
              f"umount {mnt}")
    res = setup.run(script)
    if "sys-namespace-change" not in res.stderr:
        pytest.skip(f"cannot mount an overlay here: {res.stderr[-300:]}")
    return {str(a["rule_id"]) for a in setup.alerts()}, res.stdout


def test_a_secret_read_through_an_overlay_is_a_secret_read(setup: Any, tmp_path: Path) -> None:
    ssh = Path(setup.env["HOME"]) / ".ssh"
    ssh.mkdir()
    (ssh / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n")
    rules, out = _overlay_read(setup, tmp_path, ssh, "id_rsa")
    assert "PRIVATE KEY" in out  # the attack read the secret
    assert {"sys-namespace-change", "cred-secret-read"} <= rules
    (read,) = [a for a in setup.alerts() if a["rule_id"] == "cred-secret-read"]
    assert read["message"].endswith(f"read secret {ssh / 'id_rsa'}"), read


def test_benign_twin_a_plain_file_through_an_overlay_is_no_secret_read(setup: Any, tmp_path: Path) -> None:
    lower = tmp_path / "lower"
    lower.mkdir()
    (lower / "notes.txt").write_text("hello\n")
    rules, out = _overlay_read(setup, tmp_path, lower, "notes.txt")
    assert "hello" in out
    assert "cred-secret-read" not in rules
