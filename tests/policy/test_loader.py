"""Loading spyglass.yaml: defaults without a file, values with one, every mistake with file:line:col."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from spyglass.errors import SourceError
from spyglass.policy import Policy, PolicyError, find_policy_file, load_policy, parse_policy
from spyglass.policy import defaults as d


def errors_of(text: str, base: Path) -> list[str]:
    with pytest.raises(PolicyError) as exc:
        parse_policy(text, "spyglass.yaml", base_dir=str(base))
    return [str(e) for e in exc.value.errors]


def test_no_file_gives_the_safe_defaults(tmp_path: Path) -> None:
    p = load_policy(None, tmp_path)
    assert p == Policy.default(tmp_path)
    assert p.source is None and p.base_dir == str(tmp_path.resolve())
    assert p.mode == "observe" and p.fail_on is None
    assert p.workspace == () and p.workspace_for("/run/here") == ["/run/here"]
    assert p.secret_globs == d.SECRET_GLOBS
    assert p.network.effective_allow == d.ALLOWED_HOSTS and p.network.deny == ()
    assert p.exec.effective_trusted == d.TRUSTED_EXEC
    assert p.rules.paths == () and p.rules.disable == () and p.rules.overrides == {}
    assert p.sandbox.pass_home == () and p.gate == d.DEFAULT_GATE and p.analysis.grading_paths == ()
    assert p.evidence.sign_key is None and p.evidence.max_files == 50000 and p.evidence.max_diff_bytes == 262144
    assert p.evidence.manifest_exclude == d.DEFAULT_MANIFEST_EXCLUDE and ".git/objects/**" in d.DEFAULT_MANIFEST_EXCLUDE
    assert "python -m pytest" in p.evidence.test_patterns and "cargo test" in p.evidence.test_patterns
    assert "pytest" in p.evidence.test_patterns
    assert p.digest == hashlib.sha256(b"spyglass-default-policy-v1").hexdigest()


def test_the_file_in_the_working_directory_is_used_only_when_named(tmp_path: Path) -> None:
    assert find_policy_file(None, tmp_path) is None
    text = "mode: enforce\nfail_on: medium\n"
    (tmp_path / "spyglass.yaml").write_text(text)
    assert find_policy_file(None, tmp_path) is None
    assert load_policy(None, tmp_path).mode == "observe"
    p = load_policy("spyglass.yaml", tmp_path)
    assert (p.mode, p.fail_on, p.source) == ("enforce", "medium", "spyglass.yaml")
    assert p.digest == hashlib.sha256(text.encode()).hexdigest() and p.text == text


def test_an_explicit_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="policy file not found") as exc:
        load_policy("missing.yaml", tmp_path)
    assert exc.value.path == "missing.yaml"


def test_values_are_typed_and_paths_resolved(tmp_path: Path) -> None:
    (tmp_path / "rules").mkdir()
    p = parse_policy(
        "workspace: [., ../other]\n"
        "secrets: ['~/.foo/**']\n"
        "honeytokens: ['~/.config/decoy/token']\n"
        "network:\n  allow: ['*.example.com', '10.0.0.0/8:443']\n  deny: [evil.example]\n  builtin_allow: false\n"
        "exec:\n  trusted: [~/bin, ./tools]\n"
        "rules:\n  paths: [./rules]\n  disable: [net-ip-literal]\n"
        "  overrides: {net-egress-unlisted: {level: high, action: kill}}\n"
        "sandbox: {pass_home: [~/.codex]}\n"
        "evidence: {sign_key: keys/k.pem, max_files: 10}\n"
        "gate: [tests-passed-after-last-edit]\n"
        "analysis: {grading_paths: ['tests/**']}\n",
        "spyglass.yaml",
        base_dir=str(tmp_path),
    )
    assert p.workspace == (str(tmp_path), str(tmp_path.parent / "other"))
    assert p.secret_globs[-1] == "~/.foo/**" and p.honeytokens == ("~/.config/decoy/token",)
    assert p.network.effective_allow == ("*.example.com", "10.0.0.0/8:443") and p.network.deny == ("evil.example",)
    assert p.exec.trusted == ("~/bin", str(tmp_path / "tools"))  # ~ stays: it is the run's HOME
    assert p.rules.paths == (str(tmp_path / "rules"),) and p.rules.disable == ("net-ip-literal",)
    ov = p.rules.overrides["net-egress-unlisted"]
    assert (ov.level, ov.action) == ("high", "kill")
    assert p.sandbox.pass_home == ("~/.codex",) and p.gate == ("tests-passed-after-last-edit",)
    assert p.evidence.max_files == 10 and p.evidence.max_diff_bytes == 262144
    assert p.resolve_path(p.evidence.sign_key or "", home="/h") == str(tmp_path / "keys/k.pem")
    assert p.analysis.grading_paths == ("tests/**",)


def test_unknown_keys_are_named_with_their_place(tmp_path: Path) -> None:
    assert errors_of("mode: observe\nnetwrk:\n  allow: []\nnetwork:\n  alow: [x]\n", tmp_path) == [
        "spyglass.yaml:2:1: unknown key 'netwrk' (known: agent_id, analysis, descendants, evidence, exec, fail_on, "
        "gate, honeytokens, mode, network, otlp, retention, rules, sandbox, secrets, terminal, workspace)",
        "spyglass.yaml:5:3: unknown key 'alow' in network (known: allow, builtin_allow, deny)",
    ]


def test_bad_values_are_all_reported_in_file_order(tmp_path: Path) -> None:
    text = (
        "mode: watch\nfail_on: severe\nworkspace: .\n"
        "network:\n  allow: ['bad host!', 'a.com:99999']\n"
        "evidence:\n  max_files: 0\n"
        "rules:\n  overrides:\n    x: {}\n    y: {level: huge}\n"
        "gate: tests-passed\nsandbox:\n  pass_home: ~/.codex\n"
    )
    assert errors_of(text, tmp_path) == [
        "spyglass.yaml:1:7: bad value 'watch' for mode: expected one of observe, contain, enforce, ask",
        "spyglass.yaml:2:10: bad value 'severe' for fail_on: expected one of info, low, medium, high, critical",
        "spyglass.yaml:3:12: workspace must be a list, not the string '.'",
        "spyglass.yaml:5:11: network.allow[0]: bad host name 'bad host!'",
        "spyglass.yaml:5:24: network.allow[1]: bad port '99999' (0-65535)",
        "spyglass.yaml:7:14: evidence.max_files must be at least 1",
        "spyglass.yaml:10:8: rules.overrides.x needs at least one of: level, action",
        "spyglass.yaml:11:16: bad value 'huge' for rules.overrides.y.level: expected one of info, low, medium, "
        "high, critical",
        "spyglass.yaml:12:7: gate must be a list, not the string 'tests-passed'",
        "spyglass.yaml:14:14: sandbox.pass_home must be a list, not the string '~/.codex'",
    ]


def test_a_missing_rules_directory(tmp_path: Path) -> None:
    (tmp_path / "rules").mkdir()
    assert errors_of("rules:\n  paths: [./rules, ./nope]\n", tmp_path) == [
        "spyglass.yaml:2:20: rules.paths[1]: no such file or directory: ./nope"
    ]


def test_yaml_mistakes(tmp_path: Path) -> None:
    assert errors_of("mode: observe\n---\nmode: enforce\n", tmp_path) == [
        "spyglass.yaml:3:1: a policy file holds one YAML document"
    ]
    assert errors_of("- a\n- b\n", tmp_path) == [
        "spyglass.yaml:1:1: a policy file is a mapping of keys (mode, workspace, ...)"
    ]
    with pytest.raises(SourceError, match=r"duplicate key 'mode'") as exc:
        parse_policy("mode: observe\nmode: enforce\n", "spyglass.yaml", base_dir=str(tmp_path))
    assert (exc.value.line, exc.value.col) == (2, 1)
    with pytest.raises(SourceError, match="invalid YAML"):
        parse_policy("mode: [observe\n", "spyglass.yaml", base_dir=str(tmp_path))
    assert parse_policy("", "spyglass.yaml", base_dir=str(tmp_path)).mode == "observe"


def test_a_rule_override_for_an_unknown_rule_stops_loading(tmp_path: Path) -> None:
    from spyglass.rules.ruleset import RuleSetError, load_ruleset

    p = parse_policy("rules:\n  disable: [no-such-rule]\n", "spyglass.yaml", base_dir=str(tmp_path))
    with pytest.raises(RuleSetError, match=r"rules\.disable names an unknown rule 'no-such-rule'"):
        load_ruleset(p)
