"""Test runs are recognised from exec events; the last edit leaves out the tests' own writes."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from evidence_helpers import ev, exit_, proc, write

from spyglass.events import Event
from spyglass.evidence.testruns import TestPattern, TestRunTracker, runs_no_tests


def _track(events: Sequence[Event], patterns: Sequence[str] | None = None):  # type: ignore[no-untyped-def]
    t = TestRunTracker(["/ws"]) if patterns is None else TestRunTracker(["/ws"], patterns)
    for i, e in enumerate(events, 1):
        e.seq = i
        e.ts = i * 1_000_000_000
        t.feed(e)
    return t.result()


@pytest.mark.parametrize(
    ("pattern", "argv", "hit"),
    [
        ("pytest", ["pytest", "-q"], True),
        ("pytest", ["/ws/.venv/bin/pytest"], True),
        ("pytest", ["/usr/bin/python3", "/ws/.venv/bin/pytest", "-x"], True),
        ("python -m pytest", ["python3.11", "-m", "pytest", "-q"], True),
        ("python -m pytest", ["python3", "-X", "dev", "-m", "pytest"], True),
        ("python -m pytest", ["python3", "-m", "pip", "install", "pytest"], False),
        ("npm test", ["npm", "test"], True),
        ("npm test", ["npm", "run", "test"], True),
        ("go test", ["go", "test", "./..."], True),
        ("go test", ["go", "build", "./..."], False),
        ("make test", ["make", "-j4", "test"], True),
        ("make test", ["make"], False),
        ("tox", ["tox", "-e", "py311"], True),
        ("pytest", ["grep", "pytest", "setup.cfg"], False),
        ("pytest", ["bash", "-c", "pytest -q"], False),  # the shell's child exec is the test run
    ],
)
def test_patterns(pattern: str, argv: list[str], hit: bool) -> None:
    assert TestPattern.parse(pattern).match(argv) is hit


def test_flags_that_run_no_tests() -> None:
    assert runs_no_tests(["pytest", "--collect-only"]) == "--collect-only"
    assert runs_no_tests(["cargo", "test", "--no-run"]) == "--no-run"
    assert runs_no_tests(["make", "-n", "test"]) == "-n"
    assert runs_no_tests(["pytest", "-q", "-n", "4"]) is None


def test_tests_after_the_last_edit_with_exit_code_and_time() -> None:
    events = [
        ev("process.exec", 100, argv=["sh", "agent.sh"]),
        write(100, "/ws/a.py"),
        *proc(200, 100, ["python3", "-m", "pytest", "-q"]),
        write(200, "/ws/__pycache__/a.cpython-311.pyc", "file.create"),
        write(200, "/ws/.pytest_cache/v/cache/lastfailed"),
        exit_(200, 0),
    ]
    res = _track(events)
    assert res.last_edit is not None and res.last_edit.path == "/ws/a.py" and res.last_edit.seq == 2
    (run,) = res.runs
    assert run.command == "python3 -m pytest -q"
    assert (run.seq, run.end_seq, run.exit_code, run.passed, run.after_last_edit) == (4, 7, 0, True, True)
    assert run.duration_s == 3.0


def test_edit_after_the_tests() -> None:
    events = [
        *proc(200, 100, ["pytest"]),
        exit_(200, 0),
        write(100, "/ws/a.py", "file.rename", target="/ws/b.py"),
    ]
    res = _track(events)
    assert res.runs[0].after_last_edit is False
    assert res.last_edit is not None and res.last_edit.type == "file.rename"


def test_writes_by_the_test_tree_are_not_edits() -> None:
    """A test that writes a fixture file (through a child process) does not move the last edit."""
    events = [
        write(100, "/ws/a.py"),
        *proc(200, 100, ["pytest"]),
        *proc(201, 200, ["python3", "helper.py"]),
        write(201, "/ws/generated.txt", "file.create"),
        exit_(201),
        exit_(200, 0),
    ]
    res = _track(events)
    assert res.last_edit is not None and res.last_edit.path == "/ws/a.py"
    assert res.runs[0].after_last_edit and res.runs[0].edits_inside == 1


def test_writes_outside_the_workspace_failed_writes_and_caches_are_not_edits() -> None:
    events = [
        *proc(200, 100, ["pytest"]),
        exit_(200, 0),
        write(100, "/tmp/scratch"),
        write(100, "/ws/a.py", ok=False, errno="EACCES"),
        write(100, "/ws/pkg/__pycache__/m.pyc"),
        write(100, "/ws/.git/index"),
        ev("file.read", 100, path="/ws/a.py"),
    ]
    res = _track(events)
    assert res.last_edit is None
    assert res.runs[0].after_last_edit


def test_nested_test_commands_count_once_and_the_outer_result_counts() -> None:
    events = [
        *proc(200, 100, ["tox"]),
        *proc(201, 200, ["pytest"]),
        exit_(201, 1),
        exit_(200, 0),
    ]
    res = _track(events)
    assert [r.command for r in res.runs] == ["tox"]
    assert res.runs[0].exit_code == 0


def test_collect_only_is_not_counted() -> None:
    res = _track([*proc(200, 100, ["pytest", "--collect-only"]), exit_(200, 0)])
    assert res.runs == []
    assert res.not_counted[0].reason == "--collect-only runs no tests"


def test_killed_test_run_and_missing_exit() -> None:
    res = _track(
        [
            *proc(200, 100, ["pytest"]),
            ev("process.exit", 200, signal="SIGKILL"),
            *proc(300, 100, ["go", "test"]),
        ]
    )
    assert [r.passed for r in res.runs] == [False, False]
    assert "killed by SIGKILL" in res.runs[0].describe()
    assert "no exit seen" in res.runs[1].describe()


def test_configured_patterns() -> None:
    events = [*proc(200, 100, ["bats", "tests/"]), exit_(200, 0), *proc(300, 100, ["pytest"]), exit_(300)]
    res = _track(events, ["bats"])
    assert [r.command for r in res.runs] == ["bats tests/"]


def test_reused_pid_does_not_inherit_test_membership() -> None:
    events = [
        *proc(200, 100, ["pytest"]),
        *proc(201, 200, ["python3", "x.py"]),
        exit_(200, 0),
        # 201's exit was never seen; the pid is reused by a child of the agent
        ev("process.start", 201, ppid=100),
        write(201, "/ws/late.py"),
    ]
    res = _track(events)
    assert res.last_edit is not None and res.last_edit.path == "/ws/late.py"
    assert not res.runs[0].after_last_edit
