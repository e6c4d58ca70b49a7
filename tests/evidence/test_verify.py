"""Tampering with a stored run is detected, and the first bad record is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evidence_helpers import MakeRun, ev

from spyglass.errors import EXIT_INCOMPLETE, EXIT_OK, EXIT_TAMPERED
from spyglass.events import Alert
from spyglass.evidence.keys import generate_keypair, load_public_key_raw, make_signer
from spyglass.evidence.verify import verify_run
from spyglass.store import RunReader
from spyglass.store.chain import block_link, genesis, seal_line


def _events(n: int = 20) -> list:
    return [ev("file.read", 100 + i % 3, path=f"/ws/file{i}.txt") for i in range(n)]


@pytest.fixture
def run(make_run: MakeRun) -> RunReader:
    alerts = [
        Alert(rule_id="r1", title="t1", level="high", event_seqs=[3]),
        Alert(rule_id="r2", title="t2", level="low", event_seqs=[7]),
    ]
    return make_run(_events(), alerts)


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _put(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(lines))


def test_untouched_run_verifies(run: RunReader) -> None:
    r = verify_run(run.dir)
    assert r.status == "verified" and r.exit_code == EXIT_OK
    assert r.problems == []
    assert r.streams["events"].records == 20 and r.streams["alerts"].records == 2


def test_edit_one_byte_is_found_at_its_record(run: RunReader) -> None:
    lines = _lines(run.events_path)
    lines[4] = lines[4].replace(b"file4.txt", b"file4.txu")
    _put(run.events_path, lines)
    r = verify_run(run.dir)
    assert r.status == "tampered" and r.exit_code == EXIT_TAMPERED
    first = r.first_problem
    assert first is not None and (first.where, first.line, first.kind) == ("events", 5, "edited")
    assert first.seq == 5


def test_delete_a_line(run: RunReader) -> None:
    lines = _lines(run.events_path)
    del lines[4]
    _put(run.events_path, lines)
    r = verify_run(run.dir)
    first = r.first_problem
    assert r.status == "tampered"
    assert first is not None and (first.line, first.kind) == (5, "deleted")
    assert "seq 5 missing" in first.message


def test_insert_a_forged_line(run: RunReader) -> None:
    lines = _lines(run.events_path)
    lines.insert(4, lines[3].replace(b"file3", b"evil"))
    _put(run.events_path, lines)
    first = verify_run(run.dir).first_problem
    assert first is not None and (first.line, first.kind) == (5, "inserted")


def test_insert_a_forged_line_and_rewrite_the_seals_crcs(run: RunReader) -> None:
    """The CRCs are no defence: the chain value still breaks, and the repeated seq names the line."""
    from spyglass.store.chain import parse_seal

    lines = _lines(run.events_path)
    lines.insert(4, lines[3].replace(b"file3", b"evil"))
    records = [ln.rstrip(b"\n") for ln in lines[:-1]]
    old = parse_seal(lines[-1].rstrip(b"\n"))
    assert old is not None
    lines[-1] = seal_line(old.chain, records)
    _put(run.events_path, lines)
    first = verify_run(run.dir).first_problem
    assert first is not None and (first.line, first.kind) == (5, "inserted")


def test_swap_two_lines(run: RunReader) -> None:
    lines = _lines(run.events_path)
    lines[4], lines[5] = lines[5], lines[4]
    _put(run.events_path, lines)
    r = verify_run(run.dir)
    first = r.first_problem
    assert first is not None and (first.line, first.kind) == (5, "reordered")
    assert len([p for p in r.problems if p.where == "events"]) == 1


def test_truncate_the_tail(run: RunReader) -> None:
    _put(run.events_path, _lines(run.events_path)[:17])
    r = verify_run(run.dir)
    first = r.first_problem
    assert r.status == "tampered"
    assert first is not None and (first.line, first.kind) == (18, "truncated")
    assert "3 record(s) missing" in first.message


def test_truncate_mid_line(run: RunReader) -> None:
    data = run.events_path.read_bytes()
    run.events_path.write_bytes(data[:-40])
    r = verify_run(run.dir)
    assert r.status == "tampered"
    lines = sorted(p.line for p in r.problems if p.line is not None)
    assert lines[0] == 21  # the seal line after the 20 records


def test_lines_appended_after_the_final_checkpoint(run: RunReader) -> None:
    from spyglass.store.chain import parse_seal

    lines = _lines(run.events_path)
    seal = parse_seal(lines[-1].rstrip(b"\n"))
    assert seal is not None
    extra = lines[-2].rstrip(b"\n").replace(b'"seq":20', b'"seq":21')
    lines += [extra + b"\n", seal_line(block_link(seal.chain, extra + b"\n"), [extra])]
    _put(run.events_path, lines)
    first = verify_run(run.dir).first_problem
    assert first is not None and (first.line, first.kind) == (22, "appended")


def test_alert_stream_is_checked_too(run: RunReader) -> None:
    lines = _lines(run.alerts_path)
    lines[1] = lines[1].replace(b'"level":"low"', b'"level":"info"')
    _put(run.alerts_path, lines)
    first = verify_run(run.dir).first_problem
    assert first is not None and (first.where, first.line) == ("alerts", 2)


def test_deleting_every_alert_is_truncation(run: RunReader) -> None:
    run.alerts_path.write_bytes(b"")
    first = verify_run(run.dir).first_problem
    assert first is not None and (first.where, first.kind, first.line) == ("alerts", "truncated", 1)


def _cp_path(run: RunReader) -> Path:
    return run.dir / "evidence" / "checkpoint.json"


def test_replaced_checkpoint_is_detected(run: RunReader) -> None:
    cp = json.loads(_cp_path(run).read_text())
    cp["events_head"] = "ab" * 32
    _cp_path(run).write_text(json.dumps(cp))
    r = verify_run(run.dir)
    first = r.first_problem
    assert r.status == "tampered"
    assert first is not None and (first.where, first.kind) == ("checkpoint", "forged")


def test_truncation_with_a_matching_forged_count_is_detected(run: RunReader) -> None:
    _put(run.events_path, _lines(run.events_path)[:15])
    cp = json.loads(_cp_path(run).read_text())
    cp["events"] = 15
    _cp_path(run).write_text(json.dumps(cp))
    r = verify_run(run.dir)
    first = r.first_problem
    assert r.status == "tampered"  # the 15 records left have no seal
    assert first is not None and (first.where, first.kind, first.line) == ("events", "unsealed", 15)


def test_checkpoint_of_another_run(run: RunReader, make_run: MakeRun) -> None:
    other = make_run(_events())
    _cp_path(run).write_bytes(_cp_path(other).read_bytes())
    r = verify_run(run.dir)
    assert r.status == "tampered"
    assert any(p.where == "checkpoint" and "belongs to run" in p.message for p in r.problems)


def test_missing_checkpoint_of_a_finished_run_is_tampering(run: RunReader) -> None:
    _cp_path(run).unlink()
    r = verify_run(run.dir)
    assert r.status == "tampered"
    assert r.first_problem is not None and r.first_problem.kind == "missing"


def test_unfinished_run_is_incomplete(make_run: MakeRun) -> None:
    run = make_run(_events(), finish=False)
    r = verify_run(run.dir)
    assert r.status == "incomplete" and r.exit_code == EXIT_INCOMPLETE
    assert r.streams["events"].records == 20


def test_unfinished_run_with_a_cut_line_is_incomplete_not_tampered(make_run: MakeRun) -> None:
    run = make_run(_events(), finish=False)
    data = run.events_path.read_bytes()
    run.events_path.write_bytes(data[:-30])
    r = verify_run(run.dir)
    assert r.status == "incomplete"
    assert [p.kind for p in r.problems if p.where == "events"] == ["cut-short"]


def test_edited_run_metadata(run: RunReader) -> None:
    meta = json.loads((run.dir / "run.json").read_text())
    meta["command"] = ["something", "else"]
    (run.dir / "run.json").write_text(json.dumps(meta))
    r = verify_run(run.dir)
    assert r.status == "tampered"
    assert r.first_problem is not None and r.first_problem.where == "run.json"


def test_repair_bookkeeping_does_not_break_verification(run: RunReader) -> None:
    meta = json.loads((run.dir / "run.json").read_text())
    meta["counts"] = {"events": 20}  # counts are bookkeeping the index repair may rewrite
    (run.dir / "run.json").write_text(json.dumps(meta))
    assert verify_run(run.dir).status == "verified"


def test_edited_outcome_in_run_json_is_tampering(run: RunReader) -> None:
    meta = json.loads((run.dir / "run.json").read_text())
    meta["exit_code"] = 0 if meta.get("exit_code") else 1
    (run.dir / "run.json").write_text(json.dumps(meta))
    assert verify_run(run.dir).status == "tampered"


# -- signatures ------------------------------------------------------------------
def test_signed_run_verifies_with_its_key_and_fails_with_another(make_run: MakeRun, tmp_path: Path) -> None:
    good = generate_keypair(tmp_path / "k1")
    other = generate_keypair(tmp_path / "k2")
    run = make_run(_events(), signer=make_signer(good.private))
    r = verify_run(run.dir, pubkey_raw=load_public_key_raw(good.public))
    assert r.status == "verified"
    assert r.signature is not None and r.signature["valid"] and r.signature["pinned"]
    bad = verify_run(run.dir, pubkey_raw=load_public_key_raw(other.public))
    assert bad.status == "tampered"
    assert bad.first_problem is not None and bad.first_problem.kind == "signature"
    assert other.fingerprint in bad.first_problem.message


def test_signed_run_without_pubkey_notes_the_unpinned_key(make_run: MakeRun, tmp_path: Path) -> None:
    keys = generate_keypair(tmp_path / "k")
    run = make_run(_events(), signer=make_signer(keys.private))
    r = verify_run(run.dir)
    assert r.status == "verified"
    assert any("--pubkey" in n for n in r.notes)


def test_resigned_forged_checkpoint_fails_against_the_trusted_key(make_run: MakeRun, tmp_path: Path) -> None:
    """A forger who rewrites the checkpoint and signs it with their own key is caught by --pubkey."""
    from spyglass.evidence.verify import checkpoint_signed_bytes

    good = generate_keypair(tmp_path / "good")
    forger = generate_keypair(tmp_path / "forger")
    run = make_run(_events(), signer=make_signer(good.private))
    kept = _lines(run.events_path)[:10]
    head = block_link(genesis(run.id, "events"), b"".join(kept))
    _put(run.events_path, [*kept, seal_line(head, [ln.rstrip(b"\n") for ln in kept])])
    cp = json.loads(_cp_path(run).read_text())
    cp["events"], cp["events_head"] = 10, head
    cp["signature"] = make_signer(forger.private)(checkpoint_signed_bytes(cp))
    _cp_path(run).write_text(json.dumps(cp))
    assert verify_run(run.dir).status == "verified"  # self-consistent: why --pubkey matters
    r = verify_run(run.dir, pubkey_raw=load_public_key_raw(good.public))
    assert r.status == "tampered" and r.first_problem is not None and r.first_problem.kind == "signature"


def test_edit_of_a_signed_checkpoint_breaks_the_signature(make_run: MakeRun, tmp_path: Path) -> None:
    keys = generate_keypair(tmp_path / "k")
    run = make_run(_events(), signer=make_signer(keys.private))
    cp = json.loads(_cp_path(run).read_text())
    cp["ts"] += 1
    _cp_path(run).write_text(json.dumps(cp))
    r = verify_run(run.dir, pubkey_raw=load_public_key_raw(keys.public))
    assert r.status == "tampered"
    assert any(p.kind == "signature" for p in r.problems)


def test_unsigned_run_fails_when_a_key_is_required(run: RunReader, tmp_path: Path) -> None:
    keys = generate_keypair(tmp_path / "k")
    r = verify_run(run.dir, pubkey_raw=load_public_key_raw(keys.public))
    assert r.status == "tampered" and r.first_problem is not None and r.first_problem.kind == "unsigned"


# -- the command ------------------------------------------------------------------
def test_cli_exit_codes_and_first_bad_record(spy, tmp_path: Path, store_dir: Path) -> None:  # type: ignore[no-untyped-def]
    from evidence_helpers import ev as mk

    from spyglass.pipeline import Pipeline, RunContext
    from spyglass.store import RunMeta, RunWriter, Store, new_run_id

    store = Store(store_dir, create=True)
    meta = RunMeta(id=new_run_id(), command=["x"], cwd="/ws", workspace=["/ws"], started=1)
    w = RunWriter(store, meta)
    p = Pipeline([w], RunContext(run_id=meta.id))
    for i in range(8):
        p.feed(mk("file.read", path=f"/ws/{i}"))
    w.finish()
    ok = spy("verify", meta.id)
    assert ok.exit_code == 0 and "verified" in ok.output
    events = store.run_dir(meta.id) / "events.jsonl"
    lines = _lines(events)
    lines[2], lines[3] = lines[3], lines[2]
    _put(events, lines)
    bad = spy("verify", meta.id)
    assert bad.exit_code == EXIT_TAMPERED
    assert "TAMPERED" in bad.output and "events.jsonl line 3" in bad.output
    js = spy("verify", meta.id, "--format", "json")
    data = json.loads(js.output)
    assert data["status"] == "tampered" and data["first_bad"]["line"] == 3


def test_periodic_checkpoint_of_a_run_that_died(tmp_path: Path) -> None:
    """A run killed after a periodic checkpoint: incomplete, and still truncation-checked up to it."""
    from spyglass.pipeline import Pipeline, RunContext
    from spyglass.store import RunMeta, RunWriter, Store, new_run_id

    store = Store(tmp_path / "s", create=True)
    meta = RunMeta(id=new_run_id(), command=["x"], cwd="/ws", workspace=["/ws"], started=1)
    w = RunWriter(store, meta, flush_interval=3600)
    p = Pipeline([w], RunContext(run_id=meta.id))
    for i in range(10):
        p.feed(ev("file.read", path=f"/ws/{i}"))
    w.write_checkpoint(final=False)  # what the flusher thread does every checkpoint_interval
    for i in range(5):
        p.feed(ev("file.read", path=f"/ws/late{i}"))
    w.flush()
    run_dir = store.run_dir(meta.id)
    r = verify_run(run_dir)
    assert r.status == "incomplete" and r.exit_code == EXIT_INCOMPLETE
    assert r.streams["events"].records == 15 and r.streams["events"].checkpoint_count == 10
    assert any("after the last checkpoint" in n for n in r.notes)
    events = run_dir / "events.jsonl"
    _put(events, _lines(events)[:8])
    r = verify_run(run_dir)
    assert r.status == "tampered" and r.first_problem is not None and r.first_problem.line == 9


def test_outcome_digest_and_evidence_file_digests_when_the_checkpoint_has_them(run: RunReader) -> None:
    import hashlib

    from spyglass.store.writer import outcome_digest

    (run.dir / "evidence" / "changes.json").write_text("{}\n")
    cp = json.loads(_cp_path(run).read_text())
    cp["outcome_digest"] = outcome_digest(run.meta)
    cp["evidence"] = {"changes.json": hashlib.sha256(b"{}\n").hexdigest()}
    _cp_path(run).write_text(json.dumps(cp))
    assert verify_run(run.dir).status == "verified"
    meta = json.loads((run.dir / "run.json").read_text())
    meta["exit_code"] = 1
    (run.dir / "run.json").write_text(json.dumps(meta))
    (run.dir / "evidence" / "changes.json").write_text('{"added": []}\n')
    r = verify_run(run.dir)
    assert r.status == "tampered"
    assert {(p.where, p.kind) for p in r.problems} == {
        ("run.json", "edited"),
        ("evidence/changes.json", "edited"),
    }


def test_damaged_seal_is_one_problem(run: RunReader) -> None:
    lines = _lines(run.events_path)
    lines[20] = lines[20].replace(b'"chain":"', b'"chian":"')
    _put(run.events_path, lines)
    r = verify_run(run.dir)
    assert [(p.line, p.kind) for p in r.problems if p.where == "events"] == [(21, "damaged")]
