"""Claims of the agent, checked against the record: a claim with no evidence fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evidence_helpers import MakeRun, ev, exit_, proc, write

from spyglass.errors import SourceError
from spyglass.evidence.claims import parse_claims
from spyglass.evidence.gate import run_gate

AGENT = [ev("process.start", 100), ev("process.exec", 100, exe="/bin/sh", argv=["sh", "agent.sh"], cwd="/ws")]


def _gate(run, claims: dict | str):  # type: ignore[no-untyped-def]
    text = claims if isinstance(claims, str) else json.dumps(claims)
    return run_gate(run, [], claims=parse_claims(text, "claims.json"))


def test_claimed_tests_that_never_ran_are_a_false_completion(make_run: MakeRun) -> None:
    run = make_run([*AGENT, write(100, "/ws/a.py")])
    res = _gate(run, {"tests_passed": True, "tests_run": True})
    passed, ran = res.outcomes
    assert (passed.name, passed.kind, passed.status) == ("tests_passed", "claim", "fail")
    assert passed.summary.startswith("false completion: no test run")
    assert ran.status == "fail" and res.exit_code == 1


def test_claimed_tests_that_ran_and_passed_after_the_last_edit(make_run: MakeRun) -> None:
    run = make_run([*AGENT, write(100, "/ws/a.py"), *proc(200, 100, ["pytest", "-q"]), exit_(200, 0)])
    res = _gate(run, {"tests_passed": True, "commands_run": ["pytest -q"], "files_changed": ["a.py"]})
    assert [o.status for o in res.outcomes] == ["pass", "pass", "pass"]
    assert res.exit_code == 0


def test_claimed_pass_with_an_edit_after_the_tests_fails(make_run: MakeRun) -> None:
    run = make_run([*AGENT, *proc(200, 100, ["pytest"]), exit_(200, 0), write(100, "/ws/a.py")])
    (o,) = _gate(run, {"tests_passed": True}).outcomes
    assert o.status == "fail" and "after the last test run" in o.summary


def test_commands_claims(make_run: MakeRun) -> None:
    run = make_run(
        [
            *AGENT,
            *proc(200, 100, ["bash", "-lc", "pytest -q && echo ok"]),
            *proc(201, 200, ["/ws/.venv/bin/pytest", "-q"]),
            exit_(201, 1),
            exit_(200, 1),
            *proc(202, 100, ["/usr/bin/python3", "/ws/tools/lint.py", "--fix"]),
            exit_(202, 0),
        ]
    )
    res = _gate(
        run,
        {
            "commands_run": [
                "pytest -q",
                "bash -lc 'pytest -q && echo ok'",
                "pytest   -q && echo ok",
                {"command": ["pytest", "-q"], "exit_code": 0},
                "tools/lint.py --check",
                "/ws/tools/lint.py --fix",
                "make deploy",
            ]
        },
    )
    got = {o.name: o for o in res.outcomes}
    assert got["command `pytest -q`"].status == "pass"  # one (unclaimed exit code) is enough
    assert got["command `bash -lc 'pytest -q && echo ok'`"].status == "pass"
    assert got["command `pytest   -q && echo ok`"].status == "pass"
    wrong_code = got["command `pytest -q` (exit 0)"]
    assert wrong_code.status == "fail" and "exited 1, not 0" in wrong_code.summary
    assert got["command `tools/lint.py --check`"].status == "fail"
    assert got["command `/ws/tools/lint.py --fix`"].status == "pass"
    assert got["command `make deploy`"].summary == "false completion: no such command was executed"


def test_file_claims_without_manifests_use_write_events(make_run: MakeRun) -> None:
    run = make_run(
        [
            *AGENT,
            write(100, "/ws/a.py"),
            write(100, "/ws/new.py", "file.create"),
            write(100, "/ws/old.py", "file.delete"),
        ]
    )
    res = _gate(
        run,
        {
            "files_changed": ["a.py", "./new.py", "missing.py"],
            "files_created": ["new.py"],
            "files_deleted": ["old.py", "a.py"],
        },
    )
    changed, created, deleted = res.outcomes
    assert changed.status == "fail" and "missing.py" in changed.summary and "1 of 3" in changed.summary
    assert created.status == "pass"
    assert deleted.status == "fail" and "a.py" in deleted.summary


def test_unknown_keys_are_listed_unchecked(make_run: MakeRun) -> None:
    res = _gate(make_run(AGENT), {"mood": "great", "tests_passed": False})
    assert [(o.name, o.status) for o in res.outcomes] == [
        ("tests_passed", "unchecked"),
        ("mood", "unchecked"),
    ]
    assert res.exit_code == 0


# -- codex exec --json ---------------------------------------------------------------
CODEX_NEW = [
    {"type": "thread.started", "thread_id": "t1"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "i0", "type": "reasoning", "text": "thinking"}},
    {
        "type": "item.started",
        "item": {
            "id": "i1",
            "type": "command_execution",
            "command": "bash -lc 'ls'",
            "status": "in_progress",
        },
    },
    {
        "type": "item.completed",
        "item": {
            "id": "i1",
            "type": "command_execution",
            "command": "bash -lc 'ls'",
            "aggregated_output": "a.py\n",
            "exit_code": 0,
            "status": "completed",
        },
    },
    {
        "type": "item.completed",
        "item": {
            "id": "i2",
            "type": "file_change",
            "status": "completed",
            "changes": [{"path": "/ws/a.py", "kind": "update"}],
        },
    },
    {
        "type": "item.completed",
        "item": {"id": "i3", "type": "agent_message", "text": "I fixed the bug in a.py. All tests pass."},
    },
    {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 2}},
]


def _jsonl(items: list[dict]) -> str:
    return "\n".join(json.dumps(i) for i in items) + "\n"


def test_codex_stream_claims_checked(make_run: MakeRun) -> None:
    run = make_run([*AGENT, *proc(300, 100, ["bash", "-lc", "ls"]), exit_(300, 0), write(100, "/ws/a.py")])
    claims = parse_claims(_jsonl(CODEX_NEW), "codex.jsonl")
    assert claims.format == "codex-jsonl"
    assert [(c.command, c.exit_code) for c in claims.commands] == [("bash -lc 'ls'", 0)]
    assert claims.final_message == "I fixed the bug in a.py. All tests pass."
    assert claims.tests_passed is True and "All tests pass." in claims.tests_passed_from
    res = run_gate(run, [], claims=claims)
    got = {o.name: o for o in res.outcomes}
    assert got["tests_passed"].status == "fail"  # claimed in the final message, never ran
    assert got["command `bash -lc 'ls'` (exit 0)"].status == "pass"
    assert got["files_changed"].status == "pass"
    assert res.exit_code == 1


def test_codex_legacy_msg_stream() -> None:
    lines = [
        {"id": "0", "msg": {"type": "task_started"}},
        {
            "id": "1",
            "msg": {
                "type": "exec_command_begin",
                "call_id": "c1",
                "command": ["bash", "-lc", "pytest"],
                "cwd": "/ws",
            },
        },
        {"id": "1", "msg": {"type": "exec_command_end", "call_id": "c1", "exit_code": 0, "stdout": ""}},
        {
            "id": "2",
            "msg": {
                "type": "patch_apply_begin",
                "call_id": "p",
                "auto_approved": True,
                "changes": {"/ws/b.py": {"add": {"content": "x"}}, "/ws/c.py": {"delete": {}}},
            },
        },
        {"id": "3", "msg": {"type": "agent_message", "message": "Done."}},
        {
            "id": "4",
            "msg": {"type": "task_complete", "last_agent_message": "Done. I ran the tests; 3 passed."},
        },
    ]
    c = parse_claims(_jsonl(lines) + "not json\n", "old.jsonl")
    assert [(x.argv, x.exit_code) for x in c.commands] == [(["bash", "-lc", "pytest"], 0)]
    assert [(f.path, f.kind) for f in c.files] == [("/ws/b.py", "added"), ("/ws/c.py", "deleted")]
    assert c.tests_passed is True and c.tests_run is True and c.skipped_lines == 1


def test_hedged_final_messages_are_not_claims() -> None:
    for text in (
        "The tests do not pass yet.",
        "I could not run the tests.",
        "3 passed, 1 failed.",
        "Some tests pass.",
    ):
        c = parse_claims(json.dumps({"final_message": text}))
        assert c.tests_passed is None, text


def test_bad_claims_files_name_the_place(tmp_path: Path) -> None:
    with pytest.raises(SourceError) as e:
        parse_claims('{"tests_passed": true,\n  "files_changed": [1, }', "claims.json")
    assert e.value.where.startswith("claims.json:2:")
    with pytest.raises(SourceError, match="tests_passed must be true or false"):
        parse_claims('{"tests_passed": "yes"}', "c.json")
    with pytest.raises(SourceError, match="empty"):
        parse_claims("  ", "c.json")


def test_cli_gate_with_claims(spy, store_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from evidence_helpers import record_events

    from spyglass.store import Store

    run = record_events(Store(store_dir, create=True), [*AGENT, write(100, "/ws/a.py")])
    claims = tmp_path / "claims.json"
    claims.write_text(json.dumps({"tests_passed": True}))
    res = spy("gate", run.id, "--require", "workspace-changed", "--claims", str(claims))
    assert res.exit_code == 1
    assert "FAIL  claim tests_passed: false completion" in res.output
    junit = spy(
        "gate", run.id, "--require", "workspace-changed", "--claims", str(claims), "--format", "junit"
    )
    import xml.etree.ElementTree as ET

    suites = ET.fromstring(junit.output.encode()).findall("testsuite")
    assert [s.get("name") for s in suites] == ["spyglass gate: requirements", "spyglass gate: claims"]
    claims.write_text("{oops")
    res = spy("gate", run.id, "--claims", str(claims))
    assert res.exit_code == 2 and "claims.json:1:2" in res.output


def test_module_and_script_forms_of_a_command(make_run: MakeRun) -> None:
    run = make_run([*AGENT, *proc(200, 100, ["/ws/.venv/bin/python", "-m", "pytest", "-q"]), exit_(200, 0)])
    res = _gate(run, {"commands_run": ["pytest -q", "python -m pytest -q", "python3 -m pytest", "pytest"]})
    assert [o.status for o in res.outcomes] == ["pass", "pass", "fail", "fail"]
