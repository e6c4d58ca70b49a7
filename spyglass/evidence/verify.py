"""Verifying a stored run: both hash chains, the checkpoint, run.json, the signature.

Per stream, see :mod:`spyglass.evidence.chaincheck`.  For the run: the
checkpoint belongs to this run, the fixed parts of ``run.json`` still hash
to the checkpoint's ``meta_digest``, the policy digest and version agree,
evidence files named in the checkpoint still hash the same, and a signature,
if there is one, is valid (for ``--pubkey`` when given).

The verdict is ``verified``, ``tampered`` or ``incomplete`` (no final
checkpoint, nothing wrong otherwise), with exit codes 0, 3 and 4.

The final checkpoint is also compared with its *anchor*, kept outside the run
directory (the store's index, the line ``spyglass run`` printed, ``verify
--anchor``): a record rewritten and consistently re-chained after the run
needs a new checkpoint, and is caught.  A run whose evidence is incomplete
(``evidence-incomplete``: a write failed, an alert was not saved, the run
directory was deleted during the run) is not ``verified``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgspec

from spyglass.errors import EXIT_INCOMPLETE, EXIT_OK, EXIT_TAMPERED
from spyglass.events.codec import encode_canonical
from spyglass.evidence.chaincheck import Problem, StreamResult, verify_stream
from spyglass.store.meta import RunMeta, decode_meta

STREAMS = ("events", "alerts")

VERIFIED, TAMPERED, INCOMPLETE = "verified", "tampered", "incomplete"
EXIT_CODES = {VERIFIED: EXIT_OK, TAMPERED: EXIT_TAMPERED, INCOMPLETE: EXIT_INCOMPLETE}

__all__ = ["Problem", "StreamResult", "VerifyResult", "checkpoint_signed_bytes", "verify_run"]


class VerifyResult(msgspec.Struct):
    run_id: str
    status: str = VERIFIED
    problems: list[Problem] = msgspec.field(default_factory=list)
    streams: dict[str, StreamResult] = msgspec.field(default_factory=dict)
    checkpoint: dict[str, Any] | None = None
    signature: dict[str, Any] | None = None  # {"valid", "pinned", "key", "problem"}
    notes: list[str] = msgspec.field(default_factory=list)
    #: {"actual", "expected", "source", "matches"}: the final checkpoint against its anchor
    anchor: dict[str, Any] | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    @property
    def first_problem(self) -> Problem | None:
        for p in self.problems:
            if p.tampered:
                return p
        return self.problems[0] if self.problems else None

    def to_dict(self) -> dict[str, Any]:
        first = self.first_problem
        return {
            "run_id": self.run_id,
            "status": self.status,
            "exit_code": self.exit_code,
            "first_bad": None if first is None else _problem_dict(first),
            "problems": [_problem_dict(p) for p in self.problems],
            "streams": {
                k: {
                    "records": s.records,
                    "linked": s.linked,
                    "checkpoint": s.checkpoint_count,
                    "head": s.head,
                }
                for k, s in self.streams.items()
            },
            "checkpoint": self.checkpoint,
            "signature": self.signature,
            "anchor": self.anchor,
            "notes": self.notes,
        }


def _problem_dict(p: Problem) -> dict[str, Any]:
    return {
        "where": p.where,
        "kind": p.kind,
        "line": p.line,
        "seq": p.seq,
        "message": p.message,
        "tampered": p.tampered,
    }


# -- the run --------------------------------------------------------------------
def _load_checkpoint(path: Path, result: VerifyResult) -> dict[str, Any] | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        cp = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        result.problems.append(Problem("checkpoint", "forged", f"checkpoint.json is not valid JSON: {exc}"))
        return {}
    if not isinstance(cp, dict):
        result.problems.append(Problem("checkpoint", "forged", "checkpoint.json is not a JSON object"))
        return {}
    return cp


def checkpoint_signed_bytes(cp: dict[str, Any]) -> bytes:
    """The bytes a checkpoint's signature covers: its canonical form with ``signature`` null."""
    return encode_canonical({**cp, "signature": None})


def _check_meta(meta: RunMeta, cp: dict[str, Any], result: VerifyResult) -> None:
    from spyglass.store.writer import meta_digest

    if cp.get("run_id") != meta.id:
        result.problems.append(
            Problem("checkpoint", "forged", f"the checkpoint belongs to run {cp.get('run_id')!r}, not {meta.id}")
        )
        return
    if cp.get("meta_digest") != meta_digest(meta):
        result.problems.append(
            Problem(
                "run.json",
                "edited",
                "run.json's fixed fields (command, cwd, workspace, task, agent, backend, mode, policy, "
                "start time, skills) differ from what the checkpoint recorded",
            )
        )
    if "policy_digest" in cp and cp.get("policy_digest") != meta.policy_digest:
        result.problems.append(Problem("run.json", "edited", "the policy digest differs from the checkpoint's"))
    if cp.get("spyglass_version") not in (None, meta.spyglass_version):
        result.problems.append(Problem("run.json", "edited", "the spyglass version differs from the checkpoint's"))
    if cp.get("outcome_digest") is not None:
        from spyglass.store import writer

        outcome_digest = getattr(writer, "outcome_digest", None)
        if outcome_digest is None:
            result.notes.append("the checkpoint has an outcome digest this version cannot check")
        elif cp["outcome_digest"] != outcome_digest(meta):
            result.problems.append(
                Problem(
                    "run.json",
                    "edited",
                    "run.json's outcome (status, exit code, signal, end time, stopped by) differs from "
                    "what the final checkpoint recorded",
                )
            )


def _check_evidence_files(run_dir: Path, cp: dict[str, Any], result: VerifyResult) -> None:
    files = cp.get("evidence")
    if not isinstance(files, dict):
        return
    for name, digest in sorted(files.items()):
        path = run_dir / "evidence" / name
        try:
            actual = _sha256_file(path)
        except OSError:
            result.problems.append(Problem(f"evidence/{name}", "deleted", "is missing"))
            continue
        if actual != digest:
            result.problems.append(Problem(f"evidence/{name}", "edited", "differs from the checkpoint's digest"))


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _check_signature(cp: dict[str, Any], pubkey_raw: bytes | None, result: VerifyResult) -> None:
    sig = cp.get("signature")
    if sig is None:
        if pubkey_raw is not None:
            result.problems.append(
                Problem("checkpoint", "unsigned", "the checkpoint is not signed, but a public key was given")
            )
            result.signature = {"valid": False, "pinned": False, "key": None, "problem": "not signed"}
        else:
            result.notes.append("the checkpoint is not signed")
        return
    from spyglass.evidence.keys import verify_signature

    if not isinstance(sig, dict) or not all(isinstance(v, str) for v in sig.values()):
        result.problems.append(Problem("checkpoint", "signature", "the signature member is malformed"))
        return
    check = verify_signature(sig, checkpoint_signed_bytes(cp), pubkey_raw)
    result.signature = {
        "valid": check.valid,
        "pinned": check.pinned,
        "key": check.key_fingerprint,
        "problem": check.problem or None,
    }
    if not check.valid:
        result.problems.append(Problem("checkpoint", "signature", check.problem))
    elif not check.pinned:
        result.notes.append(
            f"signed by key {check.key_fingerprint}; the key was not checked against a trusted one (pass --pubkey FILE)"
        )


def _check_anchor(cp: dict[str, Any], anchors: list[tuple[str, str]], result: VerifyResult) -> None:
    """The final checkpoint must be the one anchored outside the run directory at the end of the run."""
    from spyglass.store.chain import checkpoint_anchor

    actual = checkpoint_anchor(cp)
    result.anchor = {"actual": actual, "expected": None, "source": None, "matches": None}
    if not anchors:
        result.notes.append("no anchor recorded for this run: a consistent re-chaining could go unnoticed")
        return
    for source, expected in anchors:
        ok = expected == actual
        result.anchor.update(expected=expected, source=source, matches=ok)
        if not ok:
            result.problems.append(
                Problem(
                    "checkpoint",
                    "re-chained",
                    f"the final checkpoint is not the one anchored at the end of the run ({source}: "
                    f"{expected}, now {actual}): the record was rewritten after the run",
                )
            )
            return


def verify_run(
    run_dir: Path,
    *,
    pubkey_raw: bytes | None = None,
    meta: RunMeta | None = None,
    anchors: list[tuple[str, str]] | None = None,
) -> VerifyResult:
    """Verify the run stored in ``run_dir`` (``runs/<id>``); ``anchors``: (where it was kept, anchor)."""
    if meta is None:
        meta = decode_meta((run_dir / "run.json").read_bytes())
    result = VerifyResult(meta.id)
    cp = _load_checkpoint(run_dir / "evidence" / "checkpoint.json", result)
    result.checkpoint = cp
    usable = cp if cp else None
    if usable is not None:
        _check_meta(meta, usable, result)
        _check_signature(usable, pubkey_raw, result)
        _check_evidence_files(run_dir, usable, result)
    for stream in STREAMS:
        check = verify_stream(stream, run_dir / f"{stream}.jsonl", meta.id, usable)
        result.streams[stream] = check.result
        result.problems.extend(check.problems)
        result.notes.extend(check.notes)
    if meta.status == "monitor-lost":
        result.problems.append(
            Problem(
                "run",
                "monitor-lost",
                "monitor lost: the tracer stopped while the run went on; what its processes did next is unrecorded",
                tampered=False,
            )
        )
    lost = (meta.capture or {}).get("lost") or 0
    if isinstance(lost, int) and lost > 0:
        kinds = [n for n in (meta.capture or {}).get("notes") or [] if "lost" in str(n)]
        result.notes.append(
            f"the capture ({meta.backend}) lost {lost} kernel record(s): the chain is intact, the record has gaps"
            + (f" ({kinds[0]})" if kinds else "")
        )
    if cp is None:
        # spyglass killed before its first checkpoint: the run is unfinished, whether the next command
        # found it dead (incomplete) or the capture's watchdog said so (monitor-lost with its note)
        killed = meta.status == "monitor-lost" and "monitor_lost" in meta.extra
        if meta.status in ("running", "incomplete") or killed:
            result.problems.append(
                Problem(
                    "checkpoint",
                    "missing",
                    "no checkpoint: the run never finished (records are chain-checked only)",
                    tampered=False,
                )
            )
        else:
            result.problems.append(
                Problem(
                    "checkpoint",
                    "missing",
                    f"checkpoint.json is missing, though run.json says the run ended ({meta.status})",
                )
            )
    elif usable is not None and usable.get("final"):
        _check_anchor(usable, list(anchors or []), result)
    elif usable is not None and not usable.get("final"):
        result.problems.append(
            Problem(
                "checkpoint",
                "not-final",
                "only a periodic checkpoint: the run has no final checkpoint",
                tampered=False,
            )
        )
    if meta.status == "evidence-incomplete":
        why = "; ".join(meta.extra.get("evidence_failures") or [])
        rd = meta.extra.get("run_dir")
        if isinstance(rd, dict):
            why = "; ".join(x for x in (why, str(rd.get("problem"))) if x)
        unsaved = meta.extra.get("unsaved_alerts") or []
        if unsaved:
            why = "; ".join(x for x in (why, f"{len(unsaved)} alert(s) not saved") if x)
        result.problems.append(
            Problem("run", "evidence-incomplete", f"the evidence is incomplete: {why or 'see run.json'}",
                    tampered=False)
        )
    if any(p.tampered for p in result.problems):
        result.status = TAMPERED
    elif result.problems:
        result.status = INCOMPLETE
    return result
