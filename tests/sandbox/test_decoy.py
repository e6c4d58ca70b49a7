"""The decoy home: realistic honeytokens that all carry the run's canary."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from spyglass.sandbox.decoy import CanaryScanner, build_decoy_home, canary_patterns, make_canary


def test_every_honeytoken_carries_the_canary(tmp_path: Path) -> None:
    d = build_decoy_home(tmp_path / "home", user="dev", host="box")
    rels = {h.rel for h in d.honeytokens}
    assert {
        ".ssh/id_rsa",
        ".ssh/id_ed25519",
        ".aws/credentials",
        ".env",
        ".netrc",
        ".git-credentials",
        ".config/gh/hosts.yml",
    } <= rels
    pats = canary_patterns(d.canary)
    for path in d.honeytoken_paths():
        data = Path(path).read_bytes()
        assert any(p in data for p in pats), path
        assert os.stat(path).st_mode & 0o777 == 0o600
    assert (tmp_path / "home/.bashrc").exists() and not any(".pub" in h.rel for h in d.honeytokens)
    assert d.honeytoken_paths("/root")[0].startswith("/root/.")


def test_canaries_are_unique_per_run(tmp_path: Path) -> None:
    a = build_decoy_home(tmp_path / "a")
    b = build_decoy_home(tmp_path / "b")
    assert a.canary != b.canary and len(make_canary()) == 24


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen not installed")
def test_the_ssh_keys_parse(tmp_path: Path) -> None:
    d = build_decoy_home(tmp_path / "home")
    # ed25519: ssh-keygen reads the decoy and derives the same public key
    out = subprocess.run(
        ["ssh-keygen", "-y", "-f", str(d.path / ".ssh" / "id_ed25519")], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[1] == (d.path / ".ssh" / "id_ed25519.pub").read_text().split()[1]
    # rsa: a well-formed OpenSSH container whose public part matches the .pub; its numbers are
    # random (the canary sits in the private exponent), so OpenSSL refuses it as an RSA key
    text = (d.path / ".ssh" / "id_rsa").read_text()
    body = "".join(text.splitlines()[1:-1])
    blob = base64.b64decode(body)
    assert blob.startswith(b"openssh-key-v1\0")
    pub = base64.b64decode((d.path / ".ssh" / "id_rsa.pub").read_text().split()[1])
    assert pub in blob and pub[4:11] == b"ssh-rsa"
    assert d.canary in body


@pytest.mark.parametrize("prefix", [b"", b"x", b"xy"])
def test_the_canary_is_found_raw_hex_and_inside_base64_at_any_alignment(prefix: bytes) -> None:
    canary = make_canary()
    pats = canary_patterns(canary)
    for blob in (
        b"junk " + canary.encode() + b" junk",
        canary.encode().hex().encode(),
        base64.b64encode(prefix + b"user:" + canary.encode() + b"!"),
        base64.urlsafe_b64encode(prefix + canary.encode()),
    ):
        s = CanaryScanner(pats)
        # fed one byte at a time: matches across chunk boundaries
        assert any(s.feed(blob[i : i + 1]) for i in range(len(blob))), blob
    assert not CanaryScanner(pats).feed(base64.b64encode(os.urandom(4096)))
