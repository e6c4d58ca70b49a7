"""Ed25519 keys for signing checkpoints: generate, load, sign, verify.

A signature is a small JSON object stored in the checkpoint::

    {"algorithm": "ed25519", "public_key": "<base64 raw 32 bytes>", "signature": "<base64 64 bytes>"}

The public key inside a checkpoint only says which key signed it; it proves
nothing by itself (a forger signs with a key of their own).  Trust comes from
checking against a public key the verifier already holds (``--pubkey``).

Private keys are PEM (PKCS#8) or OpenSSH files; public keys are PEM
(SubjectPublicKeyInfo), an OpenSSH ``ssh-ed25519 ...`` line, or the raw key as
base64 or hex.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import msgspec

from spyglass.errors import SpyglassError, UsageError
from spyglass.evidence import DEFAULT_KEY as _DEFAULT_KEY

ALGORITHM = "ed25519"
PASSPHRASE_ENV = "SPYGLASS_SIGN_KEY_PASSPHRASE"

Signer = Callable[[bytes], dict[str, str]]


class KeyFileError(SpyglassError):
    """A key file that cannot be used (missing, wrong type, bad format)."""


def _crypto() -> None:
    try:
        import cryptography  # noqa: F401
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise SpyglassError(
            "signing needs the 'cryptography' package", hint="pip install cryptography"
        ) from exc


def fingerprint(public_raw: bytes) -> str:
    """Short stable name of a public key: ``SHA256:`` + base64 of its digest, like ssh-keygen."""
    digest = hashlib.sha256(public_raw).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


class KeyPairFiles(msgspec.Struct, frozen=True):
    """The files of a generated key pair and the public key's fingerprint."""

    private: Path
    public: Path
    fingerprint: str


DEFAULT_KEY = _DEFAULT_KEY  # where ``spyglass keys generate`` puts the private key unless told otherwise


def readable_by(path: Path, user: str | int) -> bool:
    """Whether ``user`` (a name or uid) can read ``path`` by its mode bits (root reads everything)."""
    import grp
    import pwd

    try:
        pw = pwd.getpwnam(user) if isinstance(user, str) else pwd.getpwuid(user)
        st = path.stat()
    except (KeyError, OSError):
        return False
    if pw.pw_uid == 0:
        return True
    if st.st_uid == pw.pw_uid:
        return bool(st.st_mode & 0o400)
    groups = {pw.pw_gid} | {g.gr_gid for g in grp.getgrall() if pw.pw_name in g.gr_mem}
    if st.st_gid in groups:
        return bool(st.st_mode & 0o040)
    return bool(st.st_mode & 0o004)


def generate_keypair(
    private_path: Path, public_path: Path | None = None, *, force: bool = False
) -> KeyPairFiles:
    """Write a new Ed25519 key pair: the private key (PKCS#8 PEM, mode 0600) and ``.pub`` (PEM)."""
    _crypto()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    public_path = public_path or private_path.with_name(private_path.name + ".pub")
    for p in (private_path, public_path):
        if p.exists() and not force:
            raise UsageError(f"{p} already exists", hint="choose another path or pass --force")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    pub = key.public_key()
    pub_pem = pub.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    raw = pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    private_path.parent.mkdir(parents=True, exist_ok=True)
    if force and private_path.exists():
        private_path.unlink()
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    public_path.write_bytes(pub_pem)
    return KeyPairFiles(private_path, public_path, fingerprint(raw))


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise KeyFileError(f"{what} {path} does not exist") from exc
    except OSError as exc:
        raise KeyFileError(f"cannot read {what} {path}: {exc.strerror}") from exc


def load_private_key(path: Path, passphrase: bytes | None = None) -> object:
    """The Ed25519 private key in ``path`` (PEM or OpenSSH); passphrase from the argument or
    the ``SPYGLASS_SIGN_KEY_PASSPHRASE`` environment variable."""
    _crypto()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    data = _read(path, "signing key")
    if passphrase is None and os.environ.get(PASSPHRASE_ENV):
        passphrase = os.environ[PASSPHRASE_ENV].encode()
    key: object
    try:
        if b"OPENSSH PRIVATE KEY" in data:
            key = serialization.load_ssh_private_key(data, passphrase)
        else:
            key = serialization.load_pem_private_key(data, passphrase)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{path} is not a usable private key: {exc}") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(
            f"{path} is a {type(key).__name__}, not an Ed25519 key",
            hint="make one with `spyglass keys generate`",
        )
    return key


def load_public_key_raw(path: Path) -> bytes:
    """The raw 32 bytes of the Ed25519 public key in ``path`` (PEM, OpenSSH line, base64 or hex)."""
    _crypto()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

    data = _read(path, "public key").strip()
    key: object = None
    try:
        if data.startswith(b"-----BEGIN") and b"PRIVATE KEY" in data:
            raise KeyFileError(f"{path} is a private key; pass the public key (.pub)")
        if data.startswith(b"-----BEGIN"):
            key = serialization.load_pem_public_key(data)
        elif data.startswith(b"ssh-"):
            key = serialization.load_ssh_public_key(data)
    except ValueError as exc:
        raise KeyFileError(f"{path} is not a usable public key: {exc}") from exc
    if key is not None:
        if isinstance(key, Ed25519PrivateKey):  # pragma: no cover - guarded above
            key = key.public_key()
        if not isinstance(key, Ed25519PublicKey):
            raise KeyFileError(f"{path} is a {type(key).__name__}, not an Ed25519 public key")
        return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    raw = _decode_raw(data.decode("ascii", "replace"))
    if raw is None:
        raise KeyFileError(
            f"{path} is not a public key (expected PEM, ssh-ed25519, or 32 bytes as base64/hex)"
        )
    return raw


def _decode_raw(text: str) -> bytes | None:
    text = text.strip()
    for decode in (bytes.fromhex, base64.b64decode):
        try:
            raw = decode(text)
        except (ValueError, binascii.Error):
            continue
        if len(raw) == 32:
            return raw
    return None


def make_signer(private_key_path: Path, passphrase: bytes | None = None) -> Signer:
    """A checkpoint signer for :class:`~spyglass.store.RunWriter` (``signer=``).

    The key is loaded now, so a bad key fails before the agent starts.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = load_private_key(private_key_path, passphrase)
    assert isinstance(key, Ed25519PrivateKey)
    pub = base64.b64encode(
        key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    ).decode("ascii")

    def sign(canonical: bytes) -> dict[str, str]:
        sig = key.sign(canonical)
        return {"algorithm": ALGORITHM, "public_key": pub, "signature": base64.b64encode(sig).decode("ascii")}

    return sign


class SignatureCheck(msgspec.Struct, frozen=True):
    """The outcome of checking a checkpoint's signature."""

    valid: bool  # the signature matches the signed bytes and the key named in it
    pinned: bool  # that key is the one the verifier supplied
    key_fingerprint: str | None
    problem: str = ""


def verify_signature(
    signature: dict[str, str], signed: bytes, expected_public_raw: bytes | None = None
) -> SignatureCheck:
    """Check a checkpoint signature over ``signed`` (the checkpoint's canonical bytes, signature null)."""
    _crypto()
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    algo = signature.get("algorithm")
    if algo != ALGORITHM:
        return SignatureCheck(False, False, None, f"unknown signature algorithm {algo!r}")
    try:
        pub_raw = base64.b64decode(signature.get("public_key", ""), validate=True)
        sig = base64.b64decode(signature.get("signature", ""), validate=True)
    except (binascii.Error, ValueError):
        return SignatureCheck(False, False, None, "signature or public key is not valid base64")
    if len(pub_raw) != 32:
        return SignatureCheck(False, False, None, "public key in the signature is not 32 bytes")
    fp = fingerprint(pub_raw)
    key_raw = expected_public_raw if expected_public_raw is not None else pub_raw
    pinned = expected_public_raw is not None and expected_public_raw == pub_raw
    try:
        Ed25519PublicKey.from_public_bytes(key_raw).verify(sig, signed)
    except InvalidSignature:
        if expected_public_raw is not None and not pinned:
            return SignatureCheck(
                False,
                False,
                fp,
                f"signed by key {fp}, not by the given public key {fingerprint(expected_public_raw)}",
            )
        return SignatureCheck(False, pinned, fp, "signature does not match the checkpoint")
    return SignatureCheck(True, pinned, fp)
