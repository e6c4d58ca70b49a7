"""The gate over stored runs built from hand-written events."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from evidence_helpers import MakeRun, ev, exit_, proc, write

from spyglass.errors import UsageError
from spyglass.events import Alert
from spyglass.evidence.gate import parse_requirements, run_gate
from spyglass.evidence.junit import to_junit

AGENT = [ev("process.start", 100), ev("process.exec", 100, exe="/bin/sh", argv=["sh", "agent.sh"], cwd="/ws")]


def good_run() -> list:
    return [
        *AGENT,
        write(100, "/ws/a.py"),
        *proc(200, 100, ["python3", "-m", "pytest", "-q"]),
        write(200, "/ws/.pytest_cache/v/cache/nodeids"),
        exit_(200, 0),
        exit_(100, 0),
    ]


def edits_after_tests() -> list:
    return [
        *AGENT,
        write(100, "/ws/a.py"),
        *proc(200, 100, ["pytest", "-q"]),
        exit_(200, 0),
        write(100, "/ws/a.py", "file.truncate"),
        exit_(100, 0),
    ]


def test_tests_after_last_edit_pass(make_run: MakeRun) -> None:
    res = run_gate(make_run(good_run()), ["tests-passed-after-last-edit"])
    (o,) = res.outcomes
    assert o.status == "pass" and res.exit_code == 0
    assert "python3 -m pytest -q" in o.evidence.commands
    assert 3 in o.evidence.seqs  # the last edit
    assert res.facts["test_runs"][0]["passed"] is True


def test_edit_after_the_last_test_run_fails(make_run: MakeRun) -> None:
    res = run_gate(make_run(edits_after_tests()), ["tests-passed-after-last-edit"])
    (o,) = res.outcomes
    assert o.status == "fail" and res.exit_code == 1
    assert "edited (seq 7: /ws/a.py) after the last test run" in o.summary
    assert "/ws/a.py" in o.evidence.files


def test_failing_tests_after_last_edit_fail(make_run: MakeRun) -> None:
    events = [*AGENT, write(100, "/ws/a.py"), *proc(200, 100, ["pytest"]), exit_(200, 1)]
    (o,) = run_gate(make_run(events), ["tests-passed-after-last-edit"]).outcomes
    assert o.status == "fail" and "did not pass" in o.summary and "exit 1" in o.summary


def test_no_tests_at_all_fails(make_run: MakeRun) -> None:
    (o,) = run_gate(make_run([*AGENT, write(100, "/ws/a.py")]), ["tests-passed-after-last-edit"]).outcomes
    assert o.status == "fail" and o.summary == "no test run was recorded"


def test_alert_levels(make_run: MakeRun) -> None:
    alerts = [
        Alert(rule_id="secret-read", title="read a private key", level="high", event_seqs=[2], argv=["cat"]),
        Alert(rule_id="odd-exec", title="ran something odd", level="low", event_seqs=[1]),
    ]
    run = make_run(good_run(), alerts)
    res = run_gate(run, ["no-alerts-at-or-above=high", "no-alerts-at-or-above=critical"])
    high, crit = res.outcomes
    assert high.status == "fail" and high.evidence.alerts == [1] and high.evidence.seqs == [2]
    assert "secret-read (high)" in high.evidence.details[0]
    assert crit.status == "pass" and "2 below it" in crit.summary


def test_writes_outside_the_workspace(make_run: MakeRun) -> None:
    events = [
        *AGENT,
        write(100, "/dev/null"),
        write(100, "/tmp/scratch.txt", "file.create"),
        write(100, "/home/u/.bashrc"),
        write(100, "/etc/passwd", ok=False, errno="EACCES"),
        write(100, "/ws/ok.py"),
    ]
    run = make_run(events)
    strict, relaxed = run_gate(
        run, ["no-writes-outside-workspace", "no-writes-outside-workspace=/tmp/**"]
    ).outcomes
    assert strict.status == "fail" and strict.evidence.files == ["/home/u/.bashrc", "/tmp/scratch.txt"]
    assert "sh agent.sh" in strict.evidence.commands
    assert relaxed.status == "fail" and relaxed.evidence.files == ["/home/u/.bashrc"]
    clean = make_run([*AGENT, write(100, "/ws/x"), write(100, "/dev/pts/3")])
    assert run_gate(clean, ["no-writes-outside-workspace"]).outcomes[0].status == "pass"


def test_workspace_changed_from_events_without_manifests(make_run: MakeRun) -> None:
    changed, unchanged = make_run(good_run()), make_run([*AGENT, ev("file.read", 100, path="/ws/a.py")])
    o = run_gate(changed, ["workspace-changed"]).outcomes[0]
    assert o.status == "pass" and "/ws/a.py" in o.evidence.files
    assert run_gate(unchanged, ["workspace-changed"]).outcomes[0].status == "fail"


def test_evidence_verified(make_run: MakeRun) -> None:
    run = make_run(good_run())
    assert run_gate(run, ["evidence-verified"]).outcomes[0].status == "pass"
    lines = run.events_path.read_bytes().splitlines(keepends=True)
    run.events_path.write_bytes(b"".join(lines[:-1]))
    o = run_gate(run, ["evidence-verified"]).outcomes[0]
    assert o.status == "fail" and o.summary.startswith("tampered: ") and "line 8" in o.summary


def _skill(tmp_path: Path) -> Path:
    d = tmp_path / "skills" / "pdf"
    (d / "scripts").mkdir(parents=True)
    (d / "SKILL.md").write_text(
        "---\nname: pdf-tools\ndescription: work with PDFs\n---\nRun scripts/fill.py\n"
    )
    (d / "scripts" / "fill.py").write_text("print('hi')\n")
    return d


def test_skill_used(make_run: MakeRun, tmp_path: Path) -> None:
    d = _skill(tmp_path)
    only_md = make_run([*AGENT, ev("file.read", 100, path=f"{d}/SKILL.md")], skills=[str(d)])
    used = make_run(
        [
            *AGENT,
            ev("file.read", 100, path=f"{d}/SKILL.md"),
            *proc(300, 100, ["python3", f"{d}/scripts/fill.py"]),
            ev("file.read", 300, path=f"{d}/scripts/fill.py"),
        ],
        skills=[str(d)],
    )
    o = run_gate(only_md, ["skill-used=pdf-tools"]).outcomes[0]
    assert o.status == "fail" and "only SKILL.md" in o.summary
    for name in ("pdf-tools", "pdf"):  # front-matter name or directory name
        o = run_gate(used, [f"skill-used={name}"]).outcomes[0]
        assert o.status == "pass", o.summary
        assert "scripts/fill.py" in o.evidence.files
    o = run_gate(used, ["skill-used=docx"]).outcomes[0]
    assert o.status == "fail" and "no skill named 'docx'" in o.summary
    no_skills = make_run(good_run())
    assert "recorded no skill" in run_gate(no_skills, ["skill-used=pdf"]).outcomes[0].summary


def test_requirement_parsing() -> None:
    reqs = parse_requirements(
        [
            "tests-passed-after-last-edit,no-alerts-at-or-above=MEDIUM",
            "no-writes-outside-workspace=/tmp/**,/var/tmp/**",
        ]
    )
    assert [(r.name, r.arg) for r in reqs] == [
        ("tests-passed-after-last-edit", None),
        ("no-alerts-at-or-above", "medium"),
        ("no-writes-outside-workspace", "/tmp/**,/var/tmp/**"),
    ]
    assert parse_requirements(["no-alerts-at-or-above"])[0].arg == "high"
    for bad in ("tests-pass", "no-alerts-at-or-above=severe", "skill-used", "workspace-changed=yes"):
        with pytest.raises(UsageError):
            parse_requirements([bad])


def test_junit_has_one_testcase_per_requirement(make_run: MakeRun) -> None:
    reqs = [
        "tests-passed-after-last-edit",
        "no-alerts-at-or-above=high",
        "no-writes-outside-workspace",
        "workspace-changed",
        "evidence-verified",
    ]
    res = run_gate(make_run(edits_after_tests()), reqs)
    root = ET.fromstring(to_junit(res).encode())
    cases = root.findall(".//testcase")
    assert [c.get("name") for c in cases] == reqs
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failed == ["tests-passed-after-last-edit"]
    assert root.get("tests") == "5" and root.get("failures") == "1"


# -- the command ------------------------------------------------------------------
def _stored(store_dir: Path, events: list) -> str:
    from evidence_helpers import record_events

    from spyglass.store import Store

    return record_events(Store(store_dir, create=True), events).id


def test_cli_gate_formats_and_exit_codes(spy, store_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    good = _stored(store_dir, good_run())
    res = spy("gate", good, "--require", "tests-passed-after-last-edit", "--require", "evidence-verified")
    assert res.exit_code == 0, res.output
    assert "PASS  tests-passed-after-last-edit" in res.output and "gate passed" in res.output
    bad = _stored(store_dir, edits_after_tests())
    res = spy("gate", bad, "--require", "tests-passed-after-last-edit")
    assert res.exit_code == 1 and "FAIL  tests-passed-after-last-edit" in res.output
    data = json.loads(spy("gate", bad, "--format", "json").output)
    assert data["passed"] is False and data["exit_code"] == 1
    assert [o["name"] for o in data["outcomes"]] == [
        "evidence-verified",
        "tests-passed-after-last-edit",
        "no-alerts-at-or-above=high",
    ]
    out = tmp_path / "gate.xml"
    res = spy("gate", bad, "--format", "junit", "-o", str(out))
    assert res.exit_code == 1
    assert len(ET.parse(out).getroot().findall(".//testcase")) == 3
    res = spy("gate", bad, "--require", "tests-pass")
    assert res.exit_code == 2 and "unknown gate requirement" in res.output


def test_cli_gate_reads_requirements_from_the_policy(spy, store_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run = _stored(store_dir, edits_after_tests())
    policy = tmp_path / "spyglass.yaml"
    policy.write_text("gate: [workspace-changed]\n")
    res = spy("gate", run, "--policy", str(policy), "--format", "json")
    assert res.exit_code == 0, res.output
    assert [o["name"] for o in json.loads(res.output)["outcomes"]] == ["workspace-changed"]


def test_cli_ignore_edit_for_the_agents_own_log(spy, store_dir: Path) -> None:  # type: ignore[no-untyped-def]
    run = _stored(store_dir, [*good_run(), write(100, "/ws/.aider.chat.history.md")])
    res = spy("gate", run, "--require", "tests-passed-after-last-edit")
    assert res.exit_code == 1
    res = spy("gate", run, "--require", "tests-passed-after-last-edit", "--ignore-edit", ".aider*")
    assert res.exit_code == 0, res.output


def test_anonymous_and_transient_files_outside_are_not_changes(make_run: MakeRun) -> None:
    excl = "O_RDWR|O_CREAT|O_EXCL|O_CLOEXEC"
    events = [
        *AGENT,
        write(100, "/tmp/#123", "file.create", flags="O_RDWR|O_EXCL|O_TMPFILE"),
        write(100, "/tmp/tmpab12", "file.create", flags=excl),
        write(100, "/tmp/tmpab12", "file.delete"),
        write(100, "/tmp/existing.txt", "file.create", flags="O_WRONLY|O_CREAT|O_TRUNC"),
        write(100, "/tmp/existing.txt", "file.delete"),  # may have existed before: a change
    ]
    (o,) = run_gate(make_run(events), ["no-writes-outside-workspace"]).outcomes
    assert o.status == "fail" and o.evidence.files == ["/tmp/existing.txt"]
    assert any("/tmp/tmpab12" in d for d in o.evidence.details)


def test_every_requirement_is_one_registered_class_and_the_claim_check_does_not_import_the_gate() -> None:
    import ast
    from pathlib import Path

    from spyglass.evidence import claimcheck, requirements
    from spyglass.evidence.gate import REQUIREMENTS
    from spyglass.evidence.requirements import REGISTRY, GateRequirement

    assert list(REQUIREMENTS) == list(REGISTRY) and len(REGISTRY) == 6
    assert all(isinstance(r, GateRequirement) and type(r).name == n for n, r in REGISTRY.items())
    assert len({type(r) for r in REGISTRY.values()}) == len(REGISTRY)
    for mod in (claimcheck, requirements):
        tree = ast.parse(Path(str(mod.__file__)).read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "spyglass.evidence.gate" not in imported
