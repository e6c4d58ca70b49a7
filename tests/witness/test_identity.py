"""A secret or the signing key read through another name is recorded as the file it reached.

Symlinks made before or during the run, a hard link made before it, and a ``/proc/self/fd/N/...``
path through a directory descriptor: each is a real process under each capture backend, the event
carries the protected file's own path (the typed name in ``raw_path``), and the alerts fire; the
benign twin reads look-alike files the same ways and stays silent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest


def _key(setup: Any, tmp_path: Path) -> Path:
    key = tmp_path / "keys" / "signing.key"
    assert setup.spyglass("keys", "generate", str(key)).returncode == 0
    return key


def _ids(setup: Any) -> list[tuple[str, str]]:
    return sorted((str(a["rule_id"]), str(a["level"])) for a in setup.alerts())


def _reads(setup: Any, path: str) -> list[dict[str, Any]]:
    res = setup.spyglass("events", "latest", "--type", "file.read", "--store", str(setup.store), "--format", "json")
    assert res.returncode == 0, res.stderr
    evs = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    return [e for e in evs if e.get("file.path") == path]


def test_the_key_through_a_symlink_made_before_the_run(setup: Any, tmp_path: Path) -> None:
    key = _key(setup, tmp_path)
    os.symlink(key, setup.ws / "pre")
    res = setup.run("cat pre > /dev/null", "--sign-key", str(key))
    assert ("witness-key-read", "high") in _ids(setup), res.stderr
    assert any(e.get("file.raw_path") == "pre" for e in _reads(setup, str(key)))


def test_the_key_through_a_hard_link_made_before_the_run(setup: Any, tmp_path: Path) -> None:
    key = _key(setup, tmp_path)
    os.link(key, setup.ws / "hard")
    res = setup.run(f"cat {setup.ws / 'hard'} > /dev/null", "--sign-key", str(key))
    assert ("witness-key-read", "high") in _ids(setup), res.stderr
    assert _reads(setup, str(key)), "the read is recorded under the key's own path"


def test_the_key_through_a_symlink_made_during_the_run(setup: Any, tmp_path: Path) -> None:
    key = _key(setup, tmp_path)
    res = setup.run(f"ln -s {key} now && cat now > /dev/null", "--sign-key", str(key))
    assert ("witness-key-read", "high") in _ids(setup), res.stderr


def test_the_key_through_a_directory_descriptor(setup: Any, tmp_path: Path) -> None:
    key = _key(setup, tmp_path)
    res = setup.run(f"exec 3<{key.parent}; cat /proc/self/fd/3/{key.name} > /dev/null", "--sign-key", str(key))
    assert ("witness-key-read", "high") in _ids(setup), res.stderr


def test_a_secret_through_a_symlink_is_a_secret_read(setup: Any) -> None:
    ssh = Path(setup.env["HOME"]) / ".ssh"
    ssh.mkdir()
    (ssh / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    os.symlink(ssh / "id_ed25519", setup.ws / "notes.txt")
    res = setup.run("cat notes.txt > /dev/null")
    assert ("cred-secret-read", "high") in _ids(setup), res.stderr


@pytest.mark.skipif(not os.access("/etc/shadow", os.R_OK), reason="/etc/shadow is not readable here")
def test_etc_shadow_through_a_symlink_is_a_secret_read(setup: Any) -> None:
    os.symlink("/etc/shadow", setup.ws / "pre")
    res = setup.run("cat pre > /dev/null")
    assert ("cred-secret-read", "high") in _ids(setup), res.stderr


def test_benign_twin_look_alikes_through_links_and_descriptors_stay_silent(setup: Any, tmp_path: Path) -> None:
    key = _key(setup, tmp_path)
    (setup.ws / "data.txt").write_text("plain\n")
    os.symlink(f"{key}.pub", setup.ws / "pub")
    os.link(setup.ws / "data.txt", setup.ws / "hard.txt")
    script = (f"cat pub hard.txt > /dev/null && ln -s {key}.pub pub2 && cat pub2 > /dev/null && "
              f"exec 3<{key.parent}; cat /proc/self/fd/3/signing.key.pub > /dev/null")
    res = setup.run(script, "--sign-key", str(key))
    assert res.returncode == 0, res.stderr
    assert _ids(setup) == []
