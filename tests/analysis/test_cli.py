"""The analysis commands over stored runs (replayed events), including user mistakes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spyglass.capture.replay import ReplayBackend
from spyglass.events import Event
from spyglass.session.record import RunRequest, record
from spyglass.store import Store


def events(ws: str, extra: bool = False) -> list[Event]:
    out = [
        Event(type="process.start", pid=300, ppid=1),
        Event(type="process.exec", pid=300, exe="/usr/bin/make", argv=["make", "-C", ws]),
        Event(type="file.read", pid=300, path=f"{ws}/Makefile"),
        Event(type="file.read", pid=300, path="/lib/x86_64-linux-gnu/libc.so.6"),
        Event(type="file.create", pid=300, path=f"{ws}/build/out.o"),
    ]
    if extra:
        out.append(Event(type="file.read", pid=300, path=f"{ws}/tests/test_outputs.py"))
        out.append(Event(type="net.connect", pid=300, address="10.1.2.3", port=443, transport="tcp"))
    return out


def store_runs(store_dir: Path, tmp_path: Path, spec: list[tuple[str | None, bool]]) -> list[str]:
    store = Store(store_dir, create=True)
    ids = []
    for i, (task, extra) in enumerate(spec):
        ws = tmp_path / f"ws{i}"
        ws.mkdir()
        req = RunRequest(argv=["make"], cwd=str(ws), task=task, workspace=[str(ws)])
        ids.append(record(req, ReplayBackend(events(str(ws), extra)), store).meta.id)
    return ids


def ok_json(result: Any) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_profile_text_json_dot(spy: Any, store_dir: Path, tmp_path: Path) -> None:
    store_runs(store_dir, tmp_path, [("build", False)])
    text = spy("profile", "latest")
    assert text.exit_code == 0
    assert "/usr/bin/make -C <WS>" in text.stdout and "noise left out: loader 1" in text.stdout
    data = ok_json(spy("profile", "latest", "--format", "json"))
    assert {(r["name"], r["op"]) for r in data["resources"]["file"]} == {
        ("<WS>/Makefile", "read"), ("<WS>/build/out.o", "create"), ("/usr/bin/make", "exec"),
    }
    assert len(ok_json(spy("profile", "latest", "--format", "json", "--top", "1"))["resources"]["file"]) == 1
    kept = ok_json(spy("profile", "latest", "--format", "json", "--noise", "keep"))
    assert any(r["name"].endswith("libc.so.6") for r in kept["resources"]["file"])
    assert spy("profile", "latest", "--format", "dot").stdout.startswith("digraph")


def test_compare_and_diff(spy: Any, store_dir: Path, tmp_path: Path) -> None:
    a, b, c = store_runs(store_dir, tmp_path, [("build", False), ("build", False), ("build", True)])
    out = ok_json(spy("compare", a, b, c, "--format", "json"))
    assert out["matrix"]["combined"][0][1] == 1.0
    assert out["matrix"]["combined"][0][2] < 1.0
    assert out["matrix"]["host"][0][1] is None
    text = spy("compare", "--task", "build")
    assert text.exit_code == 0 and "set similarity" in text.stdout
    d = ok_json(spy("diff", a, c, "--format", "json"))
    assert [e["name"] for e in d["file"]["only_b"]] == ["<WS>/tests/test_outputs.py"]
    assert [e["name"] for e in d["host"]["only_b"]] == ["10.1.2.3:443"]
    assert "no differences" in spy("diff", a, b).stdout


def test_unexplained_with_policy_grading_paths(spy: Any, store_dir: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    store_runs(store_dir, tmp_path, [("build", False), ("build", False), ("build", True)])
    out = ok_json(spy("unexplained", "latest", "--format", "json"))
    assert [(i["name"], i["category"]) for i in out["ranked"]] == [
        ("<WS>/tests/test_outputs.py", "scoring-file-access"),
        ("10.1.2.3:443", "unexplained"),
    ]
    # a policy that declares other grading paths
    (tmp_path / "spyglass.yaml").write_text("analysis:\n  grading_paths: ['solution/**']\n")
    monkeypatch.chdir(tmp_path)
    out = ok_json(spy("unexplained", "latest", "--format", "json", "--policy", "spyglass.yaml"))
    assert out["ranked"][0]["category"] == "unexplained" and out["scoring_access"] == []
    out = ok_json(spy("unexplained", "latest", "--format", "json", "--grading", "tests/**",
                      "--expect", "host:10.1.2.3:*"))
    assert [i["name"] for i in out["ranked"]] == ["<WS>/tests/test_outputs.py"]


def test_policy_ignore_paths(spy: Any, store_dir: Path, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    store_runs(store_dir, tmp_path, [("build", False)])
    (tmp_path / "spyglass.yaml").write_text("analysis:\n  ignore_paths: ['build/**']\n")
    monkeypatch.chdir(tmp_path)
    data = ok_json(spy("profile", "latest", "--format", "json", "--policy", "spyglass.yaml"))
    assert "<WS>/build/out.o" not in {r["name"] for r in data["resources"]["file"]}
    assert data["noise"]["ignored"] == 1


def test_compare_by_task_margins(spy: Any, store_dir: Path, tmp_path: Path) -> None:
    store = Store(store_dir, create=True)
    for i in range(6):
        ws = tmp_path / f"w{i}"
        ws.mkdir()
        task = "a" if i < 3 else "b"
        evs = [Event(type="file.read", pid=9, path=f"{ws}/{task}-{n}.txt") for n in range(3 + i % 3)]
        record(RunRequest(argv=["x"], cwd=str(ws), task=task), ReplayBackend(evs), store)
    out = ok_json(spy("compare", "--all", "--by", "task", "--format", "json"))
    sep = out["separation"]
    assert [t["task"] for t in sep["tasks"]] == ["a", "b"]
    assert sep["fraction_positive"] == 1.0
    text = spy("compare", "--all", "--by", "task").stdout
    assert "tasks with a positive margin: 100%" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("compare", "latest"), "compare needs at least two runs"),
        (("compare", "--task", "nope"), "no runs with task 'nope'"),
        (("profile", "zzzz"), "no run matches 'zzzz'"),
        (("unexplained", "latest"), "has no baseline"),
    ],
)
def test_mistakes_are_one_line_errors(spy: Any, store_dir: Path, tmp_path: Path, args: tuple[str, ...],
                                      message: str) -> None:
    store_runs(store_dir, tmp_path, [(None, False)])
    r = spy(*args)
    assert r.exit_code == 2
    assert message in r.stderr and "Traceback" not in r.output


def test_by_task_needs_labels(spy: Any, store_dir: Path, tmp_path: Path) -> None:
    a, b = store_runs(store_dir, tmp_path, [(None, False), ("x", False)])
    r = spy("compare", a, b, "--by", "task")
    assert r.exit_code == 2 and "no task label" in r.stderr


def test_coverage_without_skills(spy: Any, store_dir: Path, tmp_path: Path) -> None:
    store_runs(store_dir, tmp_path, [("build", False)])
    r = spy("coverage", "latest")
    assert r.exit_code == 0 and "no skills" in r.stdout
    assert ok_json(spy("coverage", "latest", "--format", "json"))["skills"] == []


def test_coverage_lists_a_skill_once_when_named_again(spy: Any, store_dir: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    skill = tmp_path / "skills" / "pdf"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: pdf\ndescription: make PDFs\n---\n")
    (skill / "scripts" / "make.py").write_text("print(1)\n")
    store = Store(store_dir, create=True)
    ws = tmp_path / "ws"
    ws.mkdir()
    req = RunRequest(argv=["make"], cwd=str(ws), workspace=[str(ws)], skills=[str(skill)])
    record(req, ReplayBackend([Event(type="process.start", pid=300, ppid=1),
                               Event(type="file.read", pid=300, path=f"{skill}/scripts/make.py")]), store)
    monkeypatch.chdir(tmp_path)
    for again in (str(skill), "skills/pdf", "skills"):  # the same path, a relative spelling, its collection
        data = ok_json(spy("coverage", "latest", "--skills", again, "--format", "json"))
        assert [s["skill"] for s in data["skills"]] == ["pdf"], again
