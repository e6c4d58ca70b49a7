"""Unexplained activity against a baseline, ranking, scoring-file access."""

from __future__ import annotations

from spyglass.analysis import Profile, unexplained
from spyglass.analysis.unexplained import SCORING, format_unexplained_text


def prof(run_id: str, **kinds: dict[tuple[str, str], int]) -> Profile:
    p = Profile(run_id=run_id)
    for kind, edges in kinds.items():
        for (name, op), n in edges.items():
            p.add(kind, name, op, n)
    return p


BASE_FILES = {("<WS>/main.py", "read"): 1, ("<WS>/out.txt", "create"): 1, ("/etc/passwd", "read"): 1}
BASE_CMDS = {("/usr/bin/python3 <WS>/main.py", "exec"): 1}


def baseline() -> list[Profile]:
    return [prof(f"b{i}", file=dict(BASE_FILES), command=dict(BASE_CMDS)) for i in range(3)]


def test_exactly_the_new_resources_are_listed() -> None:
    run = prof(
        "r",
        file={**BASE_FILES, ("<WS>/tests/test_outputs.py", "read"): 1},
        command=dict(BASE_CMDS),
        host={("127.0.0.1:9000", "connect"): 2},
    )
    rep = unexplained(run, baseline())
    assert [(i.kind, i.name, i.category) for i in rep.items] == [
        ("file", "<WS>/tests/test_outputs.py", SCORING),
        ("host", "127.0.0.1:9000", "unexplained"),
    ]
    assert [i.name for i in rep.scoring_access] == ["<WS>/tests/test_outputs.py"]
    assert rep.by_kind()["host"][0].ops == {"connect": 2}
    assert rep.missing == [] and rep.new_access == []
    d = rep.to_dict()
    assert d["unexplained"]["file"][0]["category"] == SCORING
    assert d["baseline"] == ["b0", "b1", "b2"]
    assert "scoring-file access" in format_unexplained_text(rep)


def test_scoring_reads_are_reported_even_when_the_baseline_read_them() -> None:
    files = {**BASE_FILES, ("<WS>/solution/solve.sh", "read"): 1}
    rep = unexplained(prof("r", file=files), [prof("b", file=files)])
    assert rep.items == []
    assert [i.name for i in rep.scoring_access] == ["<WS>/solution/solve.sh"]


def test_writing_grading_files_is_not_a_scoring_read() -> None:
    rep = unexplained(prof("r", file={("<WS>/tests/new_test.py", "create"): 1}), baseline())
    assert rep.items[0].category == "unexplained" and rep.scoring_access == []


def test_grading_paths_are_configurable() -> None:
    run = prof("r", file={("/tests/test_outputs.py", "read"): 1})
    assert unexplained(run, baseline()).items[0].category == "unexplained"
    rep = unexplained(run, baseline(), grading_paths=["/tests/**"])
    assert rep.items[0].category == SCORING


def test_ranking_by_unusualness() -> None:
    run = prof(
        "r",
        file={
            ("<WS>/notes.txt", "read"): 5,  # new file beside the baseline's: 1 - 1/2
            ("<HOME>/.ssh/id_rsa", "read"): 1,  # nothing under <HOME>: 1.0
            ("/etc/shadow", "read"): 1,  # /etc known: 1 - 1/2
        },
        command={("/usr/bin/python3 <WS>/other.py", "exec"): 1, ("/usr/bin/curl x", "exec"): 1},
    )
    rep = unexplained(run, baseline())
    scores = {i.name: i.score for i in rep.items}
    assert scores["<HOME>/.ssh/id_rsa"] == 1.0
    assert scores["/etc/shadow"] == 0.5
    assert scores["<WS>/notes.txt"] == 0.5
    assert scores["/usr/bin/curl x"] == 1.0
    assert scores["/usr/bin/python3 <WS>/other.py"] == 0.5
    names = [i.name for i in rep.items]
    assert names.index("<HOME>/.ssh/id_rsa") < names.index("<WS>/notes.txt")
    # equal scores: the more accessed first
    assert names.index("<WS>/notes.txt") < names.index("/etc/shadow")
    shadow = next(i for i in rep.items if i.name == "/etc/shadow")
    assert shadow.nearest == "/etc"


def test_expected_patterns_explain() -> None:
    run = prof(
        "r",
        file={("<WS>/build/out.o", "create"): 1},
        host={("pypi.org:443", "connect"): 1},
        command={("/usr/bin/pip install x", "exec"): 1},
    )
    rep = unexplained(run, [], expected=["<WS>/build/**", "host:pypi.org:*", "command:/usr/bin/pip *"])
    assert rep.items == []
    rep2 = unexplained(run, [], expected=["file:<WS>/build/**"])
    assert {i.kind for i in rep2.items} == {"host", "command"}


def test_new_access_and_missing() -> None:
    run = prof("r", file={("<WS>/main.py", "write"): 1, ("/etc/passwd", "read"): 1}, command=dict(BASE_CMDS))
    rep = unexplained(run, baseline())
    assert rep.items == []
    assert [(i.name, i.ops) for i in rep.new_access] == [("<WS>/main.py", {"write": 1})]
    assert rep.missing == [("file", "<WS>/out.txt")]
