"""Block-sealed events: one hash per block, and still every single changed, removed, reordered or
inserted record is found and named; a consistent re-sealing after the fact is caught by the anchor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evidence_helpers import MakeRun, ev

from spyglass.evidence.verify import verify_run
from spyglass.store import RunReader
from spyglass.store.chain import BLOCK_RECORDS, block_link, genesis, is_seal, parse_seal, seal_line

N = 2 * BLOCK_RECORDS + 300  # three blocks: 1024, 1024 and 300 records


@pytest.fixture
def run(make_run: MakeRun) -> RunReader:
    # no flush while it is written: the blocks are the full ones (a flush seals whatever is pending)
    events = [ev("file.read", 100 + i % 7, path=f"/ws/src/f{i}.py") for i in range(N)]
    return make_run(events, flush_interval=3600)


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _put(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(lines))


def _line_of_seq(lines: list[bytes], seq: int) -> int:
    """0-based index of the record with this seq."""
    return next(i for i, ln in enumerate(lines) if ln.startswith(b'{"seq":%d,' % seq))


def test_the_untouched_run_has_three_sealed_blocks_and_verifies(run: RunReader) -> None:
    lines = _lines(run.events_path)
    seals = [i for i, ln in enumerate(lines) if is_seal(ln)]
    assert seals == [BLOCK_RECORDS, 2 * BLOCK_RECORDS + 1, N + 2]
    r = verify_run(run.dir)
    assert r.status == "verified" and r.streams["events"].records == N and r.streams["events"].linked == N


def test_edit_one_record_inside_a_block(run: RunReader) -> None:
    lines = _lines(run.events_path)
    i = _line_of_seq(lines, 1500)
    lines[i] = lines[i].replace(b"/ws/src/f1499.py", b"/ws/src/f1499.pz")
    _put(run.events_path, lines)
    r = verify_run(run.dir)
    assert r.status == "tampered"
    assert [(p.line, p.kind, p.seq) for p in r.problems] == [(i + 1, "edited", 1500)]


def test_drop_one_record_inside_a_block(run: RunReader) -> None:
    lines = _lines(run.events_path)
    i = _line_of_seq(lines, 1500)
    del lines[i]
    _put(run.events_path, lines)
    first = verify_run(run.dir).first_problem
    assert first is not None and (first.line, first.kind) == (i + 1, "deleted")
    assert "seq 1500 missing" in first.message


def test_swap_two_records_inside_a_block(run: RunReader) -> None:
    lines = _lines(run.events_path)
    i = _line_of_seq(lines, 100)
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    _put(run.events_path, lines)
    r = verify_run(run.dir)
    assert [(p.line, p.kind) for p in r.problems] == [(i + 1, "reordered")]


def test_insert_one_record_inside_a_block(run: RunReader) -> None:
    lines = _lines(run.events_path)
    i = _line_of_seq(lines, 2100)
    lines.insert(i, lines[i].replace(b"/ws/src/", b"/etc/"))
    _put(run.events_path, lines)
    first = verify_run(run.dir).first_problem
    assert first is not None and (first.line, first.kind) == (i + 1, "inserted")


def test_move_a_record_to_another_block(run: RunReader) -> None:
    lines = _lines(run.events_path)
    i = _line_of_seq(lines, 10)
    moved = lines.pop(i)
    lines.insert(_line_of_seq(lines, 1500), moved)
    _put(run.events_path, lines)
    r = verify_run(run.dir)
    assert r.status == "tampered"
    assert {p.kind for p in r.problems} == {"deleted", "inserted"}


def test_a_changed_seal_value_is_found(run: RunReader) -> None:
    lines = _lines(run.events_path)
    lines[BLOCK_RECORDS] = lines[BLOCK_RECORDS].replace(b'"chain":"', b'"chain":"0')[:-3] + b'"}}\n'
    _put(run.events_path, lines)
    r = verify_run(run.dir)
    assert r.status == "tampered"


def _reseal(run: RunReader, lines: list[bytes]) -> str:
    """What an attacker with write access does after the run: seal every block again, consistently."""
    out: list[bytes] = []
    head = genesis(run.id, "events")
    block: list[bytes] = []
    for ln in lines:
        if is_seal(ln):
            head = block_link(head, b"".join(block))
            out += [*block, seal_line(head, [b.rstrip(b"\n") for b in block])]
            block = []
        else:
            block.append(ln)
    _put(run.events_path, out)
    return head


def test_a_consistent_resealing_after_the_run_is_caught_by_the_anchor(run: RunReader) -> None:
    lines = _lines(run.events_path)
    del lines[_line_of_seq(lines, 1500)]  # drop the incriminating record, then cover the tracks
    head = _reseal(run, lines)
    cp_path = run.dir / "evidence" / "checkpoint.json"
    cp = json.loads(cp_path.read_text())
    cp["events"], cp["events_head"] = N - 1, head
    cp_path.write_text(json.dumps(cp))
    assert verify_run(run.dir).status == "verified"  # self-consistent inside the run directory
    anchor = run.meta.extra["anchor"]
    r = verify_run(run.dir, anchors=[("index", anchor)])
    assert r.status == "tampered" and r.anchor is not None and r.anchor["matches"] is False


def test_resealing_without_a_new_checkpoint_is_forged(run: RunReader) -> None:
    lines = _lines(run.events_path)
    i = _line_of_seq(lines, 1500)
    lines[i] = lines[i].replace(b"f1499", b"zzzzz")
    _reseal(run, lines)
    first = verify_run(run.dir).first_problem
    assert first is not None and (first.where, first.kind) == ("checkpoint", "forged")


def test_a_record_appended_without_a_seal_after_the_final_checkpoint(run: RunReader) -> None:
    lines = _lines(run.events_path)
    lines.append(lines[-2].replace(b'"seq":%d,' % N, b'"seq":%d,' % (N + 1)))
    _put(run.events_path, lines)
    first = verify_run(run.dir).first_problem
    assert first is not None and (first.line, first.kind) == (len(lines), "appended")


def test_flushes_seal_small_blocks_and_the_run_verifies(make_run: MakeRun, tmp_path: Path) -> None:
    """Benign twin: a slow run seals a block at every flush; all of it verifies, and the reader skips seals."""
    from spyglass.pipeline import Pipeline, RunContext
    from spyglass.store import RunMeta, RunWriter, Store, new_run_id

    store = Store(tmp_path / "s", create=True)
    meta = RunMeta(id=new_run_id(), command=["x"], cwd="/ws", workspace=["/ws"], started=1)
    w = RunWriter(store, meta, flush_interval=3600)
    p = Pipeline([w], RunContext(run_id=meta.id))
    for i in range(30):
        p.feed(ev("file.read", path=f"/ws/{i}"))
        if i % 7 == 0:
            w.flush()
    w.finish()
    reader = RunReader(store, meta.id)
    seals = [ln for ln in _lines(reader.events_path) if is_seal(ln)]
    assert len(seals) == 6 and all(parse_seal(s.rstrip(b"\n")) is not None for s in seals)
    assert [e.seq for e in reader.events()] == list(range(1, 31))
    assert verify_run(reader.dir).status == "verified"


def test_a_run_recorded_before_block_sealing_still_verifies(run: RunReader) -> None:
    """Older runs: one chain value per line and no events_format in the checkpoint."""
    from spyglass.events.codec import decode_event, encode_canonical
    from spyglass.store.chain import Chain

    chain = Chain(run.id, "events")
    old = [chain.add(encode_canonical(decode_event(ln))) + b"\n" for ln in _lines(run.events_path) if not is_seal(ln)]
    _put(run.events_path, old)
    cp_path = run.dir / "evidence" / "checkpoint.json"
    cp = json.loads(cp_path.read_text())
    del cp["events_format"]
    cp["events_head"] = chain.head
    cp_path.write_text(json.dumps(cp))
    assert verify_run(run.dir).status == "verified"
    assert [e.seq for e in run.events()][:3] == [1, 2, 3]
    old[41] = old[41].replace(b"f41.py", b"f41.pz")
    _put(run.events_path, old)
    first = verify_run(run.dir).first_problem
    assert first is not None and (first.line, first.kind) == (42, "edited")


def test_a_file_larger_than_one_read_verifies_and_an_edit_past_it_is_named(make_run: MakeRun) -> None:
    """Blocks that straddle the verifier's 4 MiB reads are found whole."""
    long = "/ws/" + "d" * 300
    big = make_run([ev("file.read", 100, path=f"{long}/f{i}.py") for i in range(14_000)], flush_interval=3600)
    assert big.events_path.stat().st_size > 4 << 20
    assert verify_run(big.dir).status == "verified"
    lines = _lines(big.events_path)
    i = _line_of_seq(lines, 13_000)
    lines[i] = lines[i].replace(b"/f12999.py", b"/f12999.pz")
    _put(big.events_path, lines)
    r = verify_run(big.dir)
    assert [(p.line, p.kind) for p in r.problems] == [(i + 1, "edited")]
