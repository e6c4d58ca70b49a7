"""Tuning built-in rules in place: exceptions, append, override, enabled, from rule files and the policy.

The attacks are real processes under the real backend: a private key read
with `cat` and with `head`.  An exception for `cat` on that key silences
only `cat` (`head` still fires: the benign twin of the exception is the
attack it must not hide).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spyglass.rules.ruleset import RuleSetError, load_ruleset, parse_files

READ_KEY = 'cat "$HOME/.ssh/id_rsa" > /dev/null; head -c1 "$HOME/.ssh/id_rsa" > /dev/null'

RULES = """\
modify: cred-secret-read
level: informational            # Sigma's name for info
exceptions:
  - name: cat_reads_the_key
    fields: [process.name, file.path]
    comps: [=, glob]
    values:
      - [cat, "~/.ssh/id_rsa"]
---
append:
  lists:
    downloaders: [fetchit]
"""


def _pids(run: Any, rule: str) -> set[str]:
    return {" ".join(a.argv or [])[:4] for a in run.fired(rule)}


def test_exception_from_a_rule_file_silences_only_its_rows(live: Any, tmp_path: Path) -> None:
    untuned = live(READ_KEY, workspace=tmp_path / "ws0")
    assert _pids(untuned, "cred-secret-read") == {"cat ", "head"}
    ws = tmp_path / "ws1"
    ws.mkdir()
    (ws / "tune.yaml").write_text(RULES)
    tuned = live(READ_KEY, policy_text="rules:\n  paths: [tune.yaml]\n", workspace=ws)
    alerts = tuned.fired("cred-secret-read")
    assert _pids(tuned, "cred-secret-read") == {"head"}
    assert {a.level for a in alerts} == {"info"}


def test_policy_overrides_exceptions_append_and_enabled(live: Any, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = """\
rules:
  overrides:
    cred-secret-read:
      action: alert
      append:
        detection:
          via_head: {process.name: head}
        condition: and not via_head
    exec-untrusted-location:
      enabled: false
"""
    run = live(READ_KEY + '; cp /bin/true /tmp/spyglass-tune-true && /tmp/spyglass-tune-true; '
               'rm -f /tmp/spyglass-tune-true', policy_text=policy, workspace=ws)
    assert _pids(run, "cred-secret-read") == {"cat "}
    assert not run.fired("exec-untrusted-location")
    assert run.fired("exec-run-written-file")  # the other rule on the same act still speaks


def test_show_effective_says_where_each_part_came_from(spy: Any, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tune.yaml").write_text(RULES)
    (tmp_path / "spyglass.yaml").write_text(
        "rules:\n  paths: [tune.yaml]\n  overrides:\n    cred-secret-read: {action: kill}\n")
    monkeypatch.chdir(tmp_path)
    res = spy("rules", "show", "--policy", "spyglass.yaml", "--effective", "cred-secret-read")
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "# cred-secret-read: defined at spyglass/rules/pack/" in out
    assert "# exception cat_reads_the_key: tune.yaml:1" in out
    assert "# level: info: tune.yaml:1" in out
    assert "# action: kill: " in out and "(policy rules.overrides)" in out
    assert "and not exception:cat_reads_the_key" in out
    data = json.loads(spy("rules", "show", "--policy", "spyglass.yaml", "--effective", "cred-secret-read",
                          "--format", "json").stdout)
    assert data["rule"]["level"] == "info" and data["rule"]["action"] == "kill"
    assert [c["part"] for c in data["changes"]] == ["exception cat_reads_the_key", "level: info", "action: kill"]
    rs = load_ruleset(None, [tmp_path / "tune.yaml"])
    assert rs.library.lists["downloaders"][-1] == "fetchit"
    assert rs.library.changes["list downloaders"] == ["append at tune.yaml:12"]


@pytest.mark.parametrize("text, expect", [
    ("modify: no-such-rule\nlevel: low\n", "no rule 'no-such-rule' to change"),
    ("modify: cred-secret-read\nlevel: severe\n", "bad.yaml:2:8: level must be one of"),
    ("modify: cred-secret-read\nexceptions:\n  - name: x\n    fields: [process.nme]\n    values: [[a]]\n",
     "unknown field 'process.nme'"),
    ("modify: cred-secret-read\nexceptions:\n  - name: x\n    fields: [process.name, file.path]\n"
     "    values: [[a]]\n", "a row has one value per field"),
    ("modify: cred-secret-read\nappend:\n  condition: and not nothing\n", "nothing"),
    ("append:\n  lists:\n    no_such_list: [x]\n", "no list 'no_such_list' to append"),
    ("modify: exfil-secret-then-egress\nappend:\n  condition: and not x\n  detection: {x: {ok: true}}\n",
     "is a sequence"),
])
def test_bad_changes_are_errors_with_their_place(tmp_path: Path, text: str, expect: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    _, errors = parse_files([f])
    assert errors, text
    assert any(expect in str(e) for e in errors), [str(e) for e in errors]
    assert all(str(e).startswith(str(f)) or str(e).startswith("bad.yaml") for e in errors)


def test_copying_a_pack_rule_points_at_modify(tmp_path: Path) -> None:
    from spyglass.rules.ruleset import pack_dir

    src = next(pack_dir().glob("credentials.yaml"))
    first = src.read_text().split("\n---", 1)[0]
    (tmp_path / "copy.yaml").write_text(first)
    with pytest.raises(RuleSetError) as exc:
        load_ruleset(None, [tmp_path / "copy.yaml"])
    assert "modify: ID" in str(exc.value)


def test_policy_lint_points_at_a_bad_exception(spy: Any, tmp_path: Path) -> None:
    f = tmp_path / "spyglass.yaml"
    f.write_text("rules:\n  overrides:\n    cred-secret-read:\n      exceptions:\n        - name: x\n"
                 "          fields: [process.nme]\n          values: [[cat]]\n")
    res = spy("policy", "lint", str(f))
    assert res.exit_code == 2
    assert f"{f}:6:20: unknown field 'process.nme' (did you mean 'process.name'?)" in res.stdout


def test_policy_appends_to_a_shared_list(live: Any, tmp_path: Path, spy: Any,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`cat` made an owner of credentials from the policy: the pack's rule, unchanged, lets it read."""
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = "rules:\n  library:\n    append:\n      lists:\n        credential_owners: [cat]\n"
    run = live(READ_KEY, policy_text=policy, workspace=ws)
    assert _pids(run, "cred-secret-read") == {"head"}
    monkeypatch.chdir(ws)
    out = spy("rules", "show", "--policy", "spyglass.yaml", "--effective", "cred-secret-read").stdout
    assert "# list credential_owners: defined at spyglass/rules/pack/" in out
    assert "append at spyglass.yaml:5" in out
    bad = ws / "bad.yaml"
    bad.write_text("rules:\n  library:\n    override:\n      lists:\n        no_such_list: [x]\n")
    res = spy("policy", "lint", str(bad))
    assert res.exit_code == 2 and "no list 'no_such_list' to override" in res.stdout
