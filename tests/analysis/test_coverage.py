"""Skill recognition and coverage, from hand-built events."""

from __future__ import annotations

from pathlib import Path

import pytest

from spyglass.analysis import RunPlaces, coverage_of_events, find_skills, load_skill
from spyglass.analysis.coverage import format_coverage_text
from spyglass.analysis.skills import parse_front_matter
from spyglass.errors import UsageError
from spyglass.events import Event


def make_skill(root: Path, name: str = "csv-report", front: str | None = None) -> Path:
    d = root / name
    (d / "scripts").mkdir(parents=True)
    (d / "references").mkdir()
    (d / "assets").mkdir()
    (d / "SKILL.md").write_text(front if front is not None else
                                f"---\nname: {name}\ndescription: Summarise a CSV file.\n---\n# Use me\n")
    (d / "scripts" / "summarise.sh").write_text("#!/bin/sh\necho ok\n")
    (d / "references" / "format.md").write_text("columns...\n")
    (d / "assets" / "template.txt").write_text("{{x}}\n")
    (d / "scripts" / "__pycache__").mkdir()
    (d / "scripts" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (d / ".hidden").write_text("x")
    return d


def test_agent_skill_layout_is_recognised(tmp_path: Path) -> None:
    d = make_skill(tmp_path, "pdf-tools")
    sk = load_skill(d)
    assert sk.name == "pdf-tools" and sk.agent_skill
    assert sk.description == "Summarise a CSV file."
    assert sk.files == ("SKILL.md", "assets/template.txt", "references/format.md", "scripts/summarise.sh")
    assert [sk.part(f) for f in sk.files] == ["SKILL.md", "assets", "references", "scripts"]
    assert sk.problems == ()


def test_name_comes_from_front_matter(tmp_path: Path) -> None:
    d = make_skill(tmp_path, "dir-name", front="---\nname: real-name\ndescription: d\n---\n")
    assert load_skill(d).name == "real-name"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("# no front matter\n", "no front matter"),
        ("---\nname: x\n", "not closed"),
        ("---\nname: [unclosed\n---\n", "not valid YAML"),
        ("---\n- a\n---\n", "not a mapping"),
        ("---\nname: x\n---\n", "no 'description'"),
    ],
)
def test_front_matter_problems(text: str, problem: str) -> None:
    _, problems = parse_front_matter(text)
    assert any(problem in p for p in problems)


def test_collections_and_plain_dirs(tmp_path: Path) -> None:
    coll = tmp_path / "skills"
    make_skill(coll, "a")
    make_skill(coll / "nested", "b")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "tool.py").write_text("")
    found = find_skills([coll, plain])
    assert [s.name for s in found] == ["a", "b", "plain"]
    assert not found[2].agent_skill
    with pytest.raises(UsageError, match="not found"):
        find_skills([tmp_path / "nope"])


def test_coverage_is_exactly_three_quarters(tmp_path: Path) -> None:
    d = make_skill(tmp_path)
    sk = load_skill(d)
    events = [
        Event(type="file.read", pid=10, path=f"{d}/SKILL.md"),
        Event(type="file.read", pid=10, path=f"{d}/SKILL.md"),
        Event(type="file.read", pid=10, path=f"{d}/references/format.md"),
        Event(type="process.exec", pid=11, exe=f"{d}/scripts/summarise.sh", argv=["summarise.sh"]),
        # a listing touches no file
        Event(type="file.read", pid=10, path=str(d), flags="O_RDONLY|O_DIRECTORY"),
        Event(type="file.read", pid=10, path=f"{d}/assets/template.txt", ok=False, errno="EACCES"),
    ]
    (cov,) = coverage_of_events(events, [sk], RunPlaces(workspace=[str(tmp_path / "ws")]))
    assert cov.coverage == 0.75
    assert cov.used
    assert cov.touched == {
        "SKILL.md": ["read"],
        "references/format.md": ["read"],
        "scripts/summarise.sh": ["executed"],
    }
    assert cov.untouched == ["assets/template.txt"]
    assert cov.findings == []
    assert cov.parts()["assets"] == {"touched": 0, "total": 1}
    d2 = cov.to_dict()
    assert d2["coverage"] == 0.75 and d2["executed"] == ["scripts/summarise.sh"]


def test_unused_skill_is_reported(tmp_path: Path) -> None:
    used, unused = make_skill(tmp_path, "used"), make_skill(tmp_path, "unused")
    skills = find_skills([used, unused])
    events = [Event(type="file.read", pid=10, path=f"{used}/references/format.md")]
    a, b = coverage_of_events(events, skills)
    assert a.coverage == 0.25
    assert [f.id for f in a.findings] == ["skill-md-not-read"]
    assert b.coverage == 0.0 and not b.used
    assert [(f.id, f.skill) for f in b.findings] == [("skill-not-used", "unused")]
    text = format_coverage_text([a, b])
    assert "skill-not-used" in text and "never touched" in text


def test_written_files_count(tmp_path: Path) -> None:
    d = make_skill(tmp_path)
    events = [
        Event(type="file.create", pid=1, path=f"{d}/assets/template.txt.new"),
        Event(type="file.rename", pid=1, path=f"{d}/assets/template.txt.new",
              target=f"{d}/assets/template.txt"),
    ]
    (cov,) = coverage_of_events(events, [load_skill(d)])
    assert cov.touched == {"assets/template.txt": ["written"]}
