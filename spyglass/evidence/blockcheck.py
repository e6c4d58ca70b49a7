"""Checking a block-sealed stream (``events.jsonl``, format ``block``; see :mod:`spyglass.store.chain`).

Every block of record lines must be followed by a seal whose chain value is
sha256(previous seal's chain value + the block's bytes), starting from the
run's genesis value; the checkpoint's record count must fall on a seal and
its head must be that seal's chain value.  A block whose chain value does not
match is described record by record from the CRC-32 list of its seal: one
record changed (*edited*), records missing (*deleted*), records that are not
in the seal (*inserted*), two neighbours swapped (*reordered*).  When the
CRCs were forged to match, the records' sequence numbers still tell an
insertion or a deletion; otherwise the whole block is named.  Problems name
the line of the file (1-based; seal lines count as lines).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from spyglass.events.codec import SEAL_PREFIX
from spyglass.evidence.chaincheck import MAX_PROBLEMS, Problem, StreamCheck, StreamResult, _int, _seq_of
from spyglass.store.chain import Seal, block_link, genesis, parse_seal, record_crcs


class _Block(msgspec.Struct):
    data: bytes  # the record lines as stored (what the seal hashes)
    first: int  # line number of its first record
    seal_at: int | None = None  # line number of its seal (None: the unsealed tail)
    seal: Seal | None = None  # None: the seal line is damaged (or there is none)
    cut: bool = False  # the seal line (or the last record) has no newline

    @property
    def lines(self) -> list[tuple[int, bytes]]:
        """(line number, record without newline) of each record line."""
        parts = self.data.split(b"\n")
        if parts and parts[-1] == b"":
            parts.pop()
        return [(self.first + i, line) for i, line in enumerate(parts)]

    @property
    def count(self) -> int:
        return self.data.count(b"\n") + (1 if self.data and not self.data.endswith(b"\n") else 0)


def _blocks(path: Path) -> Iterator[_Block]:
    """The blocks of a stored stream, found with byte searches (no Python work per record), read 4 MiB
    at a time (memory stays flat whatever the size of the file)."""
    try:
        f = path.open("rb")
    except FileNotFoundError:
        return
    with f:
        buf, line, eof = b"", 1, False
        while not eof:
            chunk = f.read(1 << 22)
            eof = not chunk
            buf += chunk
            pos = 0
            while True:
                j = buf.find(SEAL_PREFIX, pos)
                while j > pos and buf[j - 1] != 0x0A:  # a seal starts a line
                    j = buf.find(SEAL_PREFIX, j + 1)
                nl = buf.find(b"\n", j) if j >= 0 else -1
                if j < 0 or (nl < 0 and not eof):
                    break  # no whole seal line yet
                block = _Block(buf[pos:j], line)
                line += block.data.count(b"\n")
                block.seal_at = line
                block.seal = parse_seal(buf[j : len(buf) if nl < 0 else nl])
                block.cut = nl < 0
                yield block
                line += 1
                pos = len(buf) if nl < 0 else nl + 1
            buf = buf[pos:]
        if buf:
            yield _Block(buf, line, cut=not buf.endswith(b"\n"))


def _crcs(hexed: str) -> list[str]:
    return [hexed[i : i + 8] for i in range(0, len(hexed), 8)]


def _describe(stream: str, b: _Block, prev_seq: int | None) -> list[Problem]:
    """What is wrong with a sealed block whose chain value does not match its records."""
    assert b.seal is not None
    have = _crcs(record_crcs([line for _, line in b.lines]))
    want = _crcs(b.seal.crc32)
    lines = b.lines

    def at(i: int) -> int:
        return lines[i][0] if i < len(lines) else b.seal_at or 0

    def seq(i: int) -> int | None:
        return _seq_of(lines[i][1]) if 0 <= i < len(lines) else None

    first = next((i for i, (x, y) in enumerate(zip(have, want, strict=False)) if x != y), min(len(have), len(want)))
    if len(have) == len(want) and first < len(have):
        diffs = [i for i in range(first, len(have)) if have[i] != want[i]]
        if len(diffs) == 2 and diffs[1] == first + 1 and have[first] == want[first + 1] \
                and have[first + 1] == want[first]:
            n = at(first)
            return [Problem(stream, "reordered", f"records {n} and {at(first + 1)} are out of order "
                            f"(record {n} belongs after {at(first + 1)})", line=n, seq=seq(first))]
        return [Problem(stream, "edited", f"record {at(i)} was changed (its hash does not match its seal)",
                        line=at(i), seq=seq(i)) for i in diffs]
    if len(have) < len(want) and have[first:] == want[first + len(want) - len(have):]:
        gone = len(want) - len(have)
        before = seq(first - 1) if first > 0 else prev_seq
        after = seq(first)
        missing = ""
        if before is not None and after is not None and after - before - 1 == gone:
            missing = f" (seq {before + 1} missing)" if gone == 1 else f" (seqs {before + 1}-{after - 1} missing)"
        where = f"before record {at(first)}" if first < len(lines) else f"before the seal at line {b.seal_at}"
        return [Problem(stream, "deleted", f"{gone} record(s) deleted {where}{missing}", line=at(first),
                        seq=after)]
    if len(have) > len(want) and have[first + len(have) - len(want):] == want[first:]:
        extra = len(have) - len(want)
        return [Problem(stream, "inserted", f"record {at(i)} was inserted (it is not in its block's seal)",
                        line=at(i), seq=seq(i)) for i in range(first, first + extra)]
    # the CRCs agree (forged to match) or tell nothing clear: the sequence numbers may
    expect = prev_seq
    for i in range(len(lines)):
        s = seq(i)
        if s is not None and expect is not None and s != expect + 1:
            kind = "deleted" if s > expect + 1 else "inserted"
            what = (f"{s - expect - 1} record(s) deleted before record {at(i)}" if kind == "deleted"
                    else f"record {at(i)} was inserted (its seq {s} repeats or goes back)")
            return [Problem(stream, kind, what + " (and the seal's CRCs were rewritten)", line=at(i), seq=s)]
        expect = s if s is not None else None
    first_line, last_line = (lines[0][0], lines[-1][0]) if lines else (b.seal_at or 0, b.seal_at or 0)
    return [Problem(stream, "edited", f"the block of records {first_line}-{last_line} does not match its seal at "
                    f"line {b.seal_at}: a record or the seal was changed, or the block before was changed "
                    "and sealed again", line=first_line, seq=seq(0))]


class _Walk(msgspec.Struct):
    records: int = 0  # record lines on disk
    sealed: int = 0  # records followed by a seal
    linked: int = 0  # records of blocks whose seal matches
    head: str = ""
    head_at: dict[int, str] = msgspec.field(default_factory=dict)  # records sealed so far -> chain value
    line_of: dict[int, int] = msgspec.field(default_factory=dict)  # records sealed so far -> line of the next record
    tail: _Block | None = None  # records after the last seal
    cut_seal: _Block | None = None  # a seal line cut short at the end of the file
    last_line: int = 0
    problems: list[Problem] = msgspec.field(default_factory=list)


def _walk(stream: str, path: Path, start: str) -> _Walk:
    w = _Walk(head=start)
    prev = start
    prev_seq: int | None = 0
    for b in _blocks(path):
        n = b.count
        w.records += n
        w.last_line = b.seal_at or (b.first + n - 1 if n else w.last_line)
        if b.seal_at is None:
            w.tail = b
            break
        if b.seal is None:
            if b.cut:
                w.cut_seal = b
            elif len(w.problems) < MAX_PROBLEMS:
                w.problems.append(Problem(stream, "damaged", "seal line is damaged (not a valid seal)",
                                          line=b.seal_at))
            prev_seq = None
            continue
        ok = block_link(prev, b.data) == b.seal.chain and len(b.seal.crc32) == 8 * n
        if ok:
            w.linked += n
        elif len(w.problems) < MAX_PROBLEMS:
            w.problems.extend(_describe(stream, b, prev_seq))
        w.sealed += n
        prev = b.seal.chain
        w.head_at[w.sealed] = prev
        w.line_of[w.sealed] = b.seal_at + 1
        if n:
            last = b.data.rfind(b"\n", 0, len(b.data) - 1) + 1
            prev_seq = _seq_of(b.data[last:].rstrip(b"\n"))
    w.head = prev
    return w


def verify_block_stream(stream: str, path: Path, run_id: str, cp: dict[str, Any] | None) -> StreamCheck:
    """Check one block-sealed file against its genesis value and (if given) the checkpoint."""
    start = genesis(run_id, stream)
    w = _walk(stream, path, start)
    cp_count = _int(cp.get(stream)) if cp is not None else None
    result = StreamCheck(StreamResult(stream, records=w.records, linked=w.linked, checkpoint_count=cp_count,
                                      head=w.head))
    result.problems.extend(w.problems)
    final = bool(cp and cp.get("final"))
    unsealed = w.tail or w.cut_seal
    if cp is not None and cp_count is not None and w.records < cp_count:
        result.problems.append(Problem(stream, "truncated", f"{cp_count - w.records} record(s) missing at the "
                                       f"end: the file has {w.records}, the checkpoint counts {cp_count}",
                                       line=w.last_line + 1))
        return result
    if unsealed is not None and not final:
        n = len(unsealed.lines)
        result.problems.append(Problem(
            stream, "cut-short", f"the last {n} record(s) were never sealed (the recorder stopped mid-write)",
            line=unsealed.lines[0][0] if unsealed.lines else unsealed.seal_at, tampered=False))
    if cp is None or cp_count is None:
        return result
    if w.problems:
        return result  # the head cannot match; the problems say where
    if final and w.cut_seal is not None and w.sealed < cp_count:
        result.problems.append(Problem(stream, "damaged", "the last line is cut short", line=w.cut_seal.seal_at))
        return result
    if final and w.tail is not None and w.sealed < cp_count:
        first, last = w.tail.lines[0][0], w.tail.lines[-1][0]
        result.problems.append(Problem(stream, "unsealed", f"records {first}-{last} are not followed by a seal "
                                       "(the seal was removed, or records were cut and the checkpoint changed)",
                                       line=last))
        return result
    at = w.head_at.get(cp_count, start if cp_count == 0 else None)
    if at is None or at != cp.get(f"{stream}_head"):
        result.problems.append(Problem(
            "checkpoint", "forged",
            f"the checkpoint's {stream} head does not match the records: records up to {cp_count} were "
            "rewritten and sealed again, or the checkpoint was replaced"))
        return result
    if final and unsealed is not None:
        result.problems.append(Problem(stream, "appended", f"{len(unsealed.lines)} record(s) added after the "
                                       "final checkpoint (not sealed)",
                                       line=unsealed.lines[0][0] if unsealed.lines else unsealed.seal_at))
    elif w.sealed > cp_count:
        extra = w.sealed - cp_count
        if final:
            result.problems.append(Problem(stream, "appended", f"{extra} record(s) added after the final "
                                           "checkpoint", line=w.line_of.get(cp_count, 1)))
        else:
            result.notes.append(f"{stream}: the last {extra} record(s) came after the last checkpoint "
                                "and are covered by the chain only")
    return result
