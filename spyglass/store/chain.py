"""The hash chain that makes a run's records tamper-evident.

Each stored record is its canonical JSON (sorted keys, no white space, as
msgspec writes it) with one extra member appended: ``"chain"``, the hex
sha256 of the previous record's chain value followed by the canonical bytes.
The first record chains from a genesis value derived from the run id and the
file's name, so records cannot be moved between runs or files unnoticed.
"""

from __future__ import annotations

import hashlib

CHAIN_SUFFIX_LEN = len(',"chain":""}') + 64


def genesis(run_id: str, stream: str) -> str:
    return hashlib.sha256(f"spyglass-chain-v1:{run_id}:{stream}".encode()).hexdigest()


def link(prev: str, canonical: bytes) -> str:
    h = hashlib.sha256(prev.encode("ascii"))
    h.update(canonical)
    return h.hexdigest()


def seal(canonical: bytes, chain: str) -> bytes:
    """The stored line (without newline) for a canonical record and its chain value."""
    return canonical[:-1] + b',"chain":"' + chain.encode("ascii") + b'"}'


def unseal(line: bytes) -> tuple[bytes, str] | None:
    """Split a stored line into (canonical bytes, chain value); None if it has no seal."""
    line = line.rstrip(b"\r\n")
    if len(line) < CHAIN_SUFFIX_LEN + 2 or not line.endswith(b'"}'):
        return None
    tail = line[-CHAIN_SUFFIX_LEN:]
    if not tail.startswith(b',"chain":"'):
        return None
    return line[:-CHAIN_SUFFIX_LEN] + b"}", tail[10:74].decode("ascii", "replace")


class Chain:
    """Running state of one chained stream."""

    __slots__ = ("count", "head")

    def __init__(self, run_id: str, stream: str) -> None:
        self.head = genesis(run_id, stream)
        self.count = 0

    def add(self, canonical: bytes) -> bytes:
        self.head = link(self.head, canonical)
        self.count += 1
        return seal(canonical, self.head)


def checkpoint_anchor(checkpoint: dict[str, object]) -> str:
    """The anchor of a final checkpoint: sha256 of its canonical JSON (signature included).

    Recorded outside the run directory (the index, the terminal, ``--format
    json``), it pins the whole record: re-chaining the files after the fact
    needs a new checkpoint, whose anchor differs."""
    import msgspec

    canonical = msgspec.json.Encoder(order="sorted").encode(checkpoint)
    return "sha256:" + hashlib.sha256(canonical).hexdigest()
