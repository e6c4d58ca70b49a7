"""Checking one hash-chained file (``events.jsonl`` or ``alerts.jsonl``) record by record.

Every line must be a sealed record (canonical JSON with a ``"chain"`` member)
whose chain value is sha256(previous chain value + its canonical bytes),
starting from the run's genesis value for that stream; the checkpoint's
record count and head hash must match the records on disk.

A break in the chain is described from its neighbours: a record whose
successor links past it was *inserted*; two records that link to each other
in the wrong order were *reordered*; a record whose sequence number jumps
follows *deleted* records; otherwise the record was *edited*.  Problems name
the record by its line number (1-based) in the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from spyglass.store.chain import genesis, link, unseal

MAX_PROBLEMS = 20


class Problem(msgspec.Struct):
    """One thing that does not verify."""

    where: str  # "events", "alerts", "checkpoint", "run.json", "evidence/<file>"
    kind: str  # edited | inserted | deleted | reordered | damaged | truncated | appended | forged | ...
    message: str
    line: int | None = None  # 1-based record number in the stream's file
    seq: int | None = None  # the record's own seq, where it could be read
    tampered: bool = True  # False: a sign of an unfinished run, not of tampering

    def __str__(self) -> str:
        loc = self.where if self.line is None else f"{self.where}.jsonl line {self.line}"
        return f"{loc}: {self.message}"


class StreamResult(msgspec.Struct):
    name: str
    records: int = 0  # sealed records on disk
    linked: int = 0  # records whose chain value is right
    checkpoint_count: int | None = None
    head: str = ""  # chain value of the last record on disk


class _SeqOnly(msgspec.Struct):
    seq: int = 0


_seq_decoder = msgspec.json.Decoder(_SeqOnly)


def _seq_of(canonical: bytes | None) -> int | None:
    if canonical is None:
        return None
    try:
        return _seq_decoder.decode(canonical).seq
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


# -- one stream -----------------------------------------------------------------
class _Line(msgspec.Struct):
    n: int
    canonical: bytes | None  # None: not a sealed record
    stored: str | None
    complete: bool  # ended with a newline


def _lines(path: Path) -> Iterator[_Line]:
    try:
        f = path.open("rb")
    except FileNotFoundError:
        return
    with f:
        for n, raw in enumerate(f, 1):
            complete = raw.endswith(b"\n")
            body = raw.rstrip(b"\r\n")
            sealed = unseal(body) if body else None
            if sealed is None:
                yield _Line(n, None, None, complete)
            else:
                yield _Line(n, sealed[0], sealed[1], complete)


class _Pass(msgspec.Struct):
    records: int = 0
    breaks: list[int] = msgspec.field(default_factory=list)  # line numbers whose link is wrong
    unsealed: list[int] = msgspec.field(default_factory=list)
    head_at: dict[int, str] = msgspec.field(default_factory=dict)  # line -> stored chain value (wanted lines)
    last_head: str = ""
    last_partial: bool = False  # the last line has no newline and is not a record (cut short)


def _first_pass(path: Path, start: str, want: set[int]) -> _Pass:
    """Walk the file once: count records, note every line whose link is broken."""
    res = _Pass(last_head=start)
    prev = start
    last: _Line | None = None
    for ln in _lines(path):
        last = ln
        if ln.canonical is None or ln.stored is None:
            res.unsealed.append(ln.n)
            continue
        res.records += 1
        if link(prev, ln.canonical) != ln.stored:
            res.breaks.append(ln.n)
        prev = ln.stored
        if ln.n in want:
            res.head_at[ln.n] = ln.stored
    res.last_head = prev
    if last is not None and last.canonical is None and not last.complete:
        res.last_partial = True
        res.unsealed.remove(last.n)
    return res


def _window(path: Path, centres: list[int]) -> dict[int, _Line]:
    want: set[int] = set()
    for c in centres:
        want.update(range(c - 2, c + 3))
    return {ln.n: ln for ln in _lines(path) if ln.n in want}


def _describe_breaks(stream: str, path: Path, start: str, p: _Pass) -> list[Problem]:
    """Turn broken links into problems, classifying each from its neighbours."""
    breaks = p.breaks[: MAX_PROBLEMS * 3]
    unsealed = p.unsealed[:MAX_PROBLEMS]
    lines = _window(path, breaks + unsealed)

    def prev_sealed(n: int) -> _Line | None:
        """The nearest sealed line before n (unsealed lines are skipped, as the chain skips them)."""
        k = n - 1
        while k >= 1:
            ln = lines.get(k)
            if ln is None:
                return None
            if ln.stored is not None:
                return ln
            k -= 1
        return None

    def stored_before(n: int) -> str | None:
        ln = prev_sealed(n)
        if ln is not None:
            return ln.stored
        return (
            start if all(lines.get(k) is not None and lines[k].stored is None for k in range(1, n)) else None
        )

    out: list[Problem] = []
    for n in unsealed:
        ln = lines.get(n)
        kind, what = "damaged", "is not a sealed record (not valid spyglass output, or edited)"
        if ln is not None and ln.canonical is None and not ln.complete:
            what = "is cut short"
        out.append(Problem(stream, kind, f"record {what}", line=n))
    skip: set[int] = set()
    reported = {p.line for p in out}
    for n in breaks:
        if n in skip or (n - 1) in reported:
            continue  # a consequence of the record just before (already reported as damaged)
        cur, nxt = lines.get(n), lines.get(n + 1)
        if cur is None or cur.canonical is None or cur.stored is None:
            continue
        prev_stored = stored_before(n)
        prev_line = prev_sealed(n)
        seq = _seq_of(cur.canonical)
        nxt_ok = nxt is not None and nxt.canonical is not None and nxt.stored is not None
        if nxt_ok and prev_stored is not None:
            assert nxt is not None and nxt.canonical is not None
            # n and n+1 swapped: n links from n+1, n+1 links from n-1
            if (
                link(nxt.stored or "", cur.canonical) == cur.stored
                and link(prev_stored, nxt.canonical) == nxt.stored
            ):
                out.append(
                    Problem(
                        stream,
                        "reordered",
                        f"records {n} and {n + 1} are out of order (record {n} belongs after {n + 1})",
                        line=n,
                        seq=seq,
                    )
                )
                skip.update({n + 1, n + 2})
                continue
            # n was inserted: n+1 links straight from n-1
            if link(prev_stored, nxt.canonical) == nxt.stored:
                out.append(
                    Problem(
                        stream,
                        "inserted",
                        f"record {n} was inserted (record {n + 1} follows record {n - 1} directly)",
                        line=n,
                        seq=seq,
                    )
                )
                skip.add(n + 1)
                continue
            # only the chain value of n was changed: n+1 links from the true value
            true_n = link(prev_stored, cur.canonical)
            if link(true_n, nxt.canonical) == nxt.stored:
                out.append(
                    Problem(stream, "edited", f"the chain value of record {n} was changed", line=n, seq=seq)
                )
                skip.add(n + 1)
                continue
        # the record before n was inserted with a well-formed link: n links from the one before it
        if prev_line is not None and prev_line.n not in reported:
            before_prev = stored_before(prev_line.n)
            if before_prev is not None and link(before_prev, cur.canonical) == cur.stored:
                k = prev_line.n
                out.append(
                    Problem(
                        stream,
                        "inserted",
                        f"record {k} was inserted (record {n} follows record {k - 1} directly)",
                        line=k,
                        seq=_seq_of(prev_line.canonical),
                    )
                )
                continue
        prev_seq = (
            _seq_of(prev_line.canonical) if prev_line is not None else (0 if prev_stored == start else None)
        )
        if seq is not None and prev_seq is not None and seq > prev_seq + 1:
            gone = seq - prev_seq - 1
            missing = f"seq {prev_seq + 1}" if gone == 1 else f"seqs {prev_seq + 1}-{seq - 1}"
            out.append(
                Problem(
                    stream,
                    "deleted",
                    f"{gone} record(s) deleted before record {n} ({missing} missing)",
                    line=n,
                    seq=seq,
                )
            )
            continue
        also = f"; or record {n - 1} was changed and its hash recomputed" if n > 1 else ""
        out.append(
            Problem(
                stream, "edited", f"record {n} was changed (its hash does not match{also})", line=n, seq=seq
            )
        )
    out.sort(key=lambda pr: pr.line or 0)
    return out[:MAX_PROBLEMS]


class StreamCheck(msgspec.Struct):
    result: StreamResult
    problems: list[Problem] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)


def _block_format(stream: str, path: Path, cp: dict[str, Any] | None) -> bool:
    """Whether the stream is block-sealed: the checkpoint says so, else its first lines do."""
    if cp is not None and cp.get(f"{stream}_format") is not None:
        return cp.get(f"{stream}_format") == "block"
    if stream != "events":
        return False  # alerts are chained per record
    try:
        with path.open("rb") as f:
            head = f.read(1 << 16).split(b"\n")
    except OSError:
        return False
    return not any(unseal(line) is not None for line in head if line)


def verify_stream(stream: str, path: Path, run_id: str, cp: dict[str, Any] | None) -> StreamCheck:
    """Check one chained file against its genesis value and (if given) the checkpoint."""
    if _block_format(stream, path, cp):
        from spyglass.evidence.blockcheck import verify_block_stream

        return verify_block_stream(stream, path, run_id, cp)
    result = StreamCheck(StreamResult(stream))
    start = genesis(run_id, stream)
    cp_count = _int(cp.get(stream)) if cp is not None else None
    want = {cp_count} if cp_count else set()
    p = _first_pass(path, start, want)
    sr = StreamResult(
        stream,
        records=p.records,
        linked=p.records - len(p.breaks),
        checkpoint_count=cp_count,
        head=p.last_head,
    )
    result.result = sr
    problems = _describe_breaks(stream, path, start, p) if (p.breaks or p.unsealed) else []
    result.problems.extend(problems)
    final = bool(cp and cp.get("final"))
    if p.last_partial:
        if final:
            result.problems.append(
                Problem(stream, "damaged", "the last line is cut short", line=p.records + 1)
            )
        else:
            result.problems.append(
                Problem(
                    stream,
                    "cut-short",
                    "the last line is cut short (the recorder stopped mid-write)",
                    line=p.records + len(p.unsealed) + 1,
                    tampered=False,
                )
            )
    if cp is None or cp_count is None:
        return result
    head_key = f"{stream}_head"
    on_disk = p.records + len(p.unsealed)  # damaged lines still take a record's place
    if on_disk < cp_count:
        result.problems.append(
            Problem(
                stream,
                "truncated",
                f"{cp_count - on_disk} record(s) missing at the end: the file has {on_disk}, "
                f"the checkpoint counts {cp_count}",
                line=on_disk + 1,
            )
        )
        return result
    if problems:
        return result  # the head cannot match; the breaks say where
    at = p.head_at.get(cp_count, start) if cp_count else start
    if at != cp.get(head_key):
        result.problems.append(
            Problem(
                "checkpoint",
                "forged",
                f"the checkpoint's {stream} head does not match the records: records up to "
                f"{cp_count} were rewritten with recomputed hashes, or the checkpoint was replaced",
            )
        )
    elif p.records > cp_count:
        extra = p.records - cp_count
        if final:
            result.problems.append(
                Problem(
                    stream,
                    "appended",
                    f"{extra} record(s) added after the final checkpoint",
                    line=cp_count + 1,
                )
            )
        else:
            result.notes.append(
                f"{stream}: the last {extra} record(s) came after the last checkpoint "
                "and are covered by the chain only"
            )
    return result


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None
