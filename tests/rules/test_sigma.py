"""`spyglass rules import-sigma`: Linux Sigma rules converted with pySigma fire on real processes.

The fixtures (tests/rules/data/sigma/) are rules written for these tests in
SigmaHQ's format: a process_creation, a file_event and a network_connection
rule, and three that cannot be mapped (a Windows log source, a field
spyglass does not have, a keyword search).  The attack runs the three acts
under the real backend; its benign twin does the neighbouring harmless
things and stays silent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("sigma")

DATA = Path(__file__).parent / "data" / "sigma"

ATTACK = (
    'echo aGk= | base64 -d > /dev/null; '
    'touch "$WS/.sg-sigma-dropper.lock"; '
    '"$PY" -c "import socket; s = socket.socket(); s.bind((\'127.0.0.1\', 0)); s.listen(); '
    'c = socket.create_connection(s.getsockname()); c.close(); s.close()"'
)
BENIGN = (
    'echo hi | base64 > /dev/null; base64 --help > /dev/null; '
    'touch "$WS/sg-sigma-dropper.lock.txt"; '
    '"$PY" -c "import socket; s = socket.socket(); s.bind((\'127.0.0.1\', 0)); s.close()"'
)


def _import(spy: Any, out: Path) -> Any:
    res = spy("rules", "import-sigma", str(DATA), "-o", str(out))
    assert res.exit_code == 0, res.output
    return res


def test_import_lists_what_cannot_be_mapped(spy: Any, tmp_path: Path) -> None:
    res = _import(spy, tmp_path / "sigma.yaml")
    err = res.stderr
    assert "3 rule(s) converted, 3 not" in err
    assert "Windows Process With Original File Name (spyglass test fixture): not converted: log source " \
           "process_creation/windows is not mapped" in err
    assert "field 'User' has no spyglass equivalent" in err
    assert "keyword search" in err
    assert spy("rules", "lint", str(tmp_path / "sigma.yaml")).exit_code == 0
    data = json.loads(spy("rules", "import-sigma", str(DATA), "--format", "json").stdout)
    levels = {r["title"].split(" (")[0]: r["level"] for r in data["rules"]}
    assert levels["Base64 Decoding Via Base64 Utility"] == "info"  # Sigma's informational
    assert len(data["not_converted"]) == 3


def test_nothing_convertible_exits_1(spy: Any, tmp_path: Path) -> None:
    res = spy("rules", "import-sigma", str(DATA / "unmappable_sg.yml"))
    assert res.exit_code == 1 and "0 rule(s) converted, 3 not" in res.stderr


def _sigma_ids(run: Any) -> set[str]:
    return {a.title.split(" (")[0] for a in run.alerts if a.rule_id.startswith("sigma-")}


@pytest.mark.parametrize("script, expect", [
    (ATTACK, {"Base64 Decoding Via Base64 Utility", "Dropper Marker File Created",
              "Python Connects To A Loopback Service"}),
    (BENIGN, set()),
])
def test_imported_rules_fire_on_real_processes(live: Any, spy: Any, tmp_path: Path, script: str,
                                              expect: set[str]) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    _import(spy, ws / "sigma.yaml")
    run = live(script, policy_text="rules:\n  paths: [sigma.yaml]\n", workspace=ws)
    assert _sigma_ids(run) == expect, [(a.rule_id, a.message) for a in run.alerts]
