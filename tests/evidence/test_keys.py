"""Ed25519 keys: generation, the formats keys are read from, signatures."""

from __future__ import annotations

import base64
import json
import stat
import subprocess
from pathlib import Path

import pytest

from spyglass.errors import SpyglassError
from spyglass.evidence.keys import (
    fingerprint,
    generate_keypair,
    load_public_key_raw,
    make_signer,
    verify_signature,
)


def test_generate_writes_a_private_key_only_the_owner_reads(tmp_path: Path) -> None:
    files = generate_keypair(tmp_path / "k" / "signing.key")
    assert stat.S_IMODE(files.private.stat().st_mode) == 0o600
    assert files.public == tmp_path / "k" / "signing.key.pub"
    assert files.fingerprint == fingerprint(load_public_key_raw(files.public))
    with pytest.raises(SpyglassError, match="already exists"):
        generate_keypair(files.private)
    again = generate_keypair(files.private, force=True)
    assert again.fingerprint != files.fingerprint


def test_sign_and_verify(tmp_path: Path) -> None:
    files = generate_keypair(tmp_path / "k")
    sig = make_signer(files.private)(b"hello")
    assert sig["algorithm"] == "ed25519"
    pub = load_public_key_raw(files.public)
    ok = verify_signature(sig, b"hello", pub)
    assert ok.valid and ok.pinned
    assert not verify_signature(sig, b"hellO", pub).valid
    unpinned = verify_signature(sig, b"hello")
    assert unpinned.valid and not unpinned.pinned
    forged = dict(sig, signature=base64.b64encode(b"\0" * 64).decode())
    assert not verify_signature(forged, b"hello").valid
    assert not verify_signature(dict(sig, algorithm="rsa"), b"hello").valid


def test_public_key_formats(tmp_path: Path) -> None:
    files = generate_keypair(tmp_path / "k")
    raw = load_public_key_raw(files.public)
    (tmp_path / "b64").write_text(base64.b64encode(raw).decode() + "\n")
    (tmp_path / "hex").write_text(raw.hex())
    assert load_public_key_raw(tmp_path / "b64") == raw
    assert load_public_key_raw(tmp_path / "hex") == raw
    with pytest.raises(SpyglassError, match="private key"):
        load_public_key_raw(files.private)
    (tmp_path / "junk").write_text("not a key")
    with pytest.raises(SpyglassError, match="not a public key"):
        load_public_key_raw(tmp_path / "junk")
    with pytest.raises(SpyglassError, match="does not exist"):
        load_public_key_raw(tmp_path / "nope")


def test_openssh_keys(tmp_path: Path) -> None:
    if subprocess.run(["which", "ssh-keygen"], capture_output=True).returncode != 0:
        pytest.skip("ssh-keygen not installed")
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    sig = make_signer(key)(b"x")
    assert verify_signature(sig, b"x", load_public_key_raw(Path(str(key) + ".pub"))).pinned


def test_non_ed25519_private_key_is_refused(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    k = ec.generate_private_key(ec.SECP256R1())
    pem = k.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    (tmp_path / "ec.key").write_bytes(pem)
    with pytest.raises(SpyglassError, match="not an Ed25519 key"):
        make_signer(tmp_path / "ec.key")


def test_cli_keys_generate_then_verify(spy, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = spy("keys", "generate", str(tmp_path / "sk"), "--format", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)  # stderr may carry the readable-key warning
    assert data["fingerprint"].startswith("SHA256:") and Path(data["public_key"]).exists()
    res = spy("keys", "generate", str(tmp_path / "sk"))
    assert res.exit_code == 2 and "already exists" in res.output
