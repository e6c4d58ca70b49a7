"""A root agent reads a secret through an overlay mount of its directory.

An overlay file has the overlay's device (and, on another file system than its
lower layer, another inode): neither the secret's name nor its device and inode
match, so the read is not ``cred-secret-read``.  The mount itself is
``sys-namespace-change`` (high), whose process line names the lower directory.
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


@pytest.mark.xfail(strict=True, reason="gap: a secret read through an overlay mount of its directory is no "
                   "cred-secret-read (overlay device and inode; docs/threat-model.md)")
def test_a_secret_read_through_an_overlay_is_a_secret_read(setup: Any, tmp_path: Path) -> None:
    ssh = Path(setup.env["HOME"]) / ".ssh"
    ssh.mkdir()
    (ssh / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n")
    rules, out = _overlay_read(setup, tmp_path, ssh, "id_rsa")
    assert "PRIVATE KEY" in out  # the attack read the secret
    assert "sys-namespace-change" in rules  # what is raised today
    assert "cred-secret-read" in rules


def test_benign_twin_a_plain_file_through_an_overlay_is_no_secret_read(setup: Any, tmp_path: Path) -> None:
    lower = tmp_path / "lower"
    lower.mkdir()
    (lower / "notes.txt").write_text("hello\n")
    rules, out = _overlay_read(setup, tmp_path, lower, "notes.txt")
    assert "hello" in out
    assert "cred-secret-read" not in rules
