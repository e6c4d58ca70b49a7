"""A cache of parsed, checked rule sets in the run store, sealed with the store's own key.

Parsing the rule pack (YAML, positions, checks, the policy's tuning) and checking
that every rule compiles costs more than the rest of a run's start.  The result
depends only on: the spyglass code (its version and the rule and policy modules),
the rule files' names and texts (the pack and the policy's ``rules.paths``), the
policy's settings, and HOME (which the compile check expands ``~`` against).  The
key is a SHA-256 over all of these; the workspace is not in it, since it enters
only when the run starts (:meth:`spyglass.rules.engine.RuleEngine.start`).

The agent may run as the same user as spyglass and so can write the store.
An entry is therefore trusted only if its HMAC-SHA256, under a random key kept in
the store (``cache/rules.key``, mode 0600), covers both its key digest and its
bytes: a planted file, an entry copied from another policy's key, or a truncated
one fails the check and the rules are parsed from their files again (and the
entry rewritten).  Nothing is unpickled before the check.  Writes into the store
are ``witness-tamper`` alerts and reads of the key ``witness-key-read`` alerts
(spyglass/witness/guard.py); an agent that reads or replaces the key and forges
an entry is seen doing so in the run where it does, though the next run uses
the entry (docs/design.md, the start-up path, says why that is no weaker than
the installed rule pack).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from spyglass import __version__
from spyglass.rules.sources import RuleSources

FORMAT = b"spyglass-rule-cache-v1"
KEY_FILE = "rules.key"
_MAC = 32
_CODE = ("rules", "policy", "events")  # packages whose code shapes a parsed rule set


def cache_dir(store_root: str | Path) -> Path:
    return Path(store_root) / "cache"


def _code_stamp() -> bytes:
    """The modules a cached rule set was built by (path, size, mtime): a changed checkout misses."""
    pkg = Path(__file__).resolve().parent.parent
    h = hashlib.sha256(__version__.encode())
    for sub in _CODE:
        for entry in sorted(os.scandir(pkg / sub), key=lambda e: e.name):
            if entry.name.endswith(".py"):
                st = entry.stat()
                h.update(f"{sub}/{entry.name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.digest()


def cache_key(sources: RuleSources, policy: Any, home: str) -> str:
    """The digest of everything a parsed and checked rule set depends on."""
    h = hashlib.sha256(FORMAT)
    h.update(_code_stamp())
    for shown, text in sources.texts:
        h.update(b"\0file\0" + shown.encode("utf-8", "surrogateescape") + b"\0")
        h.update(hashlib.sha256(text.encode("utf-8", "surrogateescape")).digest())
    if policy is not None:
        # the policy's settings, not where it lies (the defaults carry the working directory)
        same = msgspec.structs.replace(policy, base_dir="", source=None, origin="", text="")
        h.update(b"\0policy\0" + repr(same).encode("utf-8", "surrogateescape"))
        key = policy.evidence.sign_key
        if key:  # the one setting resolved against the policy's directory
            h.update(b"\0sign_key\0" + policy.resolve_path(key).encode("utf-8", "surrogateescape"))
    h.update(b"\0home\0" + home.encode("utf-8", "surrogateescape"))
    return h.hexdigest()


class RuleCache:
    """Entries ``<store>/cache/rules-<digest>.bin``: 32 bytes of HMAC, then the pickled value
    (``prefix``: another kind of entry under the same seal, its kind in the MAC too, such as
    the compiled code of spyglass/rules/codecache.py)."""

    def __init__(self, store_root: str | Path, prefix: str = "rules") -> None:
        self.dir = cache_dir(store_root)
        self.prefix = prefix

    def _secret(self, create: bool) -> bytes | None:
        path = self.dir / KEY_FILE
        try:  # a key: 32 bytes in a regular file of ours that only we can read (not a link)
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                data = f.read(64)
            if len(data) == 32 and st.st_uid == os.geteuid() and not st.st_mode & 0o077:
                return data
        except OSError:
            pass
        if not create:
            return None
        # no key, or not one: a new one (every older entry then fails its check)
        try:
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            data = os.urandom(32)  # what secrets.token_bytes returns (secrets imports random)
            tmp = self.dir / f".{KEY_FILE}.{os.getpid()}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except OSError:
            return None
        return data

    def _mac(self, secret: bytes, digest: str, payload: bytes) -> bytes:
        kind = b"" if self.prefix == "rules" else self.prefix.encode() + b"\0"
        return hmac.new(secret, FORMAT + b"\0" + kind + digest.encode() + b"\0" + payload, hashlib.sha256).digest()

    def get_bytes(self, digest: str) -> bytes | None:
        """The bytes stored under ``digest``, or None (absent, or failing its check)."""
        secret = self._secret(create=False)
        if secret is None:
            return None
        try:
            with open(self.dir / f"{self.prefix}-{digest}.bin", "rb") as f:
                data = f.read()
        except OSError:
            return None
        mac, payload = data[:_MAC], data[_MAC:]
        if len(mac) != _MAC or not hmac.compare_digest(mac, self._mac(secret, digest, payload)):
            return None
        return payload

    def get(self, digest: str) -> Any | None:
        """The value stored under ``digest``, or None (absent, or failing its check)."""
        payload = self.get_bytes(digest)
        if payload is None:
            return None
        try:
            return pickle.loads(payload)
        except Exception:  # our own bytes, from another version of a class: a miss
            return None

    def put(self, digest: str, value: Any) -> bool:
        """Store ``value`` under ``digest`` (atomically); False if the store cannot be written."""
        return self.put_bytes(digest, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))

    def put_bytes(self, digest: str, payload: bytes) -> bool:
        """Store ``payload`` under ``digest`` (atomically); False if the store cannot be written."""
        secret = self._secret(create=True)
        if secret is None:
            return False
        path = self.dir / f"{self.prefix}-{digest}.bin"
        tmp = self.dir / f".{self.prefix}-{digest}.{os.getpid()}"
        try:
            with open(tmp, "wb") as f:
                f.write(self._mac(secret, digest, payload) + payload)
            os.replace(tmp, path)
        except OSError:
            return False
        return True


#: entries kept per store (one per distinct policy, rule files and HOME); the oldest go first
MAX_ENTRIES = 32


def load_rules(policy: Any, home: str, store_root: str | Path) -> tuple[Any, str, bool]:
    """The run's rule set: (rule set, cache key, whether the cache had it checked already).

    On a miss the rules are parsed from the very texts that were hashed; the caller
    compiles them all (which checks them) and then calls :func:`remember`."""
    from spyglass.rules.sources import policy_rule_paths, read_sources

    sources = read_sources(policy_rule_paths(policy))
    digest = cache_key(sources, policy, home)
    if not sources.errors:
        cached = RuleCache(store_root).get(digest)
        from spyglass.rules.model import RuleSet

        if isinstance(cached, RuleSet):
            return cached, digest, True
    from spyglass.rules.ruleset import load_ruleset

    return load_ruleset(policy, sources=sources), digest, False


def policy_parser(store_root: str | Path) -> Callable[..., Any]:
    """``parse_policy`` answered from the store's sealed cache (``policy-<digest>.bin``) when the
    same text, at the same place, was parsed by the same code before: a policy file is YAML and
    is checked against its JSON schema, which costs more than the rest of a run's start.  A text
    that does not parse raises as always (nothing is kept for it)."""
    from spyglass.policy.loader import parse_policy
    from spyglass.policy.model import Policy

    def parse(text: str, path: str, *, base_dir: str) -> Any:
        h = hashlib.sha256(FORMAT + b"\0policy\0" + _code_stamp())
        for part in (path, base_dir, text):
            h.update(part.encode("utf-8", "surrogateescape") + b"\0")
        digest = h.hexdigest()
        cache = RuleCache(store_root, prefix="policy")
        got = cache.get(digest)
        if isinstance(got, Policy):
            return got
        pol = parse_policy(text, path, base_dir=base_dir)
        if cache.put(digest, pol):
            prune(cache)
        return pol

    return parse


def remember(store_root: str | Path, digest: str, ruleset: Any) -> None:
    """Keep a rule set that compiled, under its key (best effort: a read-only store just misses)."""
    cache = RuleCache(store_root)
    if cache.put(digest, ruleset):
        prune(cache)


def prune(cache: RuleCache) -> None:
    """Only the newest ``MAX_ENTRIES`` entries of the cache's kind are kept."""
    try:
        entries = sorted(cache.dir.glob(f"{cache.prefix}-*.bin"), key=lambda p: p.stat().st_mtime_ns)
        for old in entries[:-MAX_ENTRIES]:
            old.unlink(missing_ok=True)
    except OSError:
        pass
