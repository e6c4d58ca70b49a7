"""The hash chains that make a run's records tamper-evident.

Events (``events.jsonl``, format ``block``): records are stored as plain
JSON lines, and after every block of them (at most :data:`BLOCK_RECORDS`
records, or whatever was written since the last flush) comes one seal line::

    {"seal":{"crc32":"<8 hex digits per record>","chain":"<sha256 hex>"}}

``chain`` is sha256 of the previous seal's chain value (the genesis value
for the first block) followed by the exact bytes of the block's lines,
newlines included: changing, removing, reordering or inserting any record
changes it.  ``crc32`` holds the CRC-32 of each record line of the block, in
order: not a defence (the chain is), but it lets a verifier name the one
record that was edited, dropped, inserted or moved.  A seal costs one hash
per block instead of one per record, and no per-line chain member.

Alerts (``alerts.jsonl``) and runs recorded before block sealing, format
``line``: each stored record is its canonical JSON (sorted keys, no white space, as
msgspec writes it) with one extra member appended: ``"chain"``, the hex
sha256 of the previous record's chain value followed by the canonical bytes.
The first record chains from a genesis value derived from the run id and the
file's name, so records cannot be moved between runs or files unnoticed.
"""

from __future__ import annotations

import hashlib
import struct
import zlib

import msgspec

from spyglass.events.codec import SEAL_PREFIX

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


# -- block sealing (events) ---------------------------------------------------------

#: records per block at most (a flush seals the block it has whatever its size)
BLOCK_RECORDS = 1024


class Seal(msgspec.Struct, forbid_unknown_fields=True):
    crc32: str
    chain: str


class _SealLine(msgspec.Struct, forbid_unknown_fields=True):
    seal: Seal


_seal_decoder = msgspec.json.Decoder(_SealLine)


def is_seal(line: bytes) -> bool:
    return line.startswith(SEAL_PREFIX)


def parse_seal(line: bytes) -> Seal | None:
    """The seal of a seal line, or None when it is damaged."""
    try:
        seal = _seal_decoder.decode(line).seal
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if len(seal.chain) != 64 or len(seal.crc32) % 8:
        return None
    return seal


def record_crcs(lines: list[bytes]) -> str:
    """The seal's ``crc32`` member for record lines (without their newline): 8 hex digits per record."""
    return struct.pack(f">{len(lines)}I", *map(zlib.crc32, lines)).hex()


def block_bytes(lines: list[bytes]) -> bytes:
    """The stored bytes of a block's record lines (given without their newline)."""
    return b"\n".join(lines) + b"\n"


def block_link(prev: str, data: bytes) -> str:
    """The chain value of a block: sha256(previous chain value + the block's stored bytes)."""
    h = hashlib.sha256(prev.encode("ascii"))
    h.update(data)
    return h.hexdigest()


def seal_line(chain: str, lines: list[bytes]) -> bytes:
    """The stored seal line (with its newline) after the record ``lines``."""
    crcs = record_crcs(lines).encode("ascii")
    return b'{"seal":{"crc32":"' + crcs + b'","chain":"' + chain.encode("ascii") + b'"}}\n'


class BlockChain:
    """Running state of a block-sealed stream: records added, records sealed, the last seal's value."""

    __slots__ = ("count", "head", "pending", "sealed")

    def __init__(self, run_id: str, stream: str) -> None:
        self.head = genesis(run_id, stream)
        self.count = 0  # records added
        self.sealed = 0  # records covered by a seal
        self.pending: list[bytes] = []  # record lines (without newline) not sealed yet

    def add(self, line: bytes) -> bool:
        """Take one record line (without newline); True when the block is full and wants sealing."""
        self.pending.append(line)
        self.count += 1
        return len(self.pending) >= BLOCK_RECORDS

    def seal(self) -> bytes:
        """Seal the pending records: the bytes to write (the records, then the seal line); b"" if none."""
        lines = self.pending
        if not lines:
            return b""
        data = block_bytes(lines)
        self.head = block_link(self.head, data)
        self.sealed += len(lines)
        self.pending = []
        return data + seal_line(self.head, lines)


def checkpoint_anchor(checkpoint: dict[str, object]) -> str:
    """The anchor of a final checkpoint: sha256 of its canonical JSON (signature included).

    Recorded outside the run directory (the index, the terminal, ``--format
    json``), it pins the whole record: re-chaining the files after the fact
    needs a new checkpoint, whose anchor differs."""
    import msgspec

    canonical = msgspec.json.Encoder(order="sorted").encode(checkpoint)
    return "sha256:" + hashlib.sha256(canonical).hexdigest()
