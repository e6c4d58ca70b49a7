"""`spyglass policy init | show | lint` as a user runs them."""

from __future__ import annotations

import json
import os
from pathlib import Path

from spyglass.policy import parse_policy
from spyglass.policy.starter import STARTER


def test_init_writes_a_starter_that_parses_back(spy, tmp_path: Path) -> None:
    p = tmp_path / "spyglass.yaml"
    res = spy("policy", "init", str(p))
    assert res.exit_code == 0 and p.read_text() == STARTER
    policy = parse_policy(p.read_text(), str(p), base_dir=str(tmp_path))
    # the starter means the built-in defaults (tests/policy/test_starter.py checks every key)
    assert policy.mode == "observe" and policy.fail_on is None and policy.workspace == ()
    assert policy.gate == ("evidence-verified", "tests-passed-after-last-edit", "no-alerts-at-or-above=high")
    assert spy("policy", "lint", str(p)).exit_code == 0
    res = spy("policy", "init", str(p))
    assert res.exit_code == 2 and "already exists" in res.output  # refuses to overwrite
    assert spy("policy", "init", "--force", str(p)).exit_code == 0


def test_lint_lists_every_error_with_its_place(spy, tmp_path: Path) -> None:
    p = tmp_path / "spyglass.yaml"
    p.write_text("mode: watch\nrules:\n  paths: [./no-such-rules]\nnetwrk: {}\n")
    res = spy("policy", "lint", str(p))
    assert res.exit_code == 2
    assert f"{p}:1:7: bad value 'watch' for mode" in res.stdout
    assert f"{p}:3:11: rules.paths[0]: no such file or directory" in res.stdout
    assert f"{p}:4:1: unknown key 'netwrk'" in res.stdout
    res = spy("policy", "lint", str(p), "--format", "json")
    errs = json.loads(res.stdout)["errors"]
    assert [(e["line"], e["col"]) for e in errs] == [(1, 7), (3, 11), (4, 1)]


def test_lint_checks_the_rules_the_policy_names(spy, tmp_path: Path) -> None:
    (tmp_path / "rules").mkdir()
    rule = "id: mine\ntitle: Mine\nlevel: loud\ndetection:\n  s: {type: file.read}\n"
    (tmp_path / "rules" / "r.yaml").write_text(rule)
    p = tmp_path / "spyglass.yaml"
    p.write_text("rules:\n  paths: [./rules]\n")
    res = spy("policy", "lint", str(p))
    assert res.exit_code == 2 and "r.yaml:3:8: level must be one of" in res.stdout


def test_show_gives_the_effective_policy(spy, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = spy("policy", "show", "--format", "json")
    data = json.loads(res.stdout)
    assert res.exit_code == 0 and data["mode"] == "observe" and data["source"] is None
    assert "~/.ssh/**" in data["effective"]["secrets"] and "pypi.org" in data["effective"]["network_allow"]
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "spyglass" / "policy.yaml"
    user.parent.mkdir(parents=True)
    user.write_text("network:\n  allow: [internal.example]\n  builtin_allow: false\n")
    data = json.loads(spy("policy", "show", "--format", "json").stdout)
    assert data["effective"]["network_allow"] == ["internal.example"]
    text = spy("policy", "show").stdout
    assert text.startswith(f"# policy: {user}") and "internal.example" in text
