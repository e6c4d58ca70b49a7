"""An agent floods the eBPF alert ring with opens that are no alert, to push a secret read
behind its burst.

An ``O_PATH`` open of a secret reaches the secret's inode (the program's ``urgent`` map)
but reads nothing and raises nothing; had it gone to the small alert ring, a silent flood
of them would keep that ring full, and the real read that follows would wait in the events
ring behind the burst instead of being decided ahead.  The program leaves ``O_PATH`` opens
on the events ring.  Real runs under the real program (root; skipped with the reason
elsewhere); no timing assertion: what the look-ahead saw is counted by the fast lane.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.capture.ebpf.test_ebpf_lookout import Witness
from tests.rules.conftest import make_home

FLOOD = 3000

#: ``n`` O_PATH opens of the secret, then (``read`` = 1) one real read of it
AGENT = r"""
import os, sys
key, n, read = os.path.expanduser(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
for _ in range(n):
    os.close(os.open(key, os.O_PATH))
if read:
    with open(key) as f:
        f.read()
"""


def _run(tmp_path: Path, read: bool) -> tuple[Any, Witness]:
    from spyglass.capture import get_backend
    from spyglass.policy import load_policy
    from spyglass.policy.defaults import SECRET_EXCEPTIONS
    from spyglass.rules import build_sinks
    from spyglass.session.record import RunRequest, record
    from spyglass.store import Store
    from spyglass.witness.guard import Protected
    from spyglass.witness.identities import protected_ids

    ws = tmp_path / "ws"
    ws.mkdir()
    home = make_home(tmp_path)
    (ws / "agent.py").write_text(AGENT)
    policy = load_policy(None, ws)
    sinks = build_sinks(policy, home=str(home), stream=io.StringIO())
    engine = sinks[0]
    witness = Witness(engine)
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONDONTWRITEBYTECODE": "1"}
    ids = protected_ids(Protected(), policy.secret_globs, SECRET_EXCEPTIONS, str(home))
    record(
        RunRequest(argv=[sys.executable, str(ws / "agent.py"), "~/.ssh/id_rsa", str(FLOOD), "1" if read else "0"],
                   cwd=str(ws), env=env, workspace=[str(ws)], mode=policy.mode, extra={"home": str(home)},
                   backend_options={"protected_ids": ids}),
        get_backend("ebpf"), Store(tmp_path / "store", create=True), [*sinks, witness],
    )
    return engine, witness


@pytest.mark.usefixtures("need_ebpf")
def test_a_flood_of_o_path_opens_of_a_secret_stays_off_the_alert_ring(tmp_path: Path) -> None:
    engine, witness = _run(tmp_path, read=True)
    lane = engine.lane
    # the look-ahead saw the lifecycle records and the one read, not the flood
    assert lane.peeks < FLOOD // 2, lane.peeks
    announced = [a for a in witness.announced if a["rule"] == "cred-secret-read"]
    assert len(announced) == 1 and announced[0]["peek_hits"] == 1  # the read was decided ahead
    assert len([a for a in engine.alerts if a.rule_id == "cred-secret-read"]) == 1


@pytest.mark.usefixtures("need_ebpf")
def test_benign_twin_o_path_opens_of_a_secret_alone_are_silent(tmp_path: Path) -> None:
    engine, witness = _run(tmp_path, read=False)
    assert not [a for a in witness.announced if a["rule"] == "cred-secret-read"]
    assert not [a for a in engine.alerts if a.rule_id == "cred-secret-read"]
    assert engine.lane.peek_hits == 0
