"""The protected and secret files collected at start for the capture (by device and inode)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spyglass.witness import Protected
from spyglass.witness import identities as I


def test_secret_globs_give_existing_files_not_links_nor_exceptions(tmp_path: Path) -> None:
    ssh = tmp_path / ".ssh"
    ssh.mkdir()
    (ssh / "id_ed25519").write_text("k")
    (ssh / "id_ed25519.pub").write_text("p")
    os.symlink("/etc/hostname", ssh / "elsewhere")
    files = I.secret_files(["~/.ssh/**", "**/.env"], ["~/.ssh/*.pub"], str(tmp_path))
    assert files == [str(ssh / "id_ed25519")]


def test_the_walk_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(20):
        (tmp_path / f"s{i}").write_text("x")
    monkeypatch.setattr(I, "MAX_FILES", 5)
    assert len(I.secret_files([f"{tmp_path}/*"], [], "/")) == 5


def test_protected_files_keep_their_own_names(tmp_path: Path) -> None:
    key = tmp_path / "signing.key"
    key.write_text("k")
    prot = Protected()
    prot.add(key, "the signing key", secret=True)
    ids = I.protected_ids(prot, [f"{tmp_path}/*.key"], [], "/")
    st = os.stat(key)
    assert ids == {(st.st_dev, st.st_ino): str(key)}
