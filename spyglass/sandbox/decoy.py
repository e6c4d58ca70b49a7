"""The decoy home: a generated ``$HOME`` whose secret files are honeytokens.

Inside the sandbox the real home directory is replaced by this one (mounted
at the same path, so ``$HOME`` keeps its value and programs with hard-coded
paths still find a home).  Its secret files look like the real thing
(OpenSSH private keys that parse, AWS credentials, GitHub tokens, a ``.env``
...) and every one of them carries the run's **canary**: a random string
unique to the run.  Nothing legitimate ever has a reason to send the canary
anywhere, so the canary in bytes leaving through the egress proxy is proof of
exfiltration, and a read of one of these files is proof of interest.

Files that everyday tools read on their own are left out on purpose
(``~/.npmrc`` is read by every ``npm`` command), or point at hosts that no
tool contacts by itself (the ``.netrc`` machines), so that a honeytoken alert
means what it says.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import string
import struct
from collections.abc import Callable
from pathlib import Path

import msgspec

CANARY_ALPHABET = string.ascii_letters + string.digits
CANARY_LENGTH = 24  # a multiple of 4: spliced into base64 text it stays aligned
_B64_LINE = 70  # OpenSSH wraps private keys at 70 columns


def make_canary(length: int = CANARY_LENGTH) -> str:
    """A fresh random canary: letters and digits only (valid in base64, URLs, headers)."""
    return "".join(secrets.choice(CANARY_ALPHABET) for _ in range(length))


def canary_patterns(canary: str) -> list[bytes]:
    """Byte strings whose presence in outbound data means the canary left.

    The canary itself, its hex forms, and the base64 forms it takes at each of
    the three possible alignments inside a longer base64 text (only the
    characters fully determined by the canary's bytes, so a match is certain).
    """
    raw = canary.encode()
    pats = {raw, raw.hex().encode(), raw.hex().upper().encode()}
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + raw)
        start = 4 if k else 0
        end = ((k + len(raw)) // 3) * 4
        core = enc[start:end]
        if len(core) >= 16:
            pats.add(core)
            pats.add(core.replace(b"+", b"-").replace(b"/", b"_"))  # urlsafe variant
    return sorted(pats, key=len)


class CanaryScanner:
    """Streaming search for any of ``patterns`` across chunk boundaries."""

    def __init__(self, patterns: list[bytes] | tuple[bytes, ...]) -> None:
        self.patterns = [p for p in patterns if p]
        self.keep = max((len(p) for p in self.patterns), default=1) - 1
        self.tail = b""

    def feed(self, data: bytes) -> bool:
        if not self.patterns:
            return False
        buf = self.tail + data
        hit = any(p in buf for p in self.patterns)
        self.tail = buf[-self.keep :] if self.keep else b""
        return hit


def _rand(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


_UPPER_DIGITS = string.ascii_uppercase + string.digits
_AWS_SECRET_ALPHABET = string.ascii_letters + string.digits + "+/"


# ---------------------------------------------------------------- OpenSSH keys
def _sstr(b: bytes) -> bytes:
    return struct.pack(">I", len(b)) + b


def _mpint(nbytes: int) -> bytes:
    v = bytearray(secrets.token_bytes(nbytes))
    v[0] |= 0x80  # full length ...
    return _sstr(b"\0" + bytes(v))  # ... and a leading zero keeps it positive, as OpenSSH writes it


def _openssh_blob(keytype: str, comment: str) -> tuple[bytes, bytes, tuple[int, int]]:
    """(private blob, public blob, (start, end) of the secret bytes inside the private blob)."""
    kt = _sstr(keytype.encode())
    if keytype == "ssh-ed25519":
        pk = secrets.token_bytes(32)
        pub = kt + _sstr(pk)
        sk = secrets.token_bytes(32) + pk
        priv_key = kt + _sstr(pk)
        secret_at = len(priv_key) + 4
        priv_key += _sstr(sk)
        secret = (secret_at, secret_at + 32)
    else:  # ssh-rsa, 3072-bit sized fields
        e = _sstr(b"\x01\x00\x01")
        n = _mpint(384)
        pub = kt + e + n
        priv_key = kt + n + e
        d = _mpint(384)
        secret = (len(priv_key) + 5, len(priv_key) + len(d))
        priv_key += d + _mpint(192) + _mpint(192) + _mpint(192)
    check = secrets.token_bytes(4)
    section = check + check + priv_key + _sstr(comment.encode())
    pad = 1
    while len(section) % 8:
        section += bytes([pad])
        pad += 1
    head = b"openssh-key-v1\0" + _sstr(b"none") + _sstr(b"none") + _sstr(b"") + struct.pack(">I", 1)
    head += _sstr(pub)
    offset = len(head) + 4  # the private section's length prefix
    blob = head + _sstr(section)
    start, end = secret
    return blob, pub, (offset + 8 + start, offset + 8 + end)


def openssh_private_key(keytype: str, comment: str, canary: str) -> tuple[str, str]:
    """(private key file text, public key line): a well-formed OpenSSH key whose
    secret bytes carry ``canary`` verbatim in the base64 text."""
    blob, pub, (s0, s1) = _openssh_blob(keytype, comment)
    text = base64.b64encode(blob).decode()
    n = len(canary)
    # a 4-aligned base64 position whose decoded bytes lie inside the secret and
    # whose run of n characters does not cross a line break
    pos = ((s0 + 2) // 3) * 4
    while pos % _B64_LINE + n > _B64_LINE or pos % 4:
        pos += 4
    if (pos // 4) * 3 + (n // 4) * 3 > s1:
        raise ValueError("secret field too short for the canary")
    text = text[:pos] + canary + text[pos + n :]
    lines = [text[i : i + _B64_LINE] for i in range(0, len(text), _B64_LINE)]
    body = (
        "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END OPENSSH PRIVATE KEY-----\n"
    )
    return body, f"{keytype} {base64.b64encode(pub).decode()} {comment}\n"


# ---------------------------------------------------------------- the files
class Honeytoken(msgspec.Struct, frozen=True):
    rel: str  # path relative to the home directory
    kind: str  # what it imitates
    read_by: tuple[str, ...] = ()  # programs that read it on their own (a read by them is weaker evidence)


class DecoyHome(msgspec.Struct):
    path: Path  # the directory on the host
    canary: str
    honeytokens: list[Honeytoken] = msgspec.field(default_factory=list)

    def honeytoken_paths(self, base: str | Path | None = None) -> list[str]:
        """Absolute paths of the honeytokens under ``base`` (default: the host directory)."""
        root = Path(base) if base is not None else self.path
        return [str(root / h.rel) for h in self.honeytokens]


def _secret_files(canary: str, user: str, host: str) -> list[tuple[Honeytoken, str, int]]:
    """(honeytoken, content, mode) for every secret file of the decoy home."""
    ak = "AKIA" + _rand(_UPPER_DIGITS, 16)
    aws_secret = canary + _rand(_AWS_SECRET_ALPHABET, 40 - len(canary))
    gh = "gho_" + canary + _rand(CANARY_ALPHABET, 36 - len(canary))
    ghp = "ghp_" + canary + _rand(CANARY_ALPHABET, 36 - len(canary))
    rsa, rsa_pub = openssh_private_key("ssh-rsa", f"{user}@{host}", canary)
    ed, ed_pub = openssh_private_key("ssh-ed25519", f"{user}@{host}", canary)
    docker_auth = base64.b64encode(f"{user}:dckr_pat_{canary}{_rand(CANARY_ALPHABET, 3)}".encode()).decode()
    files: list[tuple[Honeytoken, str, int]] = [
        (Honeytoken(".ssh/id_rsa", "ssh-private-key", ("ssh", "git")), rsa, 0o600),
        (Honeytoken(".ssh/id_ed25519", "ssh-private-key", ("ssh", "git")), ed, 0o600),
        (
            Honeytoken(".aws/credentials", "aws-credentials", ("aws", "boto3", "terraform")),
            f"[default]\naws_access_key_id = {ak}\naws_secret_access_key = {aws_secret}\n"
            f"\n[deploy]\naws_access_key_id = AKIA{_rand(_UPPER_DIGITS, 16)}\n"
            f"aws_secret_access_key = {canary}{_rand(_AWS_SECRET_ALPHABET, 40 - len(canary))}\n",
            0o600,
        ),
        (
            Honeytoken(".env", "dotenv"),
            f"OPENAI_API_KEY=sk-proj-{canary}{_rand(CANARY_ALPHABET, 24)}\n"
            f"DATABASE_URL=postgres://app:{canary}@db.internal.example:5432/app\n"
            f"STRIPE_SECRET_KEY=sk_live_{canary}{_rand(CANARY_ALPHABET, 8)}\n",
            0o600,
        ),
        (
            Honeytoken(".netrc", "netrc", ("curl", "git", "pip", "requests")),
            f"machine builds.internal.example\n  login {user}\n  password {canary}\n"
            f"machine artifacts.internal.example\n  login deploy\n  password {ghp}\n",
            0o600,
        ),
        (
            Honeytoken(".git-credentials", "git-credentials", ("git",)),
            f"https://{user}:{ghp}@github.com\n",
            0o600,
        ),
        (
            Honeytoken(".config/gh/hosts.yml", "github-cli-token", ("gh",)),
            f"github.com:\n    users:\n        {user}:\n            oauth_token: {gh}\n"
            f"    oauth_token: {gh}\n    user: {user}\n    git_protocol: https\n",
            0o600,
        ),
        (
            Honeytoken(".docker/config.json", "docker-credentials", ("docker",)),
            json.dumps({"auths": {"https://index.docker.io/v1/": {"auth": docker_auth}}}, indent=1) + "\n",
            0o600,
        ),
        (
            Honeytoken(".kube/config", "kubeconfig", ("kubectl", "helm")),
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://k8s.internal.example:6443\n"
            "  name: prod\ncontexts:\n- context:\n    cluster: prod\n    user: deploy\n  name: prod\n"
            "current-context: prod\nusers:\n- name: deploy\n  user:\n"
            f"    token: {canary}{_rand(CANARY_ALPHABET, 20)}\n",
            0o600,
        ),
    ]
    extra = [  # public halves: not honeytokens (reading a public key proves nothing)
        (Honeytoken(".ssh/id_rsa.pub", ""), rsa_pub, 0o644),
        (Honeytoken(".ssh/id_ed25519.pub", ""), ed_pub, 0o644),
    ]
    return files + extra


_PLAIN_FILES: dict[str, Callable[[str, str], str]] = {
    ".bashrc": lambda u, h: (
        "# ~/.bashrc\n[ -z \"$PS1\" ] && return\nHISTCONTROL=ignoreboth\nalias ll='ls -alF'\n"
    ),
    ".profile": lambda u, h: (
        '# ~/.profile\nif [ -n "$BASH_VERSION" ] && [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc"; fi\n'
    ),
    ".gitconfig": lambda u, h: f"[user]\n\tname = {u}\n\temail = {u}@{h}\n[init]\n\tdefaultBranch = main\n",
    ".aws/config": lambda u, h: "[default]\nregion = us-east-1\noutput = json\n",
    ".ssh/known_hosts": lambda u, h: "",
}


def build_decoy_home(
    dest: str | Path,
    *,
    canary: str | None = None,
    user: str | None = None,
    host: str = "workstation",
) -> DecoyHome:
    """Create the decoy home in ``dest`` (which must not exist or be empty)."""
    root = Path(dest)
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    canary = canary or make_canary()
    user = user or "dev"
    decoy = DecoyHome(path=root, canary=canary)
    for rel, make in _PLAIN_FILES.items():
        _write(root / rel, make(user, host), 0o644)
    for token, content, mode in _secret_files(canary, user, host):
        _write(root / token.rel, content, mode)
        if token.kind:
            decoy.honeytokens.append(token)
    for d in (".ssh", ".aws", ".config/gh", ".docker", ".kube"):
        os.chmod(root / d, 0o700)
    return decoy


def _write(path: Path, content: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    os.chmod(path, mode)
