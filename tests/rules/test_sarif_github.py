"""SARIF for GitHub code scanning: the same finding in two runs has the same locations and fingerprints.

Two real runs of the same attack (a private key read from HOME, the
workspace's .env read, a file written in HOME) in two different workspaces
and HOMEs, each a git repository with a policy file: the results agree on
rule, location and fingerprint; every location is repository-relative or
logical (nothing points into the run store); the document validates
against the SARIF 2.1.0 schema and keeps GitHub's documented limits.
"""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from spyglass.rules.sarif import GITHUB_LIMITS

DATA = Path(__file__).parent / "data"
ATTACK = 'cat "$HOME/.ssh/id_rsa" > /dev/null; cat "$WS/.env" > /dev/null; echo x > "$HOME/out.txt"'


def _sarif(live: Any, spy: Any, root: Path) -> dict[str, Any]:
    from tests.rules.conftest import make_home

    ws = root / "repo"
    ws.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / ".env").write_text("TOKEN=x\n")
    home = make_home(root)
    r = live(ATTACK, policy_text="mode: observe\n", workspace=ws, home=home)
    out = root / "r.sarif"
    res = spy("report", "--store", str(r.store.root), r.reader.id, "--format", "sarif", "-o", str(out))
    assert res.exit_code == 0, res.output
    return json.loads(out.read_text())


def _keys(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    return sorted((x["ruleId"], json.dumps(x["locations"], sort_keys=True),
                   x["partialFingerprints"]["spyglassFinding/v1"]) for x in doc["runs"][0]["results"])


def test_two_runs_of_one_attack_match(live: Any, spy: Any, tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    a = _sarif(live, spy, tmp_path / "a")
    b = _sarif(live, spy, tmp_path / "b")
    assert _keys(a) == _keys(b)
    results = a["runs"][0]["results"]
    by_rule = {x["ruleId"]: x for x in results}
    assert {"cred-secret-read", "cred-workspace-env-read"} <= set(by_rule)
    # the file the alert is about, relative to the repository root
    env = by_rule["cred-workspace-env-read"]["locations"][0]
    assert env["physicalLocation"]["artifactLocation"]["uri"] == ".env"
    # outside the repository: a logical location with HOME abstracted, anchored at the repository's policy file
    key = by_rule["cred-secret-read"]["locations"][0]
    assert key["logicalLocations"][0]["fullyQualifiedName"] == "~/.ssh/id_rsa"
    assert key["physicalLocation"]["artifactLocation"]["uri"] == "spyglass.yaml"
    text = json.dumps(a)
    assert "file://" not in text and "events.jsonl" not in text and "informationUri" not in text
    for x in results:
        for loc in x["locations"]:
            uri = loc.get("physicalLocation", {}).get("artifactLocation", {}).get("uri")
            assert uri is None or not uri.startswith("/")
    jsonschema.Draft4Validator(json.loads((DATA / "sarif-schema-2.1.0.json").read_text())).validate(a)
    _github_limits(a)


def _github_limits(doc: dict[str, Any]) -> None:
    assert len(doc["runs"]) <= GITHUB_LIMITS["runs_per_file"]
    for run in doc["runs"]:
        assert len(run["results"]) <= GITHUB_LIMITS["results_per_run"]
        assert len(run["tool"]["driver"]["rules"]) <= GITHUB_LIMITS["rules_per_run"]
        assert len(run["tool"].get("extensions", [])) <= 100
        for rule in run["tool"]["driver"]["rules"]:
            assert len(rule["properties"]["tags"]) <= GITHUB_LIMITS["shown_tags_per_rule"]
        for x in run["results"]:
            assert 1 <= len(x["locations"]) <= GITHUB_LIMITS["shown_locations_per_result"]
            assert x["message"]["text"]
    assert len(gzip.compress(json.dumps(doc).encode())) < GITHUB_LIMITS["gzip_bytes"]


def test_results_are_capped_severest_first() -> None:
    from spyglass.events import Alert
    from spyglass.rules.sarif import to_sarif
    from spyglass.store.meta import RunMeta

    n = GITHUB_LIMITS["results_per_run"] + 5
    alerts = [Alert(seq=i, rule_id="r-low" if i > 2 else "r-crit", title="t", level="low" if i > 2 else "critical",
                    message=f"m {i}") for i in range(1, n + 1)]
    doc = to_sarif(alerts, [], RunMeta(id="x", workspace=["/w"]))
    run = doc["runs"][0]
    assert len(run["results"]) == GITHUB_LIMITS["results_per_run"]
    assert run["results"][0]["ruleId"] == "r-crit"
    assert run["properties"]["omitted_results"] == 5
    _github_limits(doc)
