"""Acceptance over real processes: an agent (a shell script) edits a tiny pytest project
and runs ``python -m pytest -q`` under the strace backend, with workspace evidence on."""

from __future__ import annotations

import json
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from spyglass.evidence.claims import parse_claims
from spyglass.evidence.gate import run_gate
from spyglass.evidence.keys import generate_keypair, load_public_key_raw, make_signer
from spyglass.evidence.verify import verify_run
from spyglass.evidence.workspace import WorkspaceEvidence, load_workspace_changes
from spyglass.store import RunReader, Store

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")

PY = sys.executable

PROJECT = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "notes.txt": "todo: fix add\n",
    "README.md": "calc\n",
}

FIX = 'printf "def add(a, b):\\n    return a + b\\n" > calc.py\n'
TESTS = f'"{PY}" -m pytest -q -p no:cacheprovider >/dev/null 2>&1 || true\n'
MORE_TESTS = 'printf "\\n\\ndef test_add_zero():\\n    assert add(0, 0) == 0\\n" >> test_calc.py\n'
CHANGES = "echo 'fixed add' > CHANGELOG.md\nrm notes.txt\n"

GOOD_AGENT = FIX + MORE_TESTS + CHANGES + f'"{PY}" -m pytest -q\n'
EDIT_AFTER_TESTS = FIX + f'"{PY}" -m pytest -q\n' + "echo '# tweak' >> calc.py\n"
NO_TESTS = FIX


def _project(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir()
    for rel, text in PROJECT.items():
        (ws / rel).write_text(text)
    return ws


def _record(tmp_path: Path, script: str, *, signer=None) -> RunReader:  # type: ignore[no-untyped-def]
    from spyglass.capture import get_backend
    from spyglass.session.record import RunRequest, record

    ws = _project(tmp_path)
    (tmp_path / "agent.sh").write_text("set -e\n" + script)
    store = Store(tmp_path / "store", create=True)
    req = RunRequest(argv=["sh", str(tmp_path / "agent.sh")], cwd=str(ws), workspace=[str(ws)])
    # hashes before the agent starts: these agents edit at once, and the test checks exact diffs
    outcome = record(req, get_backend("strace"), store, [WorkspaceEvidence(background_hash=False)], signer=signer)
    return RunReader(store, outcome.meta.id)


ALL = ["tests-passed-after-last-edit", "workspace-changed", "evidence-verified", "no-alerts-at-or-above=high"]


def test_agent_that_tests_after_its_last_edit_passes_and_the_diff_is_exact(tmp_path: Path) -> None:
    run = _record(tmp_path, GOOD_AGENT)
    assert run.meta.exit_code == 0
    res = run_gate(run, ALL)
    assert [o.status for o in res.outcomes] == ["pass"] * 4, [o.summary for o in res.outcomes]
    tests = res.outcomes[0]
    assert any(c.endswith("-m pytest -q") for c in tests.evidence.commands)
    (t,) = res.facts["test_runs"]
    assert t["exit_code"] == 0 and t["after_last_edit"] is True
    assert res.facts["last_edit"]["path"].endswith("/ws/notes.txt")  # rm is the last edit
    ch = load_workspace_changes(run.dir)
    assert ch is not None
    assert [c.path for c in ch.added] == ["CHANGELOG.md"]
    assert [c.path for c in ch.removed] == ["notes.txt"]
    assert [c.path for c in ch.modified] == ["calc.py", "test_calc.py"]
    calc = ch.modified[0]
    assert calc.diff == (
        "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n"
        " def add(a, b):\n-    return a - b\n+    return a + b\n"
    )
    assert "+def test_add_zero():" in (ch.modified[1].diff or "")
    # the claim that matches the record holds
    claims = parse_claims(
        json.dumps(
            {
                "tests_passed": True,
                "files_changed": ["calc.py", "test_calc.py"],
                "files_created": ["CHANGELOG.md"],
                "files_deleted": ["notes.txt"],
                "commands_run": [f"{PY} -m pytest -q"],
            }
        )
    )
    res = run_gate(run, [], claims=claims)
    assert res.passed, [(o.name, o.summary) for o in res.outcomes]


def test_agent_that_edits_after_its_last_test_run_fails(tmp_path: Path, spy, store_dir: Path) -> None:  # type: ignore[no-untyped-def]
    run = _record(tmp_path, EDIT_AFTER_TESTS)
    o = run_gate(run, ["tests-passed-after-last-edit"]).outcomes[0]
    assert o.status == "fail"
    assert "calc.py) after the last test run" in o.summary
    # the same through the command (same store), JUnit for CI
    assert run.store.root == store_dir
    res = spy("gate", run.id, "--require", ",".join(ALL), "--format", "junit")
    assert res.exit_code == 1
    root = ET.fromstring(res.output.encode())
    cases = root.findall(".//testcase")
    assert [c.get("name") for c in cases] == ALL
    assert [c.get("name") for c in cases if c.find("failure") is not None] == ["tests-passed-after-last-edit"]


def test_agent_that_claims_passing_tests_it_never_ran_is_caught(tmp_path: Path) -> None:
    run = _record(tmp_path, NO_TESTS)
    claims = parse_claims(
        json.dumps({"tests_passed": True, "files_changed": ["calc.py"], "commands_run": ["pytest -q"]})
    )
    res = run_gate(run, ["workspace-changed"], claims=claims)
    got = {o.name: o for o in res.outcomes}
    assert got["workspace-changed"].status == "pass"
    assert got["files_changed"].status == "pass"
    assert got["tests_passed"].status == "fail" and got["tests_passed"].summary.startswith("false completion")
    assert got["command `pytest -q`"].status == "fail"
    assert res.exit_code == 1


def test_signed_real_run_and_tampering(tmp_path: Path) -> None:
    keys = generate_keypair(tmp_path / "keys" / "signing.key")
    run = _record(tmp_path, TESTS, signer=make_signer(keys.private))
    pub = load_public_key_raw(keys.public)
    assert verify_run(run.dir, pubkey_raw=pub).status == "verified"
    other = generate_keypair(tmp_path / "keys" / "other.key")
    assert verify_run(run.dir, pubkey_raw=load_public_key_raw(other.public)).status == "tampered"
    # erase the evidence of one exec: the record says so, at that line
    lines = run.events_path.read_bytes().splitlines(keepends=True)
    n = next(i for i, line in enumerate(lines, 1) if b'"process.exec"' in line and b"pytest" in line)
    del lines[n - 1]
    run.events_path.write_bytes(b"".join(lines))
    r = verify_run(run.dir, pubkey_raw=pub)
    assert r.status == "tampered"
    assert r.first_problem is not None and (r.first_problem.line, r.first_problem.kind) == (n, "deleted")
