"""The eBPF fast lane's look-ahead: a secret read during a burst of new files is decided from
the alert ring, before the in-order stream reaches it, and recorded once, in order.

Real runs under the real program (root; skipped with the reason elsewhere).  No timing
assertion: "decided ahead" is the mechanism's own mark (the lane's ``peek_hits`` when the
alert was announced) and a condition on order (the in-order lane had not reached the event).
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.capture.burst import AGENT, Witness
from tests.rules.conftest import make_home

BURST = 4000
KILL_BOUND = 100_000



def _run(tmp_path: Path, key: str, policy_text: str | None = None, n: int = BURST,
         at: int | None = None) -> tuple[Any, Any, Witness, Any]:
    from spyglass.capture import get_backend
    from spyglass.policy import load_policy
    from spyglass.policy.defaults import SECRET_EXCEPTIONS
    from spyglass.rules import build_sinks
    from spyglass.session.record import RunRequest, record
    from spyglass.store import RunReader, Store
    from spyglass.witness.guard import Protected
    from spyglass.witness.identities import protected_ids

    ws = tmp_path / "ws"
    ws.mkdir()
    home = make_home(tmp_path)
    (ws / "agent.py").write_text(AGENT)
    policy_path = None
    if policy_text is not None:
        policy_path = ws / "spyglass.yaml"
        policy_path.write_text(policy_text)
    policy = load_policy(policy_path, ws)
    sinks = build_sinks(policy, home=str(home), stream=io.StringIO())
    engine = sinks[0]
    witness = Witness(engine)
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONDONTWRITEBYTECODE": "1"}
    store = Store(tmp_path / "store", create=True)
    # as `spyglass run` does: the secrets that exist, by device and inode (the program's urgent map)
    ids = protected_ids(Protected(), policy.secret_globs, SECRET_EXCEPTIONS, str(home))
    outcome = record(
        RunRequest(argv=[sys.executable, str(ws / "agent.py"), str(n), str(ws / "burst"), key,
                         str(n // 2 if at is None else at)], cwd=str(ws), env=env, workspace=[str(ws)],
                   mode=policy.mode, extra={"home": str(home)}, backend_options={"protected_ids": ids}),
        get_backend("ebpf"), store, [*sinks, witness],
    )
    return outcome, engine, witness, RunReader(Store(tmp_path / "store"), outcome.meta.id)


@pytest.mark.usefixtures("need_ebpf")
def test_a_secret_read_in_a_burst_is_decided_from_the_alert_ring_and_recorded_once_in_order(tmp_path: Path) -> None:
    outcome, engine, witness, reader = _run(tmp_path, "~/.ssh/id_rsa")
    assert len(list((tmp_path / "ws" / "burst").iterdir())) == BURST  # the burst ran to its end
    announced = [a for a in witness.announced if a["rule"] == "cred-secret-read"]
    assert len(announced) == 1
    # decided by the look-ahead (the alert ring), not when the in-order stream reached the read
    assert announced[0]["peek_hits"] == 1
    recorded = [a for a in engine.alerts if a.rule_id == "cred-secret-read"]
    assert len(recorded) == 1 and recorded[0].pid == announced[0]["pid"]
    seq = recorded[0].event_seqs[0]
    assert announced[0]["seq"] < seq  # ... while its event had not reached the pipeline
    stored = [a for a in reader.alerts() if a.rule_id == "cred-secret-read"]
    assert len(stored) == 1 and stored[0].event_seqs == [seq]
    # the stream keeps its order: the reader's start before its read, its exit after
    events = list(reader.events())
    mine = [e for e in events if e.pid == recorded[0].pid]
    kinds = [e.type for e in mine]
    assert kinds[0] == "process.start" and kinds[-1] == "process.exit"
    assert next(e for e in mine if e.seq == seq).path.endswith("/.ssh/id_rsa")
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    assert outcome.meta.capture.get("lost", 0) == 0


@pytest.mark.usefixtures("need_ebpf")
def test_a_kill_rule_stops_the_agent_from_the_look_ahead_during_the_burst(tmp_path: Path) -> None:
    policy = "mode: enforce\nrules:\n  overrides:\n    cred-secret-read: {action: kill}\n"
    outcome, engine, witness, _reader = _run(tmp_path, "~/.ssh/id_rsa", policy, n=KILL_BOUND, at=1000)
    assert engine.stopped_by == "cred-secret-read"
    announced = [a for a in witness.announced if a["rule"] == "cred-secret-read"]
    assert len(announced) == 1 and announced[0]["peek_hits"] == 1
    # killed during the burst: the burster never finished
    assert len(list((tmp_path / "ws" / "burst").iterdir())) < KILL_BOUND
    assert outcome.capture.signal == "SIGKILL"


@pytest.mark.usefixtures("need_ebpf")
def test_benign_twin_reading_no_secret_during_the_burst_is_silent(tmp_path: Path) -> None:
    _outcome, engine, witness, _reader = _run(tmp_path, "~/.bashrc", n=1000)
    assert not [a for a in witness.announced if a["rule"] == "cred-secret-read"]
    assert not [a for a in engine.alerts if a.rule_id == "cred-secret-read"]
    lane = engine.lane
    assert lane.peek_hits == 0
    assert lane.peeks > 0  # the look-ahead ran (the lifecycle records), and found nothing
