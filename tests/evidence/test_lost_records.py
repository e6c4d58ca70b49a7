"""A run whose capture lost kernel records does not pass `evidence-verified` (the default gate set).

A flood of opens can fill the eBPF ring and hide the one read that matters, but how much a flood
loses depends on the machine's load and on the ring's throughput, so it cannot be provoked reliably
in a test.  Here a real process runs under the real default backend, and the loss is reported through
the capture interface itself: the session's ``result().lost`` is set as a backend sets it after
counting its dropped records (``spyglass/capture/ebpf/session.py``).  Everything after that (the
store, run.json, verify, the gate) is the real path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spyglass.capture import get_backend
from spyglass.capture.base import CaptureResult, LaunchSpec
from spyglass.evidence.gate import DEFAULT_REQUIREMENTS, run_gate
from spyglass.evidence.verify import verify_run
from spyglass.session.record import RunRequest, record
from spyglass.store import RunReader, Store


class _LossySession:
    """A live session whose result reports ``lost`` dropped records."""

    def __init__(self, inner: Any, lost: int) -> None:
        self._inner, self._lost = inner, lost

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def lost_events(self) -> int:
        return int(self._inner.lost_events) + self._lost

    def result(self) -> CaptureResult:
        res: CaptureResult = self._inner.result()
        res.lost += self._lost
        res.notes.append(f"{self._lost} record(s) lost (ring full): file {self._lost}")
        return res


class _LossyBackend:
    def __init__(self, lost: int) -> None:
        self._inner, self._lost = get_backend("auto"), lost
        self.name = self._inner.name

    def status(self) -> Any:
        return self._inner.status()

    def start(self, spec: LaunchSpec) -> Any:
        return _LossySession(self._inner.start(spec), self._lost)


def _record(tmp_path: Path, backend: Any) -> RunReader:
    ws = tmp_path / "ws"
    ws.mkdir()
    store = Store(tmp_path / "store", create=True)
    req = RunRequest(argv=["/bin/sh", "-c", "echo hi > out.txt; cat out.txt >/dev/null"], cwd=str(ws),
                     workspace=[str(ws)])
    out = record(req, backend, store)
    return RunReader(store, out.meta.id)


def _evidence_outcome(run: RunReader) -> Any:
    res = run_gate(run, list(DEFAULT_REQUIREMENTS))
    return next(o for o in res.outcomes if o.name == "evidence-verified")


def test_a_run_that_lost_records_fails_evidence_verified(tmp_path: Path) -> None:
    run = _record(tmp_path, _LossyBackend(417))
    assert run.meta.capture["lost"] >= 417
    assert verify_run(run.dir, meta=run.meta).status == "verified"  # the chain itself is intact
    assert "evidence-verified" in DEFAULT_REQUIREMENTS
    out = _evidence_outcome(run)
    assert out.status == "fail", out.summary
    assert "lost" in out.summary and "gaps" in out.summary


def test_the_same_run_without_loss_passes(tmp_path: Path) -> None:
    run = _record(tmp_path, get_backend("auto"))
    assert not run.meta.capture.get("lost")
    out = _evidence_outcome(run)
    assert out.status == "pass", out.summary
