"""A run's files against what the store's index remembers of it.

The index (``index.sqlite``, outside the run directory) keeps a finished run's
anchor (the hash of its final checkpoint), its alert count and its highest alert
level.  A process left behind by the run can rewrite the run directory and
re-chain it consistently; it cannot make the files match the anchor again.

:func:`index_anchors` is what ``verify`` compares the checkpoint with (also used
by ``gate`` and the reports, so that all say the same); :func:`anchor_mismatch`
is the cheap check ``show`` and ``alerts`` make (no chain walk: the checkpoint's
hash, and the last record and count of each stream); :func:`anchored_alerts` is
what the index says of the alerts, which ``gate`` counts when the files do not
match their anchor.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from spyglass.store.chain import checkpoint_anchor, genesis, is_seal, parse_seal, unseal

if TYPE_CHECKING:
    from spyglass.store import RunReader

__all__ = ["AnchoredAlerts", "anchor_mismatch", "anchored_alerts", "index_anchors"]


class AnchoredAlerts(msgspec.Struct, frozen=True):
    """The alerts as the index recorded them at the end of the run."""

    count: int
    max_level: str | None


def index_anchors(reader: RunReader, given: str | None = None) -> list[tuple[str, str]]:
    """(where it was kept, anchor): ``given`` (``verify --anchor``) first, then the index's."""
    anchors: list[tuple[str, str]] = []
    if given:
        anchors.append(("--anchor", given if given.startswith("sha256:") else f"sha256:{given}"))
    try:
        indexed = reader.store.index.anchor(reader.id)
    except Exception:  # sqlite3.Error: an unreadable index remembers nothing
        indexed = None
    if indexed:
        anchors.append((f"the index {reader.store.root / 'index.sqlite'}", indexed))
    return anchors


def _index_row(reader: RunReader) -> dict[str, Any] | None:
    try:
        rows = reader.store.index.rows("WHERE id = ?", (reader.id,))
    except Exception:  # sqlite3.Error
        return None
    return rows[0] if rows else None


def anchored_alerts(reader: RunReader) -> AnchoredAlerts | None:
    """The index's alert count and highest level for a finished, anchored run (else None)."""
    row = _index_row(reader)
    if row is None or not row.get("anchor"):
        return None
    return AnchoredAlerts(int(row.get("alerts") or 0), row.get("max_level"))


def _tail(path: Path, block: bool) -> tuple[int, str | None]:
    """(records, chain value of the last one) of a stream file: per record, or for a block-sealed
    stream (events) the records outside the seal lines and the last seal's chain value."""
    count, last = 0, None
    try:
        with path.open("rb") as f:
            for line in f:
                if not line.strip():
                    continue
                if block and is_seal(line):
                    last = line
                    continue
                count += 1
                if not block:
                    last = line
    except FileNotFoundError:
        return 0, None
    if last is None:
        return count, None
    if block:
        seal = parse_seal(last.rstrip(b"\r\n"))
        return count, seal.chain if seal else ""
    sealed = unseal(last)
    return count, sealed[1] if sealed else ""


def anchor_mismatch(reader: RunReader) -> str | None:
    """Why the run's files do not match the anchor the index keeps; None if they match or
    there is no anchor to compare with (a run still going, or recorded before anchors)."""
    anchors = index_anchors(reader)
    if not anchors:
        return None
    where, expected = anchors[-1]
    cp_path = reader.dir / "evidence" / "checkpoint.json"
    try:
        cp = msgspec.json.decode(cp_path.read_bytes())
    except FileNotFoundError:
        return f"the final checkpoint is missing, though {where} keeps its anchor"
    except msgspec.DecodeError:
        return "the final checkpoint is not valid JSON"
    if not isinstance(cp, dict):
        return "the final checkpoint is not a JSON object"
    if checkpoint_anchor(cp) != expected:
        return f"the final checkpoint is not the one anchored in {where}: the record was rewritten after the run"
    for stream in ("events", "alerts"):
        count, head = _tail(reader.dir / f"{stream}.jsonl", cp.get(f"{stream}_format") == "block")
        head = head if head is not None else genesis(reader.id, stream)
        if count != cp.get(stream):
            return (f"{stream}.jsonl holds {count} record(s), not the {cp.get(stream)} anchored at the end "
                    "of the run: the record was changed after the run")
        if head != cp.get(f"{stream}_head"):
            return f"the last record of {stream}.jsonl is not the one anchored: the record was changed after the run"
    row = _index_row(reader)
    if row is not None and row.get("alerts") not in (None, cp.get("alerts")):
        return f"the index records {row.get('alerts')} alert(s), the anchored checkpoint {cp.get('alerts')}"
    return None
