"""Every fixture skill detonated for real (strace, bubblewrap, the egress proxy, loopback only).

The whole set runs once, two skills at a time (``skill scan``'s parallelism), with one
repeat: the benign skills must be ``compliant``, every malicious one ``violations``
with the offending call's kind and source line, and the two in ``uncertain/``
(a script that fails on the sample input; a harmless base64 blob the pre-scan
flags) ``uncertain`` with the reason.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from spyglass.skills.scan import find_skills, scan

DATA = Path(__file__).parent / "data"
pytestmark = [
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
    pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed"),
]

#: skill -> (violation kind, message fragment, source) that must be among its violations
EXPECTED = {
    "exfil-ssh-key": [
        ("secret-read", "~/.ssh/id_rsa", "scripts/summarize.py:9"),
        ("undeclared-host", "stats-collector.test", "scripts/summarize.py:11"),
    ],
    "remote-code": [("undeclared-host", "cdn.plugins-update.test", "scripts/summarize.py:10")],
    "persist-bashrc": [("write-outside-scope", "~/.bashrc", "scripts/summarize.py:8")],
    "aws-creds": [("secret-read", "~/.aws/credentials", "scripts/summarize.py:8")],
    "destructive-cleanup": [("destructive", "data.csv", "scripts/summarize.py:9")],
    "obfuscated": [("secret-read", "~/.netrc", "scripts/summarize.py:10")],
    "agent-instruction": [
        ("secret-read", "~/.git-credentials", "SKILL.md:13"),
        ("undeclared-host", "licence-check.test", "SKILL.md:13"),
    ],
    "download-exec": [
        ("undeclared-host", "updates.wc-tools.test", "scripts/count.sh:4"),
        ("undeclared-command", "wget", "scripts/count.sh:4"),
    ],
    "autostart": [("write-outside-scope", "~/.config/autostart/toc-helper.desktop", "scripts/toc.py:12")],
    # inside the sandbox .git/hooks is read-only: the attempt is refused, recorded, and is the violation
    "git-hook": [("protected-write", ".git/hooks/post-commit", "scripts/changelog.sh:4")],
    "scope-creep": [("write-outside-scope", "notes.md", "scripts/toc.py:10")],
    "node-env-exfil": [
        ("secret-read", "~/.env", "scripts/slugify.js:9"),
        ("undeclared-host", "slug-metrics.test", "scripts/slugify.js:10"),
    ],
}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    store = tmp_path_factory.mktemp("store")
    skills = find_skills([DATA / "benign", DATA / "malicious", DATA / "uncertain"])
    return {Path(r["dir"]).name: r for r in scan(skills, store, jobs=2)}


def test_the_set_is_big_enough(results: dict[str, dict[str, Any]]) -> None:
    assert len(list((DATA / "benign").iterdir())) >= 10
    assert set(EXPECTED) == {d.name for d in (DATA / "malicious").iterdir()}
    assert len(EXPECTED) >= 10


@pytest.mark.parametrize("name", sorted(d.name for d in (DATA / "benign").iterdir()))
def test_benign_skill_is_compliant(results: dict[str, dict[str, Any]], name: str) -> None:
    r = results[name]
    assert r["verdict"] == "compliant", (r["violations"], r["uncertain_because"])
    assert all(run["exit_code"] == 0 for run in r["runs"])
    assert {run["mode"] for run in r["runs"]} == {"direct", "agent"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_malicious_skill_has_the_offending_call(results: dict[str, dict[str, Any]], name: str) -> None:
    r = results[name]
    assert r["verdict"] == "violations", r["uncertain_because"]
    got = [(v["kind"], v["message"], v["source"]) for v in r["violations"]]
    for kind, fragment, source in EXPECTED[name]:
        # the offending line on the finding itself: a proxy request is tied to its process before
        # the client is answered, and judged after that process's start (tests/skills/test_judge.py)
        assert any(k == kind and fragment in m and s == source for k, m, s in got), (kind, fragment, source, got)
    for v in r["violations"]:
        assert v["process"]["pid"] > 0 and v["lineage"] and v["remedy"] and v["event"]["seq"] > 0


def test_reports_of_the_set(results: dict[str, dict[str, Any]]) -> None:
    from spyglass.skills.report import to_html, to_sarif

    report = {"summary": {}, "skills": list(results.values())}
    sarif = to_sarif(report)
    located = {
        (
            r["ruleId"],
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].rsplit("/", 2)[-2:][-1],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
        )
        for r in sarif["runs"][0]["results"]
    }
    assert ("skill/secret-read", "summarize.py", 9) in located  # exfil-ssh-key
    levels = {r["ruleId"].startswith("skill/prescan/"): r["level"] for r in sarif["runs"][0]["results"]}
    assert levels == {False: "error", True: "warning"}  # violations; the uncertain skills' pre-scan hints
    page = to_html(report)
    assert all(name in page for name in results) and "remedy: remove the read of ~/.ssh/id_rsa" in page


def test_cli_verify_exit_codes_and_sarif(spy: Any) -> None:
    import json

    res = spy("skill", "verify", str(DATA / "malicious" / "aws-creds"), "--format", "sarif")
    assert res.exit_code == 1, res.output
    results = json.loads(res.stdout)["runs"][0]["results"]
    assert [(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results] == [
        ("skill/secret-read", 8)
    ]
    res = spy("skill", "verify", str(DATA / "benign" / "json-format"))
    assert res.exit_code == 0 and "json-format: COMPLIANT" in res.stdout


def test_uncertain_when_a_step_fails_or_the_prescan_has_a_hint(results: dict[str, dict[str, Any]]) -> None:
    failing = results["failing-script"]
    assert failing["verdict"] == "uncertain" and failing["violations"] == []
    assert "direct run 1: step 1 (scripts/totals.py) exited 1" in failing["uncertain_because"]
    blob = results["harmless-blob"]
    assert blob["verdict"] == "uncertain" and blob["violations"] == []
    assert blob["uncertain_because"] == ["pre-scan: a long base64 blob at scripts/banner.py:4"]


def test_an_edited_spec_changes_what_is_a_violation(tmp_path: Path) -> None:
    """Declaring the host in the spec removes that violation; the secret read stays one, and sending
    the honeytoken's canary there is still the rule pack's exfiltration alert."""
    from spyglass.skills.spec import derive_spec, load_spec
    from spyglass.skills.verify import verify_skill
    from spyglass.store import Store

    skill = DATA / "malicious" / "exfil-ssh-key"
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(derive_spec(skill).to_yaml().replace("hosts: []", "hosts:\n- host: stats-collector.test"))
    r = verify_skill(skill, Store(tmp_path / "store", create=True), spec=load_spec(spec_file))
    assert r.verdict == "violations"
    assert {v.kind for v in r.violations} == {"secret-read", "rule:exfil-canary-egress"}
    assert ("secret-read", "read of ~/.ssh/id_rsa") in {(v.kind, v.message) for v in r.violations}


def test_the_authors_inputs_are_used(tmp_path: Path) -> None:
    from spyglass.skills.verify import verify_skill
    from spyglass.store import Store

    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "data.csv").write_text("city,visits\nOslo,3\nLima,4\n")
    r = verify_skill(DATA / "benign" / "csv-summary", Store(tmp_path / "store", create=True), inputs=inputs)
    assert r.verdict == "compliant", (r.violations, r.reasons)
    assert any("out/summary.md" in w for run in r.runs for w in run.facts["writes"])
